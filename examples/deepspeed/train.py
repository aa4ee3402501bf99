"""DeepSpeed example: ZeRO stage 1 data-parallel training of a small MLP, one process per MPI slot, on CPU.

The deepspeed-distributed runtime starts this script with mpirun from the launcher over every node's slots
(the hostfile at /etc/mpi/hostfile). `deepspeed.init_distributed` finds the world through MPI (rank, size and
rank 0's address) and opens a torch.distributed process group (gloo on CPU); ZeRO-1 then partitions the
optimizer state across the ranks while each rank trains on its own shard of the data.
"""

from __future__ import annotations

import os
import sys

import deepspeed
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

EPOCHS = int(os.environ.get("EPOCHS", "5"))

DS_CONFIG = {
    "train_micro_batch_size_per_gpu": 32,  # per rank; DeepSpeed keeps the "gpu" name on CPU too
    "gradient_accumulation_steps": 1,
    "optimizer": {"type": "AdamW", "params": {"lr": 0.01}},
    "zero_optimization": {"stage": 1},
    "steps_per_print": 10_000,
}


def synthetic_data(n: int = 2048, features: int = 16) -> TensorDataset:
    g = torch.Generator().manual_seed(0)  # the same data on every rank; the sampler shards it
    x = torch.randn(n, features, generator=g)
    y = x @ torch.randn(features, 1, generator=g) + 0.1 * torch.randn(n, 1, generator=g)
    return TensorDataset(x, y)


def main() -> None:
    torch.set_num_threads(1)  # several ranks share a few cores
    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights on every rank
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1))
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=DS_CONFIG)
    data = synthetic_data()
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=DS_CONFIG["train_micro_batch_size_per_gpu"], sampler=sampler)
    if rank == 0:
        print(f"training on {world} ranks with ZeRO stage {engine.zero_optimization_stage()}", flush=True)
    loss_fn = nn.MSELoss()
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for x, y in loader:
            loss = loss_fn(engine(x), y)
            engine.backward(loss)
            engine.step()
            total += torch.tensor([loss.item() * len(x), len(x)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch + 1}/{EPOCHS} loss {total[0].item() / total[1].item():.4f}", flush=True)
    # ZeRO keeps each rank's replica identical after every step: print a checksum to compare.
    checksum = sum(p.detach().double().sum().item() for p in engine.module.parameters())
    sys.stdout.write(f"rank {rank}/{world}: parameter checksum {checksum:.6f}\n")
    sys.stdout.flush()
    dist.barrier()


if __name__ == "__main__":
    main()
