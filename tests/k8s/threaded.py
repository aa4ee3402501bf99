"""A fake API server (optionally with the operator) on a background thread, for synchronous callers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kubetrain.compiler import fixed_keygen
from kubetrain.k8s.operator import Operator, OperatorSettings
from kubetrain.testing.fakeapi import FakeApiServer
from tests.k8s.helpers import client_for


class Background:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.api = FakeApiServer()
        self.call(self.api.start())
        self._stop: asyncio.Event | None = None
        self._op_future: Future[Any] | None = None

    def call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def start_operator(self) -> Operator:
        async def make() -> Operator:
            client = client_for(self.api, qps=0)
            op = Operator(client, OperatorSettings(leader_election=False, health_port=None), keygen=fixed_keygen())
            self._stop = asyncio.Event()
            self._op_future = asyncio.run_coroutine_threadsafe(op.run(self._stop), self.loop)
            return op

        return self.call(make())

    def close(self) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            assert self._op_future is not None
            self._op_future.result(30)
        self.call(self.api.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@contextmanager
def background_api(tmp_path: Path, *, operator: bool = False) -> Iterator[tuple[Background, str]]:
    bg = Background()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(bg.api.kubeconfig())
    try:
        if operator:
            bg.start_operator()
        yield bg, str(kubeconfig)
    finally:
        bg.close()
