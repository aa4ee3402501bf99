"""OptimizationJobs on a cluster (the fake API server with the operator), as a user drives them: ``kubetrain
apply``, ``get oj``, ``describe oj`` with the trial table best first, the Python Client, ``delete``. Trials finish
here as on a cluster: their JobSet's status (the kubelet and JobSet controller stand-ins) and a progress report in
status.trainerStatus."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from kubetrain.cli.main import cli
from kubetrain.client import Client
from kubetrain.k8s.client import resources as r
from tests.builders import optimizationjob
from tests.k8s.helpers import client_for, torch_runtime
from tests.k8s.threaded import Background, background_api


def kt(kubeconfig: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--kubeconfig", kubeconfig])
    return result.exit_code, result.stdout, result.stderr


def until(predicate: Any, what: str, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)
    return value


def finish(bg: Background, name: str, loss: str | None, ok: bool = True) -> None:
    until(lambda: _find(bg, "jobset.x-k8s.io", "jobsets", name), f"JobSet {name}")
    if loss is not None:
        report = {"metrics": [{"name": "loss", "value": loss}], "lastUpdatedTime": "2026-08-01T00:00:00Z"}
        bg.call(bg.api_client.patch_status(r.TRAINJOB, name, "default", {"trainerStatus": report}))
    cond = {"type": "Completed" if ok else "Failed", "status": "True", "reason": "R", "message": "m"}
    bg.call(bg.api_client.patch_status(r.JOBSET, name, "default", {"conditions": [cond]}))


def _find(bg: Background, group: str, plural: str, name: str) -> dict[str, Any] | None:
    try:
        return bg.api.store.get(group, plural, "default", name)  # type: ignore[no-any-return]
    except Exception:
        return None


def test_apply_get_describe_and_delete_on_a_cluster(tmp_path: Path, monkeypatch: Any) -> None:
    with background_api(tmp_path, operator=True) as (bg, kubeconfig):
        async def make_client() -> Any:
            return client_for(bg.api, qps=0)

        bg.api_client = bg.call(make_client())  # type: ignore[attr-defined]
        path = tmp_path / "oj.yaml"
        path.write_text(yaml.safe_dump_all([torch_runtime(), optimizationjob(numTrials=3, parallelTrials=2)]))
        rc, out, err = kt(kubeconfig, "apply", "-f", str(path))
        assert rc == 0, err
        assert "optimizationjob.trainer.kubeflow.org/tune" in out
        until(lambda: _find(bg, "trainer.kubeflow.org", "trainjobs", "tune-1"), "two trials")
        finish(bg, "tune-0", "0.4")
        finish(bg, "tune-1", None, ok=False)
        finish(bg, "tune-2", "0.2")
        until(lambda: "Complete" in kt(kubeconfig, "get", "oj")[1], "Complete")
        rc, out, _ = kt(kubeconfig, "get", "oj", "-o", "wide")
        header, row = out.splitlines()
        assert header.split()[:7] == ["NAME", "STATE", "METRIC", "BEST", "TRIALS", "PARALLEL", "AGE"]
        assert row.split()[:6] == ["tune", "Complete", "loss", "tune-2", "3", "2"]
        rc, out, _ = kt(kubeconfig, "describe", "oj", "tune")
        table = out[out.index("Trials (best first; * best):"):].splitlines()
        assert table[1].split()[:3] == ["TRIAL", "STATE", "LOSS"]
        assert [line.split()[0] for line in table[2:5]] == ["tune-2*", "tune-0", "tune-1"]
        assert table[4].split()[1] == "Failed"
        rc, out, _ = kt(kubeconfig, "describe", "oj", "tune", "-o", "json")
        assert json.loads(out)["best"] == "tune-2"

        monkeypatch.setenv("KUBECONFIG", kubeconfig)
        client = Client(kubeconfig=kubeconfig)
        best = client.get_best_results("tune")
        assert best is not None and (best.name, best.objective) == ("tune-2", 0.2)
        assert [j.name for j in client.list_optimization_jobs()] == ["tune"]

        rc, out, _ = kt(kubeconfig, "delete", "oj", "tune")
        assert rc == 0 and out.strip() == 'optimizationjob.trainer.kubeflow.org "tune" deleted (and its trials)'
        until(lambda: not _find(bg, "trainer.kubeflow.org", "trainjobs", "tune-0"), "trials garbage-collected")
        rc, _, err = kt(kubeconfig, "describe", "oj", "tune")
        assert rc == 1 and 'optimizationjobs.trainer.kubeflow.org "tune" not found' in err
