"""``Client.train(func=...)`` on every runtime family starts the function the way the Kubeflow SDK does (torchrun,
mpirun over the hostfile, or python once per node), and the function's framework sees a world of num_nodes x
processes per node: each test checks the rank and world size the framework itself reports, and an all-reduce."""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import KubetrainError
from kubetrain.client import Client, entrypoint
from kubetrain.runtimes import builtin_runtime
from tests.examples.envs import framework_env

from .conftest import needs_mpi, needs_namespaces, needs_torch

HOSTFILE_MPIRUN = ["mpirun", "--hostfile", "/etc/mpi/hostfile", "python"]


@pytest.mark.parametrize(
    ("runtime", "command"),
    [
        ("torch-distributed", ["torchrun", "--no-python", "python"]),
        ("deepspeed-distributed", HOSTFILE_MPIRUN),
        ("mlx-distributed", HOSTFILE_MPIRUN),
        ("jax-distributed", ["python"]),
        ("xgboost-distributed", ["python"]),
        ("tensorflow-distributed", ["python"]),
    ],
)
def test_entrypoint_follows_the_runtimes_ml_policy(runtime: str, command: list[str]) -> None:
    assert entrypoint(builtin_runtime(runtime)) == command


def test_hydra_mpi_reads_the_hostfile_from_its_variable() -> None:
    rt = builtin_runtime("deepspeed-distributed")
    assert rt is not None and rt.spec.ml_policy is not None and rt.spec.ml_policy.mpi is not None
    rt.spec.ml_policy.mpi.mpi_implementation = "MPICH"
    assert entrypoint(rt) == ["mpirun", "python"]
    assert entrypoint(None) == ["python"]  # unknown runtime: applying reports it missing


def hello() -> None:
    print("hello")


def test_num_proc_per_node_on_a_one_process_per_node_runtime_is_refused(kt_home: Path) -> None:
    client = Client()
    with pytest.raises(KubetrainError, match=r"num_proc_per_node=2\): runtime 'jax-distributed' \(jax\) runs one "
                                             r"process per node.*scale with num_nodes"):
        client.train(func=hello, runtime="jax-distributed", num_nodes=2, num_proc_per_node=2)
    assert client.list_jobs() == []  # nothing half-created


def test_a_function_on_a_torchtune_runtime_is_refused(kt_home: Path) -> None:
    with pytest.raises(KubetrainError, match="torchtune runtime, which runs its built-in recipe"):
        Client().train(func=hello, runtime="torchtune-llama3.2-1b")


# The functions below are shipped by source into the pods; each reports what its framework sees.


def torch_world() -> None:
    import os
    import sys

    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.ones(1)
    dist.all_reduce(total)
    sys.stdout.write(f"seen rank={dist.get_rank()} world={dist.get_world_size()} sum={int(total.item())}\n")
    sys.stdout.flush()
    dist.barrier()
    os._exit(0)  # skip gloo teardown (see examples/quickstart)


def deepspeed_world() -> None:
    import sys

    import deepspeed
    import torch
    import torch.distributed as dist

    deepspeed.init_distributed(dist_backend="gloo")  # finds the world through MPI
    total = torch.ones(1)
    dist.all_reduce(total)
    sys.stdout.write(f"seen rank={dist.get_rank()} world={dist.get_world_size()} sum={int(total.item())}\n")
    sys.stdout.flush()
    dist.barrier()


def mlx_world() -> None:
    import sys

    import mlx.core as mx

    group = mx.distributed.init(strict=True, backend="mpi")
    total = mx.distributed.all_sum(mx.ones(1)).item()
    sys.stdout.write(f"seen rank={group.rank()} world={group.size()} sum={int(total)}\n")
    sys.stdout.flush()


def jax_world() -> None:
    import os
    import sys

    import jax
    import jax.numpy as jnp
    from jax.experimental import multihost_utils

    jax.distributed.initialize(
        coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
    )
    total = int(multihost_utils.process_allgather(jnp.ones(1)).sum())
    sys.stdout.write(f"seen rank={jax.process_index()} world={jax.process_count()} sum={total}\n")
    sys.stdout.flush()
    jax.distributed.shutdown()


