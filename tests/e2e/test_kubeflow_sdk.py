"""The official Kubeflow SDK (``kubeflow`` 0.5.0) against the bed, the way its users write it: list the runtimes,
``train`` a function on the built-in ``torch-distributed`` runtime with the training image, ``wait_for_job_status``,
``get_job_logs`` of the real pods, ``delete_job``."""

from __future__ import annotations

import pytest

from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import IMAGE, DeployedOperator, get, wait_until

pytestmark = pytest.mark.e2e
pytest.importorskip("kubeflow.trainer", reason="the kubeflow SDK is not installed (pip install -e '.[dev]')")


def train_fn() -> None:
    # Runs in the pods under torchrun: a real gloo process group across both nodes.
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    total = torch.ones(1)
    dist.all_reduce(total)
    print(f"hello from rank {dist.get_rank()} of {dist.get_world_size()}: all_reduce {int(total.item())}", flush=True)
    dist.barrier()


def test_sdk_train_wait_logs_delete(kubeconfig: str, namespace: str, operator: DeployedOperator) -> None:
    from kubeflow.trainer import CustomTrainer, KubernetesBackendConfig, TrainerClient

    client = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace=namespace))
    assert "torch-distributed" in [rt.name for rt in client.list_runtimes()]
    trainer = CustomTrainer(func=train_fn, num_nodes=2, image=IMAGE, env={"OMP_NUM_THREADS": "1"})
    name = client.train(runtime="torch-distributed", trainer=trainer)
    job = client.wait_for_job_status(name, {"Complete", "Failed"}, timeout=600, polling_interval=2)
    lines = list(client.get_job_logs(name))
    print("\n".join(lines))
    assert job.status == "Complete", lines
    assert job.num_nodes == 2
    hellos = [line for line in lines if line.startswith("hello from rank ")]
    world = int(hellos[0].split(" of ")[1].split(":")[0])
    assert world >= 2 and all(line.endswith(f"all_reduce {world}") for line in hellos), lines
    assert "hello from rank 0 of" in "\n".join(hellos)
    client.delete_job(name)
    wait_until(lambda: get(r.TRAINJOB, name, namespace) is None, 120, "TrainJob deleted")
