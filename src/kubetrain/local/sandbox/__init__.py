"""One pod on this machine: a process group in a bubblewrap sandbox (``pods``, ``namespaces``), the TrainJob's
network namespace (``netns``, ``_nsholder``), volumes, env, ``securityContext``, the MPI ``rsh`` stand-in, stopping
like the kubelet (``terminate``) and the host programs it needs (``programs``)."""
