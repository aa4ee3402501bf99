"""Elastic torch on the local backend: how long a 2-node job needs to be training again after ``kill -9`` of one
node's torchrun agent, and after ``kubetrain scale`` from 1 to 2 nodes.

Each case runs twice in the same session: as kubetrain compiles it (workers' store published in every rendezvous
round, 5 s last call) and with torch's own defaults put back through ``trainer.env`` (the baseline: the agent shares
its store, so a (re)joining agent waits ``read_timeout`` = 60 s for a MASTER_ADDR nobody publishes; 30 s last call).
Times come from the training script itself (``time.time()`` in the pods): from the kill (or the scale command) to the
first step of the new world of 2.

Usage: ``make bench`` or ``.venv/bin/python bench/run_all.py elastic_recovery``. Needs bubblewrap and torch.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _report import write_section

SCRIPT = textwrap.dedent("""
    import os, pathlib, signal, time, torch, torch.distributed as dist
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"T={time.time():.3f} start rank={rank} world={world}", flush=True)
    kill, stop = pathlib.Path(os.environ["KILL"]), pathlib.Path(os.environ["STOP"])
    while True:
        t = torch.ones(1)
        dist.all_reduce(t)
        if os.environ["PET_NODE_RANK"] == "1" and kill.exists() and not kill.read_text():
            kill.write_text(f"{time.time():.3f}")
            os.kill(os.getppid(), signal.SIGKILL)  # this node's torchrun agent
            time.sleep(60)
        done = torch.tensor([1.0 if stop.exists() else 0.0])
        dist.all_reduce(done)
        if done.item() > 0:
            break
        time.sleep(0.05)
    os._exit(0)
""")

BASELINE_ENV = [
    {"name": "TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "value": "0"},
    {"name": "PET_RDZV_CONF", "value": "last_call_timeout=30"},
]


def _runtime(max_nodes: int) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "bench-elastic", "labels": {"trainer.kubeflow.org/framework": "torch"}},
        "spec": {
            "mlPolicy": {"torch": {"numProcPerNode": 1, "elasticPolicy": {"minNodes": 1, "maxNodes": max_nodes,
                                                                          "maxRestarts": 5}}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "pytorch/pytorch"}]}}},
                },
            }]}},
        },
    }


class Case:
    def __init__(self, work: Path, name: str, nodes: int, max_nodes: int, baseline: bool) -> None:
        self.work, self.name = work, name
        self.env = dict(os.environ, KUBETRAIN_HOME=str(work / "home"))
        self.kill, self.stop = work / f"{name}.kill", work / f"{name}.stop"
        env = [{"name": "KILL", "value": str(self.kill)}, {"name": "STOP", "value": str(self.stop)}]
        tj = {
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
            "spec": {"runtimeRef": {"name": "bench-elastic"}, "trainer": {
                "numNodes": nodes, "command": ["torchrun", "train.py"],
                "env": env + (BASELINE_ENV if baseline else []),
            }},
        }
        (work / f"{name}.yaml").write_text(yaml.safe_dump_all([_runtime(max_nodes), tj]))

    def kt(self, *args: str) -> str:
        r = subprocess.run([sys.executable, "-m", "kubetrain.cli.main", *args], env=self.env, cwd=self.work,
                           capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise SystemExit(f"kubetrain {' '.join(args)} failed:\n{r.stdout}\n{r.stderr}")
        return r.stdout

    def logs(self) -> str:
        return self.kt("logs", self.name)

    def starts(self) -> list[tuple[float, int]]:
        return [(float(t), int(w)) for t, w in re.findall(r"T=([\d.]+) start rank=\d+ world=(\d+)", self.logs())]

    def wait(self, pred: Any, what: str, timeout: float = 300) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = pred()
            if got:
                return got
            time.sleep(0.2)
        raise SystemExit(f"{self.name}: timed out waiting for {what}\n{self.logs()[-3000:]}")

    def finish(self) -> None:
        self.stop.touch()
        self.kt("wait", "trainjob", self.name, "--for=condition=Complete", "--timeout=300s")
        self.kt("delete", "trainjob", self.name)


def recovery_after_kill(work: Path, baseline: bool) -> float:
    case = Case(work, f"kill-{'base' if baseline else 'kt'}", nodes=2, max_nodes=2, baseline=baseline)
    case.kt("apply", "-f", str(work / f"{case.name}.yaml"))
    case.wait(lambda: len([w for _, w in case.starts() if w == 2]) >= 2, "training on 2 nodes")
    case.kill.write_text("")
    killed = float(case.wait(lambda: case.kill.read_text(), "the kill"))
    back = case.wait(lambda: [t for t, w in case.starts() if w == 2 and t > killed], "a new world of 2")
    case.finish()
    return max(back) - killed


def scale_up(work: Path, baseline: bool) -> float:
    case = Case(work, f"scale-{'base' if baseline else 'kt'}", nodes=1, max_nodes=3, baseline=baseline)
    case.kt("apply", "-f", str(work / f"{case.name}.yaml"))
    case.wait(lambda: case.starts(), "training on 1 node")
    t0 = time.time()
    case.kt("scale", "trainjob", case.name, "--replicas", "2")
    back = case.wait(lambda: [t for t, w in case.starts() if w == 2], "a world of 2")
    case.finish()
    return max(back) - t0


def main() -> None:
    if shutil.which("bwrap") is None:
        raise SystemExit("needs bubblewrap (make system-deps)")
    work = Path(tempfile.mkdtemp(prefix="kt-bench-elastic-"))
    try:
        (work / "train.py").write_text(SCRIPT)
        rows = []
        for label, fn in (("kill -9 of node 1's agent -> training again on 2 nodes", recovery_after_kill),
                          ("`kubetrain scale` 1 -> 2 (maxNodes 3) -> training on 2 nodes", scale_up)):
            ours = fn(work, baseline=False)
            base = fn(work, baseline=True)
            rows.append(f"| {label} | {ours:.1f} s | {base:.1f} s | {ours / base:.2f}× |")
            print(rows[-1], flush=True)
        write_section("elastic_recovery", "\n".join([
            "## Elastic torch recovery and scaling (`bench/elastic_recovery.py`)",
            "",
            "A 2-node (or 1 -> 2 node) torch elastic job on the local backend, 1 process per node, gloo; times from "
            "the training script's own clock. Baseline: the same job with torch's defaults restored through "
            "`trainer.env` (`TORCH_DISABLE_SHARE_RDZV_TCP_STORE=0`, `last_call_timeout=30`), measured in the same run.",
            "",
            "| event | kubetrain | torch defaults (baseline) | × baseline |",
            "|---|---:|---:|---:|",
            *rows,
            "",
            "With torch's defaults an agent that (re)joins a later rendezvous round waits 60 s (`read_timeout`) for a "
            "MASTER_ADDR that the long-running rank 0 never publishes again, then every agent fails and every pod "
            "restarts; kubetrain's compiled environment avoids both.",
        ]))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
