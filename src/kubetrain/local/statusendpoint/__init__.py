"""The local status endpoint, where a TrainJob's pods report progress and metrics (``status.trainerStatus``):
``server`` (tokens, rate limits, the socket in the TrainJob's network), ``handler`` (its HTTPS side, loaded on
first use), ``tls`` (one CA per ``$KUBETRAIN_HOME``), ``progress`` (reports, else what the logs show)."""
