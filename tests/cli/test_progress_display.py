"""``kubetrain run``'s progress display: the live footer on a terminal, throttled lines when piped, and on a
cluster the estimate from the log lines it streams until the job reports progress itself."""

from __future__ import annotations

import io

import pytest

from kubetrain.api.logprogress import LogProgress
from kubetrain.api.views import LogChunk, ProgressChange, StateChange, StateView
from kubetrain.cli import follow
from kubetrain.cli.follow import Display
from kubetrain.cli.logview import LogView

REPORT = {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": 45, "estimatedRemainingSeconds": 785,
          "metrics": [{"name": "loss", "value": "0.23"}]}  # fmt: skip


def display(tty: bool, derive: bool = False) -> tuple[Display, io.BytesIO]:
    out = io.BytesIO()
    return Display("trainjob default/x", LogView(out, tty=tty), derive=LogProgress() if derive else None), out


def test_terminal_footer_shows_bar_eta_metrics_and_age() -> None:
    d, out = display(tty=True)
    d.handle(StateChange(StateView("Running")))
    d.handle(ProgressChange(REPORT, "report"))
    d.handle(None)
    (footer,) = [line for line in d.view._footer if line.startswith("progress ")]
    assert footer.startswith("progress [##########..............] 45% · ETA 13m05s · loss=0.23 · ")
    assert footer.endswith(" ago")
    assert b"progress" not in out.getvalue()  # a terminal redraws the footer; no line is printed
    # Once the job finished the ETA is gone; the final line has no age.
    d.handle(StateChange(StateView("Complete")))
    assert d.progress_text() == "[##########..............] 45% · loss=0.23"


def test_piped_lines_only_when_the_report_changes_and_at_most_every_ten_seconds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(follow.time, "monotonic", lambda: clock[0])
    d, _ = display(tty=False)
    d.handle(ProgressChange(REPORT))
    d.handle(ProgressChange(REPORT))  # unchanged: no line
    clock[0] += 3
    d.handle(ProgressChange({**REPORT, "progressPercentage": 50}))  # changed, but too soon
    clock[0] += 10
    d.handle(ProgressChange({**REPORT, "progressPercentage": 60}))
    lines = [x for x in capsys.readouterr().err.splitlines() if "progress" in x]
    assert [x.split("] ")[1].split(" ")[0] for x in lines] == ["45%", "60%"]


def test_cluster_runs_estimate_from_log_lines_until_the_job_reports(capsys: pytest.CaptureFixture[str]) -> None:
    d, _ = display(tty=False, derive=True)
    d.handle(LogChunk("node-0-0", " 30%|###       | 30/100 [00:30<01:10,  1.00it/s, loss=0.5]\n"))
    assert d.progress is not None and d.progress.source == "logs"
    assert d.progress_text() == "[#######.................] 30% · ETA 1m10s · loss=0.5 · from log lines"
    d.handle(ProgressChange(REPORT))  # the job's own report wins from now on
    d._derived_at = 0.0
    d.handle(LogChunk("node-0-0", " 90%|######### | 90/100 [01:30<00:10,  1.00it/s]\n"))
    assert d.progress is not None and d.progress.source is None
    assert "45%" in (d.progress_text() or "")
