"""Real distributed training stacks through the built-in runtimes: torch (gloo) and OpenMPI (mpi4py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubetrain.local.backend import LocalBackend

from .conftest import condition, needs_mpi, needs_namespaces, needs_torch, run_to_end, trainjob

pytestmark = [needs_namespaces, pytest.mark.slow]

TORCH_SCRIPT = """
import os, sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
sys.stdout.write(f"rank={rank} world={world} sum={int(t.item())} node={os.environ['PET_NODE_RANK']}\\n")
sys.stdout.flush()
dist.barrier()
os._exit(0)  # skip gloo teardown, which can abort when peers on another node have exited (see the quickstart)
"""

# One write per line: pods run with PYTHONUNBUFFERED, where print() writes text and newline separately and
# mpirun may interleave another rank's output between the two.
MPI_SCRIPT = """
import socket, sys
from mpi4py import MPI
c = MPI.COMM_WORLD
total = c.allreduce(c.Get_rank(), op=MPI.SUM)
sys.stdout.write(f"rank={c.Get_rank()} size={c.Get_size()} sum={total} host={socket.gethostname()};\\n")
sys.stdout.flush()
"""


@needs_torch
def test_torch_2_nodes_x_2_procs_all_reduce(backend: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "allreduce.py").write_text(TORCH_SCRIPT)
    tj = trainjob(
        "ddp",
        "torch-distributed",
        trainer={"numNodes": 2, "numProcPerNode": 2, "command": ["torchrun", "allreduce.py"]},
    )
    st = run_to_end(backend, [tj], tmp_path)
    assert condition(st, "Complete") is not None, st
    text = "\n".join(backend.logs("ddp", "default", step=None, follow=False))
    seen = sorted(re.findall(r"rank=(\d) world=(\d) sum=(\d+) node=(\d)", text))
    assert seen == [("0", "4", "6", "0"), ("1", "4", "6", "0"), ("2", "4", "6", "1"), ("3", "4", "6", "1")], (
        text
    )


@needs_torch
def test_two_torch_trainjobs_on_port_29500_at_once(kt_home: Path, tmp_path: Path) -> None:
    import threading

    from kubetrain.local.store.db import Store
    from kubetrain.local.supervisor.controller import Supervisor

    (tmp_path / "allreduce.py").write_text(TORCH_SCRIPT)
    results: dict[str, dict[str, object]] = {}

    def one(name: str) -> None:
        b = LocalBackend(Store())
        tj = trainjob(
            name,
            "torch-distributed",
            trainer={"numNodes": 2, "numProcPerNode": 1, "command": ["torchrun", "allreduce.py"]},
        )
        b.apply([tj], namespace="default", workdir=str(tmp_path), detach=False)
        results[name] = Supervisor(b.store, "default", name).run()

    threads = [threading.Thread(target=one, args=(n,)) for n in ("ddp-a", "ddp-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert all(condition(results.get(n, {}), "Complete") for n in ("ddp-a", "ddp-b")), results


@needs_mpi
def test_mpi_2_nodes_x_2_slots_allreduce_over_4_ranks(backend: LocalBackend, tmp_path: Path) -> None:
    tmp_path.chmod(0o755)  # the runtime's pods run as uid 1000 (securityContext), which must read the workdir
    (tmp_path / "allreduce.py").write_text(MPI_SCRIPT)
    tj = trainjob(
        "mpi",
        "deepspeed-distributed",
        trainer={"numNodes": 2, "numProcPerNode": 2, "command": ["mpirun", "python", "allreduce.py"]},
    )
    st = run_to_end(backend, [tj], tmp_path)
    assert condition(st, "Complete") is not None, st
    text = "\n".join(backend.logs("mpi", "default", step="launcher", follow=False))
    ranks = sorted(re.findall(r"rank=(\d) size=4 sum=6 host=([\w.-]+);", text))
    assert [r for r, _ in ranks] == ["0", "1", "2", "3"], text
    # Two slots on each of the two "nodes": the launcher (runLauncherAsNode) and node-0-0.
    assert sorted({h for _, h in ranks}) == ["mpi-launcher-0-0", "mpi-node-0-0"]


ELASTIC_SCRIPT = """
import os, signal, time, pathlib, torch, torch.distributed as dist
marker = pathlib.Path(os.environ["MARKER"])
dist.init_process_group("gloo")
rank = dist.get_rank()
print(f"attempt restart_count={os.environ['TORCHELASTIC_RESTART_COUNT']} rank={rank} "
      f"node={os.environ['PET_NODE_RANK']}", flush=True)
for step in range(3):
    t = torch.ones(1)
    dist.all_reduce(t)
    if os.environ["PET_NODE_RANK"] == "1" and step == 1 and not marker.exists():
        marker.write_text("killed")
        print("killing this node's torchrun agent", flush=True)
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(60)
    time.sleep(0.2)
print(f"finished rank={rank} world={dist.get_world_size()}", flush=True)
dist.barrier()
os._exit(0)
"""

ELASTIC_RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "ClusterTrainingRuntime",
    "metadata": {"name": "torch-elastic"},
    "spec": {
        "mlPolicy": {  # no numNodes: the CEL rule forbids it next to elasticPolicy (2 nodes come from maxNodes)
            "torch": {"numProcPerNode": 1, "elasticPolicy": {"minNodes": 2, "maxNodes": 2, "maxRestarts": 3}},
        },
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                "template": {
                                    "spec": {"containers": [{"name": "node", "image": "pytorch/pytorch"}]}
                                }
                            },
                        },
                    }
                ]
            }
        },
    },
}


@needs_torch
def test_torch_elastic_node_that_dies_is_restarted_and_training_continues(
    backend: LocalBackend, tmp_path: Path
) -> None:
    (tmp_path / "elastic.py").write_text(ELASTIC_SCRIPT)
    tj = trainjob(
        "el",
        "torch-elastic",
        trainer={
            "command": ["torchrun", "elastic.py"],
            "env": [{"name": "MARKER", "value": str(tmp_path / "killed")}],
        },
    )
    st = run_to_end(backend, [ELASTIC_RUNTIME, tj], tmp_path)
    text = "\n".join(backend.logs("el", "default", step=None, follow=False))
    assert condition(st, "Complete") is not None, text
    steps = {s.name: s.restarts for s in backend.describe_trainjob("el", "default").steps}
    # The killed node's pod is restarted (restartPolicy OnFailure) and rejoins; the surviving node's agent carries
    # on: it restarts its workers into the new rendezvous round (one of its maxRestarts), its pod is not restarted.
    assert steps == {"node-0-0": 0, "node-0-1": 1}, steps
    assert "killing this node's torchrun agent" in text
    assert "attempt restart_count=1 rank=0 node=0" in text
    # No store timeout on the way (torch's 60 s wait for a MASTER_ADDR nobody publishes in the new round).
    assert "wait timeout" not in text and "DistStoreError" not in text
    assert sorted(set(re.findall(r"finished rank=(\d) world=2", text))) == ["0", "1"], text
