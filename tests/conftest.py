"""Shared test fixtures: where the steering repo's shared/ material lives."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("KUBETRAIN_SHARED", REPO.parent / "shared"))


def shared_path(*parts: str) -> Path:
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} not found: the steering repo's shared/ must sit beside the repo (or set KUBETRAIN_SHARED)")
    return path


@pytest.fixture(autouse=True)
def _isolated_kubetrain_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test reads or writes the developer's ~/.kubetrain (local fixtures may point it elsewhere again)."""
    monkeypatch.setenv("KUBETRAIN_HOME", str(tmp_path_factory.mktemp("kubetrain-home")))
    monkeypatch.delenv("KUBETRAIN_BACKEND", raising=False)


def pytest_configure(config: pytest.Config) -> None:
    """Tests interrupt the commands they start with SIGINT, as Ctrl-C would. A shell without job control starts
    background jobs (``make test &``, CI runners) with SIGINT ignored, and an ignored signal stays ignored in every
    child: the commands would never see the interrupt. A handler (unlike SIG_IGN) is reset to the default on exec."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """A command run in-process (``kubetrain run`` installs its own SIGINT/SIGTERM/SIGHUP handlers for the life of
    the process) must not leave them to the tests after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fuzz targets' tally: how many examples each ran (a crash fails its test instead)."""
    import sys

    fuzzing = sys.modules.get("tests.fuzzing")
    counts: dict[str, int] = getattr(fuzzing, "COUNTS", {})
    if counts:
        failed = [r for r in terminalreporter.stats.get("failed", []) if "fuzz" in r.nodeid]
        detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        profile = os.environ.get("KUBETRAIN_FUZZ_PROFILE", "ci")
        crashes = f"{len(failed)} failed fuzz test(s), see above" if failed else "0 crashes"
        terminalreporter.write_line(f"fuzz ({profile} profile): {sum(counts.values())} examples ({detail}), {crashes}")
        reached: dict[str, int] = getattr(fuzzing, "REACHED", {})
        if reached:
            terminalreporter.write_line("fuzz reached: " + ", ".join(f"{k} {v}" for k, v in sorted(reached.items())))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    # Finalise objects tests left for the garbage collector (e.g. HTTP sessions of backends a test dropped)
    # while pytest still owns the output, so nothing is printed after its closing summary line.
    import gc

    gc.collect()
