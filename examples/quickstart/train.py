"""Quickstart: DDP training of a small MLP on synthetic regression data, on CPU with gloo.

Started by torchrun (the TrainJob's command); torchrun reads the PET_* variables the torch runtime injects
(nodes, processes per node, node rank, master address and port), so this script only uses the usual env://
rendezvous. Rank 0 prints the mean loss of each epoch across all ranks and reports it, with the progress and an
ETA, to the TrainJob's status (``status.trainerStatus``: `kubetrain metrics`, the progress column, the UI's charts).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import ssl
import sys
import time
import urllib.request

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

EPOCHS = int(os.environ.get("EPOCHS", "5"))
# The learning rate: tune-lr.yaml (an OptimizationJob) gives each trial its own.
LR = float(os.environ.get("LR", "0.05"))


def synthetic_data(n: int = 4096, features: int = 16) -> TensorDataset:
    # The same seed on every rank: all ranks see one dataset, and the sampler gives each its own shard.
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, features, generator=g)
    true_w = torch.randn(features, 1, generator=g)
    y = x @ true_w + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def report(epoch: int, loss: float, started: float) -> None:
    """Progress to the TrainJob's status endpoint (Kubeflow Trainer's KEP-2779), whose address, CA and token every
    pod gets as KUBEFLOW_TRAINER_SERVER_*. The official SDK's ``update_trainjob_status`` sends the same report but
    at most one every 5 s, and this demo's epochs take a fraction of a second. A failed report never stops training."""
    url = os.environ.get("KUBEFLOW_TRAINER_SERVER_URL")
    if not url:
        return  # not running in a TrainJob that has the endpoint
    pace = (time.monotonic() - started) / epoch
    body = {"trainerStatus": {
        "progressPercentage": 100 * epoch // EPOCHS,
        "estimatedRemainingSeconds": int(pace * (EPOCHS - epoch)),
        "metrics": [{"name": "loss", "value": f"{loss:.4f}"}, {"name": "epoch", "value": str(epoch)}],
        "lastUpdatedTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }}
    try:
        with open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]) as f:
            token = f.read().strip()
        tls = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
        request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST", headers={
            "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
        urllib.request.urlopen(request, context=tls, timeout=5).close()
    except (OSError, KeyError, ValueError) as exc:
        print(f"progress report failed: {exc}", file=sys.stderr, flush=True)


def main() -> None:
    torch.set_num_threads(1)  # several ranks share two cores; more threads only contend
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(rank)
    data = synthetic_data()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=64, sampler=sampler)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = nn.MSELoss()
    if rank == 0:
        print(f"training on {world} processes ({os.environ.get('PET_NNODES', '?')} nodes), lr {LR}", flush=True)
    started = time.monotonic()
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for x, y in loader:
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            total += torch.tensor([loss.item() * len(x), len(x)])
        dist.all_reduce(total)
        if rank == 0:
            mean = total[0].item() / total[1].item()
            print(f"epoch {epoch + 1}/{EPOCHS} loss {mean:.4f}", flush=True)
            report(epoch + 1, mean, started)
    # Leave together, and skip C++ teardown: torch 2.13's gloo backend sometimes aborts ("terminate called
    # without an active exception") while destroying a process group whose peers on another node have already
    # exited, and torchrun would report that as a failed worker after a successful training.
    dist.barrier()
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
