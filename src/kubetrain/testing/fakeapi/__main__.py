"""``python -m kubetrain.testing.fakeapi --port 8001 --kubeconfig /tmp/fake.kubeconfig``: a throwaway API server.

For trying the operator, the CLI's cluster mode or the Kubeflow SDK without a cluster. State is in memory and
lost on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from kubetrain.testing.fakeapi.server import FakeApiServer


async def serve(port: int, kubeconfig: str | None) -> None:
    api = await FakeApiServer().start(port)
    api.record = False  # a long-running server must not grow its request log forever
    if kubeconfig:
        Path(kubeconfig).write_text(api.kubeconfig())
    print(f"fake API server on {api.url}" + (f"; kubeconfig {kubeconfig}" if kubeconfig else ""), flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await api.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--kubeconfig", default=None, help="write a kubeconfig pointing at the server here")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.kubeconfig))


if __name__ == "__main__":
    main()
