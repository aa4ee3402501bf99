"""A de-duplicating work queue with two lanes, per-key backoff and delayed re-adds.

Semantics a caller may rely on (the same as client-go's workqueue, plus priority lanes):

* a key is queued at most once; adding a queued key is a no-op (a ``HIGH`` add promotes a ``LOW`` one);
* a key is never handed to two workers at once: adding a key that is being processed marks it dirty, and it is
  queued again when the worker calls :meth:`done`;
* ``HIGH`` (watch events: new or changed objects) is served before ``LOW`` (initial lists, relists, resyncs),
  except that every ``fairness``-th pop takes from ``LOW`` so neither lane can starve the other.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Hashable

HIGH = 1
LOW = 0


class WorkQueue:
    def __init__(self, *, base_delay: float = 0.05, max_delay: float = 300.0, fairness: int = 8) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.fairness = fairness
        self._lanes: dict[int, deque[Hashable]] = {HIGH: deque(), LOW: deque()}
        self._queued: dict[Hashable, int] = {}
        self._processing: set[Hashable] = set()
        self._dirty: dict[Hashable, int] = {}
        self._failures: dict[Hashable, int] = {}
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._wake = asyncio.Event()
        self._pops = 0
        self._closed = False

    def __len__(self) -> int:
        return len(self._queued)

    @property
    def processing(self) -> int:
        return len(self._processing)

    def add(self, key: Hashable, priority: int = HIGH) -> None:
        if self._closed:
            return
        if key in self._processing:
            self._dirty[key] = max(priority, self._dirty.get(key, LOW))
            return
        current = self._queued.get(key)
        if current is not None and current >= priority:
            return
        # A promoted key stays in the LOW deque as a stale entry; get() skips entries whose lane changed.
        self._queued[key] = priority
        self._lanes[priority].append(key)
        self._wake.set()

    def add_after(self, key: Hashable, delay: float, priority: int = HIGH) -> None:
        """Add ``key`` after ``delay`` seconds; an earlier pending timer for the key wins."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        existing = self._timers.get(key)
        if existing is not None:
            if existing.when() <= when:
                return
            existing.cancel()
        self._timers[key] = loop.call_at(when, self._fire, key, priority)

    def _fire(self, key: Hashable, priority: int) -> None:
        self._timers.pop(key, None)
        self.add(key, priority)

    def add_rate_limited(self, key: Hashable) -> float:
        """Re-add after an exponential backoff that grows with the key's consecutive failures."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        delay = min(self.max_delay, self.base_delay * (2.0**failures))
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        """Reset the key's backoff (call after a successful reconcile)."""
        self._failures.pop(key, None)

    def failures(self, key: Hashable) -> int:
        return self._failures.get(key, 0)

    def _pop(self) -> Hashable | None:
        self._pops += 1
        order = (LOW, HIGH) if self._pops % self.fairness == 0 else (HIGH, LOW)
        for lane in order:
            dq = self._lanes[lane]
            while dq:
                key = dq.popleft()
                if self._queued.get(key) == lane:
                    del self._queued[key]
                    return key
        return None

    async def get(self) -> Hashable:
        """The next key; the caller must call :meth:`done` with it. Raises ``CancelledError`` after close."""
        while True:
            if self._closed:
                raise asyncio.CancelledError
            key = self._pop()
            if key is not None:
                self._processing.add(key)
                return key
            self._wake.clear()
            await self._wake.wait()

    def done(self, key: Hashable) -> None:
        self._processing.discard(key)
        priority = self._dirty.pop(key, None)
        if priority is not None:
            self.add(key, priority)

    def close(self) -> None:
        """Stop handing out keys (graceful shutdown): waiting workers wake up and exit."""
        self._closed = True
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        self._wake.set()
