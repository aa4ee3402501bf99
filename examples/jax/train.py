"""JAX example: data-parallel training of a small MLP across processes on several nodes (multi-controller JAX).

The jax-distributed runtime gives each node JAX_COORDINATOR_ADDRESS (node 0), JAX_NUM_PROCESSES and
JAX_PROCESS_ID, which `jax.distributed.initialize` reads. Every process then sees the devices of all processes;
the batch is sharded across them along a "data" mesh axis and the parameters are replicated, so `jax.jit` makes
the gradient all-reduce part of the compiled step (over gloo on CPU).
"""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

EPOCHS = int(os.environ.get("EPOCHS", "5"))
BATCH_PER_PROCESS = 64


def init_params(key: jax.Array, sizes: list[int]) -> list[dict[str, jax.Array]]:
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:], strict=True):
        key, sub = jax.random.split(key)
        params.append({"w": jax.random.normal(sub, (fan_in, fan_out)) / jnp.sqrt(fan_in), "b": jnp.zeros(fan_out)})
    return params


def predict(params: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for layer in params[:-1]:
        x = jax.nn.relu(x @ layer["w"] + layer["b"])
    return x @ params[-1]["w"] + params[-1]["b"]


def loss_fn(params: list[dict[str, jax.Array]], x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((predict(params, x) - y) ** 2)


def local_shard(process: int, processes: int, n: int = 4096, features: int = 16) -> tuple[np.ndarray, np.ndarray]:
    # The same dataset everywhere (seed 0); each process keeps every processes-th row.
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n, features)).astype(np.float32)
    y = (np.sin(x[:, :1]) + x[:, 1:2] * x[:, 2:3] + 0.05 * rng.normal(size=(n, 1))).astype(np.float32)
    return x[process::processes], y[process::processes]


def main() -> None:
    jax.distributed.initialize(
        coordinator_address=os.environ["JAX_COORDINATOR_ADDRESS"],
        num_processes=int(os.environ["JAX_NUM_PROCESSES"]),
        process_id=int(os.environ["JAX_PROCESS_ID"]),
    )
    process, processes = jax.process_index(), jax.process_count()
    print(f"process {process}/{processes}: {len(jax.devices())} devices, {jax.local_device_count()} local", flush=True)

    mesh = Mesh(np.array(jax.devices()), ("data",))
    replicated, sharded = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    optimizer = optax.adam(1e-2)
    params = jax.device_put(init_params(jax.random.key(0), [16, 64, 64, 1]), replicated)
    opt_state = jax.device_put(optimizer.init(params), replicated)

    @jax.jit
    def train_step(params, opt_state, x, y):  # type: ignore[no-untyped-def]
        loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    x, y = local_shard(process, processes)
    steps = len(x) // BATCH_PER_PROCESS
    for epoch in range(EPOCHS):
        order = np.random.default_rng(epoch).permutation(len(x))
        total = 0.0
        for step in range(steps):
            idx = order[step * BATCH_PER_PROCESS : (step + 1) * BATCH_PER_PROCESS]
            # This process's rows become its slice of one global batch of processes x BATCH_PER_PROCESS rows.
            gx = jax.make_array_from_process_local_data(sharded, x[idx])
            gy = jax.make_array_from_process_local_data(sharded, y[idx])
            params, opt_state, loss = train_step(params, opt_state, gx, gy)
            total += float(loss)
        if process == 0:
            print(f"epoch {epoch + 1}/{EPOCHS} loss {total / steps:.4f}", flush=True)

    # The parameters are one replicated array: every process must hold the same values.
    checksum = sum(float(jnp.sum(leaf)) for leaf in jax.tree_util.tree_leaves(params))
    sys.stdout.write(f"process {process}: parameter checksum {checksum:.6f}\n")
    sys.stdout.flush()
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
