"""Client-side rate limiting: a token bucket, the same model as client-go's QPS/burst limiter."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    """Allows ``burst`` requests at once, then ``qps`` per second on average.

    ``qps <= 0`` disables limiting. Waiters are served in arrival order because each caller reserves its
    slot (possibly in the future) before sleeping, so a burst of callers cannot starve an earlier one.
    """

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(1, burst)
        self._clock = clock
        self._tokens = float(self.burst)
        self._last = self._now()

    def _now(self) -> float:
        return self._clock()

    def reserve(self) -> float:
        """Take one token; returns how many seconds the caller must wait before using it."""
        if self.qps <= 0:
            return 0.0
        now = self._now()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def try_reserve(self, max_wait: float) -> float | None:
        """Take one token if it is free within ``max_wait`` seconds; returns the wait, or ``None`` (and takes
        nothing) when the caller would have to wait longer."""
        if self.qps <= 0:
            return 0.0
        now = self._now()
        tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        wait = 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.qps
        if wait > max_wait:
            return None
        self._tokens, self._last = tokens - 1.0, now
        return wait

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            await asyncio.sleep(delay)
