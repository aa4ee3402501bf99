"""MLX example: data-parallel training of a small MLP with mlx.distributed over MPI, on CPU (mlx-cpu).

The mlx-distributed runtime starts this script with mpirun from the launcher over every node's slots (the
hostfile at /etc/mpi/hostfile); `mx.distributed.init(backend="mpi")` joins them into one group. Each rank trains on
its own shard and `nn.utils.average_gradients` all-reduces the gradients of every step, so all ranks keep the same
weights.
"""

from __future__ import annotations

import os
import sys
from functools import partial

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim

EPOCHS = int(os.environ.get("EPOCHS", "5"))
BATCH_SIZE = 64


class MLP(nn.Module):
    def __init__(self, in_dims: int, hidden_dims: int, out_dims: int) -> None:
        super().__init__()
        self.layers = [nn.Linear(in_dims, hidden_dims), nn.Linear(hidden_dims, hidden_dims),
                       nn.Linear(hidden_dims, out_dims)]

    def __call__(self, x: mx.array) -> mx.array:
        for layer in self.layers[:-1]:
            x = nn.relu(layer(x))
        return self.layers[-1](x)


def loss_fn(model: MLP, x: mx.array, y: mx.array) -> mx.array:
    return mx.mean(nn.losses.mse_loss(model(x), y))


def main() -> None:
    group = mx.distributed.init(strict=True, backend="mpi")
    rank, world = group.rank(), group.size()
    # One write per line: mpirun may interleave another rank's output between print()'s separate writes.
    sys.stdout.write(f"rank {rank}/{world} joined\n")
    sys.stdout.flush()

    mx.random.seed(0)  # the same data and initial weights on every rank
    x = mx.random.normal((4096, 16))
    y = mx.sin(x[:, :1]) + x[:, 1:2] * x[:, 2:3]
    shard_x, shard_y = x[rank::world], y[rank::world]
    model = MLP(16, 64, 1)
    mx.eval(model.parameters())
    optimizer = optim.Adam(learning_rate=0.01)

    state = [model.state, optimizer.state]  # what the compiled step reads and updates

    @partial(mx.compile, inputs=state, outputs=state)
    def step(xb: mx.array, yb: mx.array) -> mx.array:
        loss, grads = nn.value_and_grad(model, loss_fn)(model, xb, yb)
        grads = nn.utils.average_gradients(grads)  # all-reduce across the ranks
        optimizer.update(model, grads)
        return loss

    for epoch in range(EPOCHS):
        total, steps = 0.0, 0
        for i in range(0, shard_x.shape[0], BATCH_SIZE):
            loss = step(shard_x[i : i + BATCH_SIZE], shard_y[i : i + BATCH_SIZE])
            mx.eval(loss, state)
            total += loss.item()
            steps += 1
        # The epoch's loss over all ranks. Every rank must evaluate it: MLX is lazy, and a collective that only
        # rank 0 ran would meet the other ranks' next gradient all-reduce instead.
        mean = (mx.distributed.all_sum(mx.array([total / steps])) / world).item()
        if rank == 0:
            sys.stdout.write(f"epoch {epoch + 1}/{EPOCHS} loss {mean:.4f}\n")
            sys.stdout.flush()

    checksum = sum(mx.sum(p).item() for _, p in nn.utils.tree_flatten(model.parameters()))
    sys.stdout.write(f"rank {rank}/{world}: parameter checksum {checksum:.6f}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
