"""The local backend: runs the compiled JobSet of a TrainJob as sandboxed processes on this machine.

Rooms, each importing only the ones below it (import-linter's ``local-rooms`` contract):

``backend``                       the CLI's contract (``kubetrain.api.views.Backend``) on this machine
``housekeeping``, ``objects``     pruning finished TrainJobs; ConfigMaps, Secrets and PVCs applied locally
``supervisor/``                   the JobSet + Job controller, one process per TrainJob: pods, restarts, policies
``submit/``                       accepting TrainJobs: admission against this machine, updates, the compile cache
``scheduling/``                   this machine's capacity shared among gangs; HPA arithmetic and usage sampling
``statusendpoint/``               where a TrainJob's pods report progress (TLS, tokens, rate limits)
``logs/``                         reading pod logs the way kubectl does (tail, since, timestamps, follow)
``store/``                        the SQLite state, the status vocabulary, and lost supervisors found by readers
``sandbox/``                      one pod: bubblewrap, namespaces, its network, volumes, env, securityContext
``plan``, ``config``, ``paths``   the JobSet unrolled into pods; user settings; where state lives
"""
