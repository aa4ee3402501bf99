"""The local JobSet and Job controllers: one supervisor process per TrainJob runs its pods until it finishes.

``controller`` is the process (``python -m kubetrain.local.supervisor.controller``) and its loop; the rest are the
parts it is assembled from: ``jobstate`` (jobs, pods, events, persistence), ``launch`` (starting and stopping pods
through the scheduler), ``readiness`` (dependsOn and probes), ``failure_policy`` (backoffLimit, success and failure
policies), ``backoff`` (the kubelet's crash-loop delay), ``scaling`` (adding or removing node pods) and
``autoscaling`` (elasticPolicy.metrics).
"""
