"""What one TrainJob's status endpoint accepts: its rate per pod, its read timeout, and its logger.

Shared by the endpoint (``server``) and its HTTP side (``handler``), which is loaded only when a pod first connects.
"""

from __future__ import annotations

import logging

log = logging.getLogger("kubetrain.local.status")

RATE, BURST = 2.0, 10
"""Reports per second per pod, and the burst allowed: the SDK sends at most one per 5 s; a loop gone wild is cut
off without slowing the supervisor."""
TIMEOUT = 10.0
"""Seconds a connection may take to send its request (upstream's read timeout)."""