def xgboost_world() -> None:
    import os
    import sys

    import numpy as np
    from xgboost import collective
    from xgboost.tracker import RabitTracker

    rank, port = int(os.environ["DMLC_TASK_ID"]), int(os.environ["DMLC_TRACKER_PORT"])
    tracker = None
    if rank == 0:
        tracker = RabitTracker(host_ip="0.0.0.0", n_workers=int(os.environ["DMLC_NUM_WORKER"]), port=port)
        tracker.start()
    with collective.CommunicatorContext(
        dmlc_tracker_uri=os.environ["DMLC_TRACKER_URI"], dmlc_tracker_port=port, dmlc_task_id=str(rank)
    ):
        total = int(collective.allreduce(np.ones(1), collective.Op.SUM)[0])
        sys.stdout.write(f"seen rank={collective.get_rank()} world={collective.get_world_size()} sum={total}\n")
        sys.stdout.flush()
    if tracker is not None:
        tracker.wait_for()


def tensorflow_world() -> None:
    import json
    import os
    import sys

    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    per_replica = strategy.run(lambda: tf.ones(1))
    total = int(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)[0])
    rank = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    sys.stdout.write(f"seen rank={rank} world={strategy.num_replicas_in_sync} sum={total}\n")
    sys.stdout.flush()


@pytest.fixture
def workdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory the MPI runtimes' pods (uid 1000) can enter, and a private TMPDIR for the pods (see
    tests/examples/test_frameworks.py)."""
    work = Path(tempfile.mkdtemp(prefix="kubetrain-client-"))
    work.chmod(0o755)
    pod_tmp = work / "tmp"
    pod_tmp.mkdir(mode=0o1777)
    pod_tmp.chmod(0o1777)
    monkeypatch.setenv("TMPDIR", str(pod_tmp))
    yield work
    shutil.rmtree(work, ignore_errors=True)


def world_seen(client: Client, runtime: str, func: Callable[..., Any], workdir: Path, **sizes: int) -> list[tuple[
        int, int, int]]:
    name = client.train(func=func, runtime=runtime, workdir=str(workdir), **sizes)
    job = client.wait(name, timeout=540)
    text = "\n".join(client.logs(name))
    assert job.state == "Complete", text[-5000:]
    return sorted((int(r), int(w), int(s)) for r, w, s in re.findall(r"seen rank=(\d+) world=(\d+) sum=(\d+)", text))


def expected(world: int) -> list[tuple[int, int, int]]:
    return [(r, world, world) for r in range(world)]


@needs_namespaces
@needs_torch
@pytest.mark.slow
def test_torch_family_2_nodes_x_2_processes(kt_home: Path, workdir: Path) -> None:
    seen = world_seen(Client(), "torch-distributed", torch_world, workdir, num_nodes=2, num_proc_per_node=2)
    assert seen == expected(4)


@needs_namespaces
@needs_mpi
@pytest.mark.slow
@pytest.mark.timeout(1800)  # may build the framework's environment first (tests/examples/envs.py)
@pytest.mark.parametrize(("runtime", "extra", "func"), [
    ("deepspeed-distributed", "deepspeed", deepspeed_world),
    ("mlx-distributed", "mlx", mlx_world),
])
def test_mpi_family_2_nodes_x_2_slots(
    runtime: str, extra: str, func: Callable[[], None], kt_home: Path, workdir: Path
) -> None:
    framework_env(extra).images_yaml(kt_home)
    seen = world_seen(Client(), runtime, func, workdir, num_nodes=2, num_proc_per_node=2)
    assert seen == expected(4)


@needs_namespaces
@pytest.mark.slow
@pytest.mark.timeout(1800)  # may build the framework's environment first (tests/examples/envs.py)
@pytest.mark.parametrize(("runtime", "extra", "func"), [
    ("jax-distributed", "jax", jax_world),
    ("xgboost-distributed", "xgboost", xgboost_world),
    ("tensorflow-distributed", "tensorflow", tensorflow_world),
])
def test_one_process_per_node_family_on_2_nodes(
    runtime: str, extra: str, func: Callable[[], None], kt_home: Path, workdir: Path
) -> None:
    framework_env(extra).images_yaml(kt_home)
    assert world_seen(Client(), runtime, func, workdir, num_nodes=2) == expected(2)
