"""Calling the synchronous backend contract from the UI's event loop.

The backends are synchronous: the local one reads SQLite, the cluster one drives a private event loop per instance
and must not be entered by two threads at once. So every worker thread gets a backend of its own, made on first use,
and each long stream (a watch, a log follow) runs on a thread of its own with a backend of its own, handing its
items to the event loop through a bounded queue: a slow browser slows the stream down instead of growing memory.
Closing a stream stops it at its next item or heartbeat (both backends yield one at least every half second).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar

from kubetrain.api.views import Backend

T = TypeVar("T")
X = TypeVar("X")

log = logging.getLogger("kubetrain.ui")


def close_backend(backend: object) -> None:
    close = getattr(backend, "close", None)
    if callable(close):
        with contextlib.suppress(Exception):  # closing is best effort: the process or thread is ending anyway
            close()


class Backends:
    """Backend instances for the UI's threads; ``call`` runs one short call, ``stream`` one long one."""

    def __init__(self, factory: Callable[[], Backend], *, workers: int = 8) -> None:
        self.factory = factory
        self._local = threading.local()
        self._pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="kubetrain-ui")
        self._made: list[Backend] = []
        self._lock = threading.Lock()

    def _backend(self) -> Backend:
        backend: Backend | None = getattr(self._local, "backend", None)
        if backend is None:
            backend = self.factory()
            self._local.backend = backend
            with self._lock:
                self._made.append(backend)
        return backend

    async def call(self, fn: Callable[[Backend], T]) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: fn(self._backend()))

    def stream(self, open_: Callable[[Backend], Iterator[X]], *, name: str, maxsize: int = 64) -> Stream[X]:
        return Stream(self.factory, open_, name=name, maxsize=maxsize)

    def close(self) -> None:
        """Stop the workers and close their backends. Closed on a thread of its own: a cluster backend closes its
        connections on its private event loop, which cannot run on a thread where another loop is running."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            made, self._made = self._made, []
        def close_all() -> None:
            for backend in made:
                close_backend(backend)

        closer = threading.Thread(target=close_all, name="kubetrain-ui-close")
        closer.start()
        closer.join(10)


class StreamEnded(Exception):
    pass


class Stream(Generic[X]):
    """The items of ``open_(backend)``, produced on a thread of its own and consumed with ``async for``.

    An exception of the generator is raised to the consumer; ``close`` (or leaving the ``async for``) stops the
    thread at the generator's next item and closes the generator and its backend."""

    def __init__(
        self, factory: Callable[[], Backend], open_: Callable[[Backend], Iterator[X]], *, name: str, maxsize: int
    ) -> None:
        self._factory, self._open = factory, open_
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue(maxsize)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"kubetrain-ui-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        backend: Backend | None = None
        try:
            backend = self._factory()
            items = self._open(backend)
            try:
                for item in items:
                    if self._closed.is_set() or not self._deliver(("item", item)):
                        break
            finally:
                close = getattr(items, "close", None)
                if callable(close):
                    close()
            self._deliver(("end", None))
        except BaseException as exc:  # handed to the consumer, who turns it into what the user sees
            self._deliver(("error", exc))
        finally:
            if backend is not None:
                close_backend(backend)

    def _deliver(self, message: tuple[str, Any]) -> bool:
        if self._closed.is_set():
            return False
        try:
            future = asyncio.run_coroutine_threadsafe(self._queue.put(message), self._loop)
        except RuntimeError:
            return False  # the event loop is gone: the server is stopping
        while True:
            try:
                future.result(timeout=0.5)
                return True
            except concurrent.futures.TimeoutError:
                if self._closed.is_set():
                    future.cancel()
                    return False
            except (concurrent.futures.CancelledError, RuntimeError):
                return False

    def close(self) -> None:
        self._closed.set()

    def __aiter__(self) -> AsyncIterator[X]:
        return self._items()

    async def _items(self) -> AsyncIterator[X]:
        try:
            while True:
                kind, value = await self._queue.get()
                if kind == "item":
                    yield value
                elif kind == "end":
                    return
                else:
                    raise value
        finally:
            self.close()
