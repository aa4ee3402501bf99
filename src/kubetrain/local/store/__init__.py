"""The local backend's state: ``db`` (SQLite: TrainJobs, runtimes, pods, events, the scheduler's books),
``status`` (TrainJob status in the cluster's vocabulary) and ``reaper`` (TrainJobs whose supervisor died, found and
recorded by whoever reads them)."""
