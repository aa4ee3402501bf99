"""``kubetrain ui``: serve the web UI on this machine's loopback address and open it in the browser."""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
import sqlite3
import sys
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import click

from kubetrain.service.backends import (
    LOCAL_STATE_FIX,
    BackendUnavailable,
    cluster_backend,
    is_cluster,
    local_backend,
    with_backend_options,
)

if TYPE_CHECKING:
    from kubetrain.api.views import Backend
    from kubetrain.ui.state import Ui, UiSettings


def register(group: click.Group) -> None:
    @group.command("ui")
    @click.option("--port", type=click.IntRange(0, 65535), default=8421, show_default=True,
                  help="Port to listen on (0: any free port).")
    @click.option("--address", default="127.0.0.1", show_default=True,
                  help="Address to listen on. Anything but loopback lets other machines reach the UI (plain HTTP; "
                       "the session token still guards it).")
    @click.option("--no-browser", is_flag=True, help="Only print the address; do not open a browser.")
    @click.option("-A", "--all-namespaces", is_flag=True, help="Start on the TrainJobs of every namespace.")
    @click.option("-v", "--verbose", is_flag=True, help="Log each request (without its token) to stderr.")
    @with_backend_options
    def ui(
        port: int,
        address: str,
        no_browser: bool,
        all_namespaces: bool,
        verbose: bool,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """Serve a web UI for TrainJobs: the list with live state and progress, each job's steps, events, logs,
        metric charts and compiled JobSet, suspend/resume/scale/delete, the runtimes, and a submit form.

        It works on this machine, or on a cluster with --kubeconfig/--context, acting with your own credentials
        as kubectl does (what your RBAC forbids is shown as such). It listens on 127.0.0.1 and prints an address
        with a token for this session; only a browser that opened that address can use it. Ctrl-C stops it.
        Needs the optional extra: pip install 'kubetrain[ui]'.

        \b
        Examples:
          kubetrain ui
          kubetrain ui --port 9000 --no-browser
          kubetrain ui -A --context prod
          kubetrain ui -n team-a --kubeconfig ~/.kube/config
        """
        try:
            import aiohttp_sse  # noqa: F401
            import jinja2  # noqa: F401
        except ImportError as exc:
            _fail(f"kubetrain ui needs the optional extra 'ui' ({exc.name} is not installed)",
                 "pip install 'kubetrain[ui]'")
        from kubetrain.ui.app import bind
        from kubetrain.ui.errors import UiError
        from kubetrain.ui.state import Ui, UiSettings

        cluster = is_cluster(kubeconfig, context)
        settings = UiSettings(namespace=namespace, all_namespaces=all_namespaces, kubeconfig=kubeconfig,
                              context=context, cluster=cluster, address=address, port=port, verbose=verbose)
        factory, label = _backend(settings)
        try:
            sock = bind(settings)
        except UiError as exc:
            _fail(exc.message, exc.fix)
        logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s %(message)s")
        ui = Ui(settings, factory, label=label)
        host = f"[{settings.address}]" if ":" in settings.address else settings.address
        url = f"http://{host}:{settings.port}/?token={ui.session.token}"
        if not _loopback(settings.address):
            click.echo(f"warning: listening on {settings.address}: other machines can reach this UI over plain "
                       "HTTP; anyone with the address below acts with your credentials", err=True)

        def started() -> None:
            click.echo(f"kubetrain ui: {label}")
            click.echo(f"open {url}")
            click.echo("Ctrl-C stops it.", err=True)
            sys.stdout.flush()
            if not no_browser:
                try:
                    webbrowser.open(url)
                except webbrowser.Error:
                    pass  # no browser here: the printed address is the way in

        try:
            asyncio.run(_main(ui, sock, started))
        except KeyboardInterrupt:
            pass
        click.echo("kubetrain ui stopped", err=True)


async def _main(ui: Ui, sock: socket.socket, started: Callable[[], None]) -> None:
    from kubetrain.ui.app import serve

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await serve(ui, sock, started, stop)


def _loopback(address: str) -> bool:
    return address in ("localhost", "::1") or address.startswith("127.")


def _fail(message: str, fix: str | None = None) -> NoReturn:
    """The CLI's way to stop: the reason and the fix on stderr, exit status 1, no traceback."""
    click.echo(f"error: {message}", err=True)
    if fix:
        click.echo(f"  fix: {fix}", err=True)
    sys.exit(1)


def _backend(settings: UiSettings) -> tuple[Callable[[], Backend], str]:
    """A factory of backends (one per worker thread) and how the page header names where it acts."""
    if not settings.cluster:
        try:
            local_backend()  # fail now, with the reason, rather than on the first page
        except (OSError, sqlite3.Error) as exc:
            _fail(f"cannot open this machine's kubetrain state: {exc}", LOCAL_STATE_FIX)
        return local_backend, "this machine"
    kubeconfig, context = settings.kubeconfig, settings.context
    try:
        probe = cluster_backend(kubeconfig, context, elsewhere="use this machine")
    except BackendUnavailable as exc:
        _fail(exc.message, exc.fix)
    server = probe.config.server  # type: ignore[attr-defined]
    probe.close()  # type: ignore[attr-defined]
    label = f"cluster {context} · {server}" if context else f"cluster {server}"

    def make() -> Backend:
        return cluster_backend(kubeconfig, context, elsewhere="use this machine")

    return make, label
