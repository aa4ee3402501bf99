"""OptimizationJobs (issue #27): what validating and compiling a search costs, and what its controller adds to the
trials it runs.

1. Validation + compile of a 100-trial OptimizationJob (every rule ``kubetrain validate`` runs, the first trial
   against its runtime, then all 100 trial TrainJobs built), against validating + compiling one TrainJob in the same
   run. Target: ≤ 50 ms.
2. Controller overhead on this machine: 20 trials of a no-op TrainJob, 4 in parallel, from the OptimizationJob's
   apply until the search is Complete, ÷ the same 20 TrainJobs applied 4 at a time, the next as soon as one
   finishes. Measured with ``kubetrain apply`` on both sides (the user's comparison) and in-process
   (``LocalBackend``: the controller's own cost, without any CLI start). Target: ≤ 1.1×.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import per_call, write_section

from kubetrain.api.loader import parse_manifest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler import Subject, compile_trainjob, fixed_keygen, validate_objects
from kubetrain.compiler.optimization import build_trials
from kubetrain.runtimes import builtin_runtimes
from kubetrain.testing.reports import REPORT_ONCE

TRIALS, PARALLEL = 20, 4
REPEATS = 3


def _search(trials: int, parallel: int, runtime: str, command: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob",
        "metadata": {"name": "bench", "namespace": "default", **extra},
        "spec": {
            "objectives": [{"metric": "loss"}],
            "searchAlgorithm": {"random": {"seed": 1}},
            "parameters": [
                {"name": "lr", "searchSpace": {"logUniform": {"min": "0.0001", "max": "0.1"}}},
                {"name": "batch", "searchSpace": {"categorical": {"choices": ["16", "32", "64"]}}},
                {"name": "layers", "searchSpace": {"uniform": {"min": "1", "max": "8", "type": "Int"}}},
            ],
            "numTrials": trials,
            "parallelTrials": parallel,
            "trainJobTemplate": {"spec": {"runtimeRef": {"name": runtime}, "trainer": {
                "numNodes": 2, "command": command, "env": [{"name": "BATCH", "value": "{{.batch}}"}]}}},
        },
    }


def validation_and_compile() -> tuple[float, float]:
    """(seconds for the 100-trial search, seconds for one TrainJob), medians."""
    runtimes = builtin_runtimes()
    doc = _search(100, 4, "torch-distributed", ["torchrun", "train.py", "--lr={{.lr}}", "--layers={{.layers}}"],
                  uid="0d5c2a8e")

    def search() -> None:
        oj, _ = parse_manifest(doc)
        assert isinstance(oj, OptimizationJob)
        assert validate_objects([Subject(oj)], installed=runtimes)[0].ok
        assert len(build_trials(oj)) == 100

    one = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
           "metadata": {"name": "bench", "namespace": "default", "uid": "u"},
           "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2,
                                                                           "command": ["torchrun", "train.py"]}}}
    torch = next(r for r in runtimes if r.name == "torch-distributed")

    def trainjob() -> None:
        tj, _ = parse_manifest(one)
        assert isinstance(tj, TrainJob)
        assert validate_objects([Subject(tj)], installed=runtimes)[0].ok
        compile_trainjob(tj, torch, keygen=fixed_keygen())

    return per_call(search), per_call(trainjob)


# -- controller overhead (real local runs) -------------------------------------------------------------------------
NOOP_RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": "noop"},
    "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
        "spec": {"backoffLimit": 0, "template": {"spec": {"containers": [
            {"name": "node", "image": "busybox", "command": ["true"]}]}}}}}]}}},
}
# The no-op trial: one report of the objective (a search stops when nobody reports it).
COMMAND = [sys.executable, "-S", "-c", REPORT_ONCE, "{{.lr}}", "{{.layers}}"]


def _finished(status: dict[str, Any]) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _trial_manifests(prefix: str) -> list[dict[str, Any]]:
    oj, _ = parse_manifest(_search(TRIALS, PARALLEL, "noop", COMMAND, uid=prefix))
    assert isinstance(oj, OptimizationJob)
    return [{**t, "metadata": {**t["metadata"], "name": f"{prefix}-{i}"}} for i, t in enumerate(build_trials(oj))]


def _wait_all(store: Any, names: list[str]) -> None:
    while not all((row := store.get_trainjob("default", n)) is not None
                  and _finished(row.trainjob.get("status") or {}) for n in names):
        time.sleep(0.02)


def _by_hand(home: Path, *, cli: bool) -> float:
    """20 no-op TrainJobs, 4 at a time, the next as soon as one finishes: with ``kubetrain apply`` per TrainJob
    (``cli``, as a person or a shell loop does it) or ``LocalBackend.submit`` in this warm process."""
    import yaml

    os.environ["KUBETRAIN_HOME"] = str(home)
    from kubetrain.local.backend import LocalBackend
    from kubetrain.local.store.db import Store

    backend = LocalBackend(Store())
    backend.apply([NOOP_RUNTIME], namespace="default")
    manifests = _trial_manifests("hand")
    names = [m["metadata"]["name"] for m in manifests]
    start = time.monotonic()
    running: list[str] = []
    while manifests or running:
        while manifests and len(running) < PARALLEL:
            m = manifests.pop(0)
            if cli:
                path = home / f"{m['metadata']['name']}.yaml"
                path.write_text(yaml.safe_dump(m))
                subprocess.run([sys.executable, "-m", "kubetrain.cli.main", "apply", "-f", str(path)], check=True,
                               capture_output=True)
            else:
                backend.submit(m, namespace="default", workdir=str(home), detach=True, create_only=True)
            running.append(m["metadata"]["name"])
        time.sleep(0.02)
        running = [n for n in running if not _finished(
            (backend.store.get_trainjob("default", n) or _Absent()).trainjob.get("status") or {})]
    _wait_all(backend.store, names)
    elapsed = time.monotonic() - start
    backend.store.close()
    return elapsed


class _Absent:
    trainjob: dict[str, Any] = {"status": {}}


def _search_run(home: Path, *, cli: bool) -> float:
    """The same 20 no-op TrainJobs as the trials of one OptimizationJob, from its apply (``kubetrain apply``, or
    ``LocalBackend.apply`` in this process) to its Complete condition."""
    import yaml

    os.environ["KUBETRAIN_HOME"] = str(home)
    from kubetrain.local.backend import LocalBackend
    from kubetrain.local.store import optimization as rows
    from kubetrain.local.store.db import Store

    store = Store()
    LocalBackend(store).apply([NOOP_RUNTIME], namespace="default")
    search = _search(TRIALS, PARALLEL, "noop", COMMAND)
    files = home / "search.yaml"
    files.write_text(yaml.safe_dump(search))
    start = time.monotonic()
    if cli:
        subprocess.run([sys.executable, "-m", "kubetrain.cli.main", "apply", "-f", str(files)], check=True,
                       capture_output=True)
    else:
        LocalBackend(store).apply([search], namespace="default", workdir=str(home))
    while True:
        row = rows.get(store, "default", "bench")
        if row is not None and _finished(row.manifest.get("status") or {}):
            break
        time.sleep(0.02)
    elapsed = time.monotonic() - start
    assert len(store.list_trainjobs("default")) == TRIALS
    assert row.manifest["status"]["conditions"][-1]["reason"] == "MaxTrialsReached", row.manifest["status"]
    store.close()
    return elapsed


def controller_overhead(*, cli: bool) -> tuple[list[float], list[float]]:
    hand, search = [], []
    for _ in range(REPEATS):  # alternating, so a busy moment of the machine hits both
        with tempfile.TemporaryDirectory(prefix="kt-bench-hand-") as d:
            hand.append(_by_hand(Path(d), cli=cli))
        with tempfile.TemporaryDirectory(prefix="kt-bench-oj-") as d:
            search.append(_search_run(Path(d), cli=cli))
    return hand, search


def _runs(xs: list[float]) -> str:
    return ", ".join(f"{x:.2f}" for x in xs)


def main() -> str:
    t_search, t_one = validation_and_compile()
    rows = []
    ratios = {}
    for cli, label in ((True, "`kubetrain apply`"), (False, "in-process")):
        hand, search = controller_overhead(cli=cli)
        ratios[cli] = statistics.median(search) / statistics.median(hand)
        rows.append(f"| {label}: by hand, {PARALLEL} at a time (baseline) | {statistics.median(hand):.2f} s | "
                    f"{_runs(hand)} | 1.000× |")
        rows.append(f"| {label}: OptimizationJob, parallelTrials {PARALLEL} | {statistics.median(search):.2f} s | "
                    f"{_runs(search)} | **{ratios[cli]:.3f}×** |")
    load = os.getloadavg()[0]
    table = "\n".join(rows)
    md = f"""## OptimizationJobs (`bench/optimization.py`)

