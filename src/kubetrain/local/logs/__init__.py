"""Pod logs on this machine: ``index`` (when each byte was written), ``read`` (one log as kubectl reads it) and
``stream`` (every step's log and state changes for ``run`` and ``logs -f``)."""
