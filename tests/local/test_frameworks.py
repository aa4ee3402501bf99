"""Real distributed training stacks through the built-in runtimes: torch (gloo) and OpenMPI (mpi4py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kubetrain.local.backend import LocalBackend

from .conftest import condition, needs_mpi, needs_namespaces, needs_torch, run_to_end, trainjob

pytestmark = [needs_namespaces, pytest.mark.slow]

TORCH_SCRIPT = """
import os, torch, torch.distributed as dist
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank)])
dist.all_reduce(t)
print(f"rank={rank} world={world} sum={int(t.item())} node={os.environ['PET_NODE_RANK']}", flush=True)
dist.destroy_process_group()
"""

MPI_SCRIPT = """
import socket
from mpi4py import MPI
c = MPI.COMM_WORLD
total = c.allreduce(c.Get_rank(), op=MPI.SUM)
print(f"rank={c.Get_rank()} size={c.Get_size()} sum={total} host={socket.gethostname()}", flush=True)
"""


@needs_torch
def test_torch_2_nodes_x_2_procs_all_reduce(backend: LocalBackend, tmp_path: Path) -> None:
    (tmp_path / "allreduce.py").write_text(TORCH_SCRIPT)
    tj = trainjob("ddp", "torch-distributed",
                  trainer={"numNodes": 2, "numProcPerNode": 2, "command": ["torchrun", "allreduce.py"]})
    st = run_to_end(backend, [tj], tmp_path)
    assert condition(st, "Complete") is not None, st
    text = "\n".join(backend.logs("ddp", "default", step=None, follow=False))
    seen = sorted(re.findall(r"rank=(\d) world=(\d) sum=(\d+) node=(\d)", text))
    assert seen == [("0", "4", "6", "0"), ("1", "4", "6", "0"), ("2", "4", "6", "1"), ("3", "4", "6", "1")], text


@needs_torch
def test_two_torch_trainjobs_on_port_29500_at_once(kt_home: Path, tmp_path: Path) -> None:
    import threading

    from kubetrain.local.store import Store
    from kubetrain.local.supervisor import Supervisor

    (tmp_path / "allreduce.py").write_text(TORCH_SCRIPT)
    results: dict[str, dict[str, object]] = {}

    def one(name: str) -> None:
        b = LocalBackend(Store())
        tj = trainjob(name, "torch-distributed",
                      trainer={"numNodes": 2, "numProcPerNode": 1, "command": ["torchrun", "allreduce.py"]})
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
    (tmp_path / "allreduce.py").write_text(MPI_SCRIPT)
    tj = trainjob("mpi", "deepspeed-distributed",
                  trainer={"numNodes": 2, "numProcPerNode": 2, "command": ["mpirun", "python", "allreduce.py"]})
    st = run_to_end(backend, [tj], tmp_path)
    assert condition(st, "Complete") is not None, st
    text = "\n".join(backend.logs("mpi", "default", step="launcher", follow=False))
    ranks = sorted(re.findall(r"rank=(\d) size=4 sum=6 host=(\S+)", text))
    assert [r for r, _ in ranks] == ["0", "1", "2", "3"], text
    # Two slots on each of the two "nodes": the launcher (runLauncherAsNode) and node-0-0.
    assert sorted({h for _, h in ranks}) == ["mpi-launcher-0-0", "mpi-node-0-0"]
