"""XGBoost example: a binary classifier trained by every worker together through XGBoost's collective.

The xgboost-distributed runtime injects the Rabit/collective settings into each node: DMLC_TRACKER_URI and
DMLC_TRACKER_PORT (node 0, which runs the tracker), DMLC_TASK_ID (this node's rank) and DMLC_NUM_WORKER. Each
worker builds its own shard of a synthetic dataset; histograms are all-reduced every boosting round, so all
workers grow the same trees.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import xgboost as xgb
from xgboost import collective
from xgboost.tracker import RabitTracker

ROUNDS = int(os.environ.get("ROUNDS", "20"))


def make_shard(rank: int, rows: int = 4000, features: int = 20) -> tuple[np.ndarray, np.ndarray]:
    # One labelling rule for everyone (seed 0), rows drawn per rank: each worker holds a different shard.
    weights = np.random.default_rng(0).normal(size=features)
    x = np.random.default_rng(1 + rank).normal(size=(rows, features))
    y = (x @ weights + 0.5 * np.random.default_rng(100 + rank).normal(size=rows) > 0).astype(np.float32)
    return x, y


def main() -> None:
    rank = int(os.environ["DMLC_TASK_ID"])
    world = int(os.environ["DMLC_NUM_WORKER"])
    tracker_uri = os.environ["DMLC_TRACKER_URI"]
    tracker_port = int(os.environ["DMLC_TRACKER_PORT"])

    tracker = None
    if rank == 0:
        # Node 0 hosts the tracker the other workers connect to (its address is DMLC_TRACKER_URI).
        tracker = RabitTracker(host_ip="0.0.0.0", n_workers=world, port=tracker_port)
        tracker.start()

    with collective.CommunicatorContext(
        dmlc_tracker_uri=tracker_uri, dmlc_tracker_port=tracker_port, dmlc_task_id=str(rank)
    ):
        print(f"worker {collective.get_rank()}/{collective.get_world_size()} connected", flush=True)
        x, y = make_shard(rank)
        split = int(len(x) * 0.8)
        # DMatrix inside the communicator: building the quantile sketch is itself a collective step.
        dtrain = xgb.DMatrix(x[:split], label=y[:split])
        dvalid = xgb.DMatrix(x[split:], label=y[split:])
        history: dict[str, dict[str, list[float]]] = {}
        booster = xgb.train(
            {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3, "eval_metric": "logloss", "nthread": 1},
            dtrain,
            num_boost_round=ROUNDS,
            evals=[(dtrain, "train"), (dvalid, "valid")],
            evals_result=history,
            verbose_eval=False,
        )
        # Metrics are already reduced across workers, so every worker prints the same numbers.
        train_loss = history["train"]["logloss"]
        if collective.get_rank() == 0:
            for i in (0, len(train_loss) // 2, len(train_loss) - 1):
                print(f"round {i + 1}/{ROUNDS} train-logloss {train_loss[i]:.4f}", flush=True)
        accuracy = float(((booster.predict(dvalid) > 0.5) == y[split:]).mean())
        trees = len(booster.get_dump())
        sys.stdout.write(f"worker {rank}: {trees} trees, valid accuracy {accuracy:.3f}\n")
        sys.stdout.flush()

    if tracker is not None:
        tracker.wait_for()


if __name__ == "__main__":
    main()
