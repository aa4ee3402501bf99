"""Progress on this machine: the official SDK's ``update_trainjob_status``, unchanged, inside a real local pod;
the local endpoint's auth rules from inside the pods; progress derived from log lines (and the opt-out); and the
CLI showing it: ``run``'s progress lines, ``get``'s PROGRESS, ``describe``, ``metrics`` (table, chart, --png)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import progress as P
from kubetrain.local.backend import LocalBackend

from .conftest import container, needs_namespaces, rjob, run_to_end, runtime, trainjob
from .test_cli import kt, write

pytestmark = [
    needs_namespaces,
    pytest.mark.skipif(importlib.util.find_spec("kubeflow") is None, reason="the kubeflow SDK is not installed"),
]

SDK_SCRIPT = """
import time
from kubeflow.trainer import update_trainjob_status
for step in range(2):
    ok = update_trainjob_status(progress_percent=40 * (step + 1), estimated_remaining_seconds=60 - 30 * step,
                                metrics={"loss": round(1.0 / (step + 1), 3), "step": step})
    print("sent", ok, flush=True)
    if step == 0:
        time.sleep(5.2)  # the SDK sends at most one report per 5 s
"""

AUTH_SCRIPT = """
import json, os, ssl, urllib.request, urllib.error
url = os.environ["KUBEFLOW_TRAINER_SERVER_URL"]
ctx = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read()
body = json.dumps({"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": 7}}).encode()
def post(u, tok, data=body):
    req = urllib.request.Request(u, data=data, method="POST")
    if tok:
        req.add_header("Authorization", "Bearer " + tok)
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
other = url.replace("/trainjobs/auth/", "/trainjobs/someone-else/")
print("codes", post(url, None), post(url, "forged"), post(other, token), post(url, token, b"{}x"), post(url, token))
"""


def plain_runtime(name: str) -> dict[str, Any]:
    return runtime(name, [rjob("node", [container([sys.executable, "train.py"])], ancestor="trainer")])


def test_official_sdk_reports_from_a_local_pod(backend: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SDK_SCRIPT)
    final = run_to_end(backend, [plain_runtime("plain"), trainjob("sdk", "plain")], tmp_path)
    ts = final["trainerStatus"]
    assert ts["progressPercentage"] == 80 and ts["estimatedRemainingSeconds"] == 30
    assert ts["metrics"] == [{"name": "loss", "value": "0.5"}, {"name": "step", "value": "1"}]
    # Kept after the job ended, in the store, with the history `kubetrain metrics` shows.
    assert backend.get_status("sdk", "default")["trainerStatus"] == ts
    history = backend.progress_history("sdk", "default")
    assert [(h.source, h.trainer_status["progressPercentage"]) for h in history] == [("report", 40), ("report", 80)]
    lines = "\n".join(backend.logs("sdk", "default", step=None, follow=False))
    assert lines.count("sent True") == 2, lines


def test_local_endpoint_refuses_what_it_must(backend: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(AUTH_SCRIPT)
    final = run_to_end(backend, [plain_runtime("plain"), trainjob("auth", "plain")], tmp_path)
    lines = "\n".join(backend.logs("auth", "default", step=None, follow=False))
    # No token and a forged one: 401; this pod's token for another TrainJob: 403; a bad body: 422; then 200.
    assert "codes 401 401 403 422 200" in lines, lines
    assert final["trainerStatus"] == {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": 7}


TQDM_SCRIPT = r"""
import sys, time
for i in range(0, 21):
    bar = f"{i * 5:3d}%|{'#' * (i // 2):<10}| {i}/20"
    sys.stderr.write(f"\r{bar} [00:{i:02d}<00:{20 - i:02d},  1.00it/s, loss={1 / (i + 1):.3f}]")
    sys.stderr.flush()
    time.sleep(0.12)
sys.stderr.write("\n")
"""


@pytest.mark.parametrize("opt_out", [False, True])
def test_progress_from_tqdm_lines_unless_opted_out(backend: LocalBackend, tmp_path: Path, opt_out: bool) -> None:
    (tmp_path / "train.py").write_text(TQDM_SCRIPT)
    job = trainjob("bars", "plain")
    if opt_out:
        job["metadata"]["annotations"] = {P.ANNOTATION_LOG_PROGRESS: "false"}
    final = run_to_end(backend, [plain_runtime("plain"), job], tmp_path)
    if opt_out:
        assert "trainerStatus" not in final
        assert backend.progress_history("bars", "default") == []
        return
    ts = final["trainerStatus"]
    assert ts["progressPercentage"] == 100 and ts["estimatedRemainingSeconds"] == 0
    assert ts["metrics"] == [{"name": "loss", "value": "0.048"}]
    history = backend.progress_history("bars", "default")
    assert history and {h.source for h in history} == {"logs"}


def test_cli_shows_progress_in_run_get_describe_and_metrics(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(SDK_SCRIPT)
    f = write(tmp_path / "job.yaml", plain_runtime("plain"), trainjob("cli", "plain"))
    r = kt("run", "-f", f)
    # Piped: a progress line when the report changes (at most every 10 s), and the last report at the end.
    assert "trainjob default/cli: progress [#########...............] 40% · ETA 1m00s · loss=1.0 step=0" in r.stderr
    assert "trainjob default/cli: progress [###################.....] 80% · loss=0.5 step=1" in r.stderr
    listing = kt("get", "trainjobs").stdout.splitlines()
    assert listing[0].split()[:4] == ["NAME", "RUNTIME", "STATE", "PROGRESS"]
    assert listing[1].split()[:4] == ["cli", "plain", "Complete", "80%"]
    desc = kt("describe", "trainjob", "cli").stdout
    assert "[###################.....] 80%" in desc and "(reported by the job)" in desc
    assert "Metrics:" in desc and "loss  0.5" in desc
    table = kt("metrics", "cli").stdout
    rows = [line.split() for line in table.splitlines()]
    assert rows[0] == ["TIME", "SOURCE", "PROGRESS", "ETA", "loss", "step"]
    assert [row[1:] for row in rows[1:3]] == [
        ["report", "40%", "1m00s", "1.0", "0"],
        ["report", "80%", "30s", "0.5", "1"],
    ]
    assert "loss  (last 0.5, min 0.5, max 1, 2 points)" in table
    assert "progress  (last 80, min 40, max 80, 2 points)" in table
    csv_text = kt("metrics", "cli", "-o", "csv", "-m", "loss").stdout
    assert csv_text.splitlines()[0] == "TIME,SOURCE,PROGRESS,ETA,loss"
    bad = kt("metrics", "cli", "-m", "accuracy", check=False)
    assert bad.returncode == 1 and "reported no metric 'accuracy'" in bad.stderr and "loss, step" in bad.stderr
    if importlib.util.find_spec("matplotlib") is None:
        pytest.skip("matplotlib not installed: --png is the optional 'plot' extra")
    png = tmp_path / "cli.png"
    kt("metrics", "cli", "--png", str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_metrics_of_a_job_that_reported_nothing(kt_home: Path, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('no progress here')\n")
    f = write(tmp_path / "job.yaml", plain_runtime("plain"), trainjob("quiet", "plain"))
    kt("run", "-f", f)
    r = kt("metrics", "quiet")
    assert r.stdout == "" and "has reported no progress or metrics yet" in r.stderr
    assert kt("get", "trainjobs", "quiet").stdout.splitlines()[1].split()[3] == "-"
    missing = kt("metrics", "nope", check=False)
    assert missing.returncode == 1 and 'trainjob "nope" not found' in missing.stderr.lower()

