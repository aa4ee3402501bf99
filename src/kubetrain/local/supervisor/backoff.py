"""The kubelet's restart back-off for a crashing container: the first restart is immediate, then 10 s, doubling
up to 5 min; a container that ran for 10 min since its last restart starts over at no delay."""

from __future__ import annotations

from dataclasses import dataclass

INITIAL = 10.0
MAXIMUM = 300.0
RESET_AFTER = 2 * MAXIMUM


@dataclass
class CrashLoopBackOff:
    delay: float = INITIAL
    last_restart: float | None = None

    def next_delay(self, failed_at: float) -> float:
        """Seconds to wait before restarting a container that failed at ``failed_at`` (seconds, any clock)."""
        if self.last_restart is None or failed_at - self.last_restart > RESET_AFTER:
            self.delay = INITIAL
            self.last_restart = failed_at
            return 0.0
        wait = self.delay
        self.delay = min(self.delay * 2, MAXIMUM)
        self.last_restart = failed_at + wait
        return wait
