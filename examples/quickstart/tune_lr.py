"""The quickstart's learning rate tuned from Python: the same search as tune-lr.yaml, with ``Client.optimize``.

    python examples/quickstart/tune_lr.py            # this machine; add kubeconfig=... to Client() for a cluster
"""

from __future__ import annotations

import sys
from pathlib import Path

from kubetrain import Client, Objective, RandomSearch, Search

HERE = Path(__file__).resolve().parent


def main() -> int:
    client = Client()
    name = client.optimize(
        name="quickstart-lr-py",
        runtime="torch-distributed",
        command=["torchrun", "train.py"],
        num_nodes=2,
        num_proc_per_node=1,
        env={"EPOCHS": "5", "LR": "{{.lr}}", "OMP_NUM_THREADS": "1"},
        search_space={"lr": Search.loguniform(0.001, 0.5)},
        objectives=Objective("loss", "Minimize"),
        algorithm=RandomSearch(seed=2),
        num_trials=6,
        parallel_trials=2,
        workdir=str(HERE),  # the trials start here, next to train.py
    )
    print(f"optimizationjob {name} created; waiting for its 6 trials", flush=True)
    view = client.wait_for_optimization_job(name, timeout=1800)
    for trial in view.trials:
        loss = "-" if trial.objective is None else f"{trial.objective:.4f}"
        print(f"{trial.name:24} {trial.state:9} loss {loss:8} lr {trial.parameters.get('lr', '-')}")
    best = client.get_best_results(name)
    if best is None:
        print(f"no result: {view.state} ({view.reason}: {view.message})", file=sys.stderr)
        return 1
    print(f"best: {best.name} with loss {best.objective:.4f} at lr {best.parameters['lr']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
