"""This machine's cpu, memory, GPUs and extended resources shared among TrainJobs (``scheduler``, ``resources``),
and the autoscaler's arithmetic and measurements (``hpa``, ``usage``)."""