Validation + compile of a 100-trial OptimizationJob (3 parameters, random search: every rule of `kubetrain
validate`, the first trial checked against `torch-distributed`, then the 100 trial TrainJobs built), against
validating + compiling one 2-node TrainJob in the same run.

| measure | time | × one TrainJob |
|---|---:|---:|
| one TrainJob: validate + compile (baseline) | {t_one * 1e3:.2f} ms | 1.0× |
| 100-trial OptimizationJob: validate + build the trials | {t_search * 1e3:.2f} ms | {t_search / t_one:.1f}× |

- Target ≤ 50 ms: **{t_search * 1e3:.1f} ms** ({'met' if t_search <= 0.05 else 'missed'}).

Controller overhead on this machine: {TRIALS} trials of a no-op TrainJob (2 pods; the first reports the objective
once, with the standard library, as the SDK does), {PARALLEL} at once, from the OptimizationJob's apply to its
Complete condition, against the same {TRIALS} TrainJobs applied {PARALLEL} at a time, the next as soon as one
finishes (watched every 20 ms). Twice: with `kubetrain apply` on both sides (each TrainJob applied by the CLI, as a
person or a shell loop would; the search applied once), and in-process (`LocalBackend.submit` and `.apply` from the
benchmark's own warm process: no CLI start on either side). {REPEATS} runs of each, alternating, medians.

| run | wall (median) | runs | × baseline |
|---|---:|---|---:|
{table}

- Target ≤ 1.1×: `kubetrain apply` **{ratios[True]:.3f}×** ({'met' if ratios[True] <= 1.1 else 'missed'}),
  in-process **{ratios[False]:.3f}×** ({'met' if ratios[False] <= 1.1 else 'missed'}). Load average (1 min) at the
  end: {load:.1f} on {os.cpu_count()} cores (other work on the machine slows trials and controller alike).
"""
    write_section("optimization", md, after="compile")
    print(md)
    return md


if __name__ == "__main__":
    main()
