"""The fuzz targets' tally in the terminal summary: how many examples ran (a crash fails the test instead)."""

from __future__ import annotations

import os
import sys

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    fuzz = sys.modules.get("tests.api.test_fuzz")
    counts: dict[str, int] = getattr(fuzz, "COUNTS", {})
    failed = [r for r in terminalreporter.stats.get("failed", []) if "test_fuzz" in r.nodeid]
    if counts:
        detail = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
        profile = os.environ.get("KUBETRAIN_FUZZ_PROFILE", "ci")
        crashes = "see the failures above" if failed else "0 crashes"
        terminalreporter.write_line(f"fuzz ({profile} profile): {sum(counts.values())} examples ({detail}), {crashes}")
