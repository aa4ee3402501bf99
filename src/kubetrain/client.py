"""``kubetrain.Client``: submit, wait for and read TrainJobs from Python, locally or on a cluster.

>>> import kubetrain
>>> client = kubetrain.Client()
>>> name = client.train(func=train_fn, num_nodes=2, num_proc_per_node=2)
>>> client.wait(name).state
'Complete'
>>> print("\\n".join(client.logs(name)))
"""

from __future__ import annotations

import inspect
import json
import os
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from kubetrain.api import AnyRuntime, KubetrainError, TrainJob
from kubetrain.api import constants as C
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.search import BestTrial, GridSearch, Objective, RandomSearch, SearchSpace, TrialConfig
from kubetrain.service.backends import cluster_backend, is_cluster
from kubetrain.service.optimization import OptimizationView
from kubetrain.service.optimization import view as optimization_view
from kubetrain.service.submit import submit


class Client:
    """The local backend by default; the cluster backend with ``kubeconfig``/``context`` or
    ``KUBETRAIN_BACKEND=k8s`` (the same choice the CLI makes)."""

    def __init__(
        self, *, namespace: str = "default", kubeconfig: str | None = None, context: str | None = None
    ) -> None:
        self.namespace = namespace
        self._cluster = is_cluster(kubeconfig, context)
        self._backend: Any
        if self._cluster:
            self._backend = cluster_backend(kubeconfig, context, elsewhere="use this machine")
        else:
            from kubetrain.local.backend import LocalBackend

            self._backend = LocalBackend()

    def train(
        self,
        *,
        runtime: str = "torch-distributed",
        func: Callable[..., Any] | None = None,
        func_args: dict[str, Any] | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        num_nodes: int | None = None,
        num_proc_per_node: int | str | None = None,
        env: dict[str, str] | None = None,
        resources_per_node: dict[str, Any] | None = None,
        image: str | None = None,
        name: str | None = None,
        workdir: str | None = None,
        runtime_kind: str = C.KIND_CLUSTER_TRAINING_RUNTIME,
    ) -> str:
        """Create a TrainJob and start it in the background; returns its name.

        ``func`` is shipped as source (``inspect.getsource``) and called with ``**func_args`` on every process,
        started the way the Kubeflow SDK starts it for the runtime's ML policy: ``torchrun`` (torch: one process
        per ``num_proc_per_node`` on each node), ``mpirun`` over the runtime's hostfile from the launcher (mpi: one
        rank per slot, ``num_proc_per_node`` slots on each node), else ``python`` once per node (jax, xgboost,
        tensorflow, no policy). The world the function sees is ``num_nodes`` x processes per node. Alternatively
        give ``command``/``args``.
        """
        name = name or f"tj-{uuid.uuid4().hex[:10]}"
        trainer = self._trainer("train", runtime, runtime_kind, func, func_args, command, args, num_nodes,
                                num_proc_per_node, env, resources_per_node, image)
        manifest = {
            "apiVersion": C.API_VERSION,
            "kind": C.KIND_TRAINJOB,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"runtimeRef": {"name": runtime, "kind": runtime_kind}, "trainer": trainer},
        }
        submit([manifest], self._backend, namespace=self.namespace, cluster=self._cluster,
               workdirs=[workdir or os.getcwd()])
        return name

    def _trainer(
        self,
        verb: str,
        runtime: str,
        runtime_kind: str,
        func: Callable[..., Any] | None,
        func_args: dict[str, Any] | None,
        command: list[str] | None,
        args: list[str] | None,
        num_nodes: int | None,
        num_proc_per_node: int | str | None,
        env: dict[str, str] | None,
        resources_per_node: dict[str, Any] | None,
        image: str | None,
        searched: dict[str, SearchSpace] | None = None,
    ) -> dict[str, Any]:
        """The TrainJob's ``spec.trainer`` for ``train`` and ``optimize``; ``searched``: parameters whose values
        the function gets from each trial's placeholders (over ``func_args`` of the same name)."""
        if func is not None and command is not None:
            raise KubetrainError(f"{verb}(): give either func or command, not both")
        trainer: dict[str, Any] = {}
        # The runtime decides how the function is started and how many processes a node runs.
        found = self._runtime(runtime, runtime_kind) if func is not None or num_proc_per_node is not None else None
        _check_num_proc(found, runtime, num_proc_per_node)
        if func is not None:
            trainer["command"] = self._func_command(func, func_args or {}, found, runtime, searched or {})
        elif command is not None:
            trainer["command"] = list(command)
        if args is not None:
            trainer["args"] = list(args)
        if num_nodes is not None:
            trainer["numNodes"] = num_nodes
        if num_proc_per_node is not None:
            trainer["numProcPerNode"] = num_proc_per_node
        if env:
            trainer["env"] = [{"name": k, "value": v} for k, v in env.items()]
        if resources_per_node:
            trainer["resourcesPerNode"] = {"requests": resources_per_node, "limits": resources_per_node}
        if image:
            trainer["image"] = image
        return trainer

    def _runtime(self, name: str, kind: str) -> AnyRuntime | None:
        """The runtime a TrainJob would reference (None when there is none: applying then says so)."""
        for rt in self._backend.list_runtimes(self.namespace):
            if rt.name == name and rt.kind == kind:
                return rt  # type: ignore[no-any-return]
        return None

    @staticmethod
    def _func_command(
        func: Callable[..., Any],
        func_args: dict[str, Any],
        runtime: AnyRuntime | None,
        runtime_name: str,
        searched: dict[str, SearchSpace],
    ) -> list[str]:
        if runtime is not None and runtime.labels.get(C.LABEL_FRAMEWORK) == "torchtune":
            raise KubetrainError(
                f"train(func=...): runtime {runtime_name!r} is a torchtune runtime, which runs its built-in recipe "
                "(`tune run`), not a function; train the function on a runtime such as torch-distributed"
            )
        try:
            source = textwrap.dedent(inspect.getsource(func))
        except (OSError, TypeError) as exc:
            raise KubetrainError(
                f"train(func=...): the source of {getattr(func, '__name__', func)!r} cannot be read ({exc}); "
                "define it in a .py file (not in a REPL or `python -`)"
            ) from None
        # The code travels inside the TrainJob itself, so the same TrainJob works on a cluster. A searched
        # parameter's value is each trial's placeholder, turned back into the type its values were given in.
        fixed = json.dumps(json.dumps({k: v for k, v in func_args.items() if k not in searched}))
        values = "".join(f", {k!r}: {space.cast('{{.' + k + '}}')}" for k, space in searched.items())
        code = f"{source}\nimport json\n{func.__name__}(**{{**json.loads({fixed}){values}}})\n"
        return [*entrypoint(runtime), "-c", code]

    def get(self, name: str) -> TrainJob:
        return self._backend.get_trainjob(name, self.namespace)  # type: ignore[no-any-return]

    def list_jobs(self) -> list[TrainJob]:
        return self._backend.list_trainjobs(self.namespace)  # type: ignore[no-any-return]

    def wait(self, name: str, *, timeout: float = 600, poll: float = 0.2) -> TrainJob:
        """Block until the TrainJob is Complete or Failed and return it (check ``.state``); raises
        ``TimeoutError`` after ``timeout`` seconds. Locally a supervisor that died is noticed on the next poll (the
        TrainJob is then Failed with reason SupervisorLost)."""
        deadline = time.monotonic() + timeout
        while True:
            tj = self.get(name)
            if tj.finished:
                return tj
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"TrainJob {self.namespace}/{name} still {tj.state or 'running'} after {timeout}s"
                )
            time.sleep(poll)

    def logs(self, name: str, *, step: str | None = None) -> list[str]:
        """Every log line so far; ``[step/rank]``-prefixed when several steps are shown."""
        return list(self._backend.logs(name, self.namespace, step=step, follow=False))

    def stream_logs(self, name: str, *, step: str | None = None) -> Iterator[str]:
        """Log lines as they are written, until the TrainJob finishes."""
        yield from self._backend.logs(name, self.namespace, step=step, follow=True)

    def delete(self, name: str, *, keep_logs: bool = False) -> None:
        """Stop every process of the TrainJob (each pod gets its termination grace period) and remove it; locally
        its logs go too unless ``keep_logs``."""
        if self._cluster:
            self._backend.delete_trainjob(name, self.namespace)
        else:
            self._backend.delete_trainjob(name, self.namespace, keep_logs=keep_logs)


    # OptimizationJobs: a hyperparameter search over TrainJobs (docs/optimization.md).
    def optimize(
        self,
        *,
        search_space: dict[str, SearchSpace],
        objectives: list[Objective] | Objective | str = "loss",
        algorithm: RandomSearch | GridSearch | None = None,
        trial_config: TrialConfig | None = None,
        num_trials: int | None = None,
        parallel_trials: int | None = None,
        runtime: str = "torch-distributed",
        func: Callable[..., Any] | None = None,
        func_args: dict[str, Any] | None = None,
        command: list[str] | None = None,
        args: list[str] | None = None,
        num_nodes: int | None = None,
        num_proc_per_node: int | str | None = None,
        env: dict[str, str] | None = None,
        resources_per_node: dict[str, Any] | None = None,
        image: str | None = None,
        name: str | None = None,
        workdir: str | None = None,
        runtime_kind: str = C.KIND_CLUSTER_TRAINING_RUNTIME,
    ) -> str:
        """Create an OptimizationJob and start its search in the background; returns its name.

        Each trial is a TrainJob made as ``train`` makes one (same arguments). With ``func``, the trial calls it
        with ``func_args`` and, over them, its values of ``search_space`` (numbers as numbers: a choice of ints
        gives an int); with ``command``, put ``{{.name}}`` where a value goes, or read ``KUBEFLOW_TRAINER_OPT_<NAME>``
        (every trial's trainer has each value there). The objective is the metric trials report with the Kubeflow
        SDK's ``update_trainjob_status(metrics=...)``: ``objectives="loss"`` minimizes ``loss``;
        ``Objective("accuracy", "Maximize")`` maximizes.
        """
        if not search_space:
            raise KubetrainError("optimize(): search_space is empty; give at least one parameter, e.g. "
                                 "{'lr': Search.loguniform(1e-4, 1e-1)}")
        objective = Objective(objectives) if isinstance(objectives, str) else objectives
        chosen = objective if isinstance(objective, list) else [objective]
        config = trial_config or TrialConfig()
        trials = num_trials if num_trials is not None else config.num_trials
        parallel = parallel_trials if parallel_trials is not None else config.parallel_trials
        name = name or f"oj-{uuid.uuid4().hex[:10]}"
        trainer = self._trainer("optimize", runtime, runtime_kind, func, func_args, command, args, num_nodes,
                                num_proc_per_node, env, resources_per_node, image,
                                searched=search_space if func is not None else None)
        manifest = {
            "apiVersion": C.API_VERSION,
            "kind": C.KIND_OPTIMIZATIONJOB,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "objectives": [o.wire() for o in chosen],
                "searchAlgorithm": (algorithm or RandomSearch()).wire(),
                "parameters": [{"name": k, "searchSpace": v.wire(k)} for k, v in search_space.items()],
                "numTrials": trials,
                "parallelTrials": parallel,
                "trainJobTemplate": {"spec": {"runtimeRef": {"name": runtime, "kind": runtime_kind},
                                              "trainer": trainer}},
            },
        }
        submit([manifest], self._backend, namespace=self.namespace, cluster=self._cluster,
               workdirs=[workdir or os.getcwd()])
        return name

    def get_optimization_job(self, name: str) -> OptimizationView:
        """The search, its state and its trials best first (``.trials``, ``.best``, ``.state``)."""
        return optimization_view(self._backend, name, self.namespace)

    def list_optimization_jobs(self) -> list[OptimizationJob]:
        return self._backend.list_optimizationjobs(self.namespace)  # type: ignore[no-any-return]

    def wait_for_optimization_job(self, name: str, *, timeout: float = 3600, poll: float = 1.0) -> OptimizationView:
        """Block until the search is Complete or Failed (check ``.state``); raises ``TimeoutError``."""
        deadline = time.monotonic() + timeout
        while True:
            view = self.get_optimization_job(name)
            if view.state in ("Complete", "Failed"):
                return view
            if time.monotonic() >= deadline:
                raise TimeoutError(f"OptimizationJob {self.namespace}/{name} still {view.state} after {timeout}s")
            time.sleep(poll)

    def get_best_results(self, name: str) -> BestTrial | None:
        """The best trial so far (None while none has completed with the objective metric)."""
        best = self.get_optimization_job(name).best
        if best is None or best.objective is None:
            return None
        return BestTrial(best.name, dict(best.parameters), best.objective, dict(best.metrics))

    def delete_optimization_job(self, name: str) -> None:
        """Delete the search and every trial (their processes stop as ``delete`` stops a TrainJob's)."""
        self._backend.delete_optimizationjob(name, self.namespace)


def entrypoint(runtime: AnyRuntime | None) -> list[str]:
    """What starts a function's ``python -c`` on a runtime, as the Kubeflow SDK chooses it from the ML policy."""
    ml = runtime.spec.ml_policy if runtime is not None else None
    if ml is not None and ml.torch is not None:
        # torchrun reads the PET_* variables the torch policy sets: nodes, processes per node, rank, master.
        return ["torchrun", "--no-python", "python"]
    if ml is not None and ml.mpi is not None:
        # The launcher starts every rank; OpenMPI is given the hostfile as the SDK gives it, Hydra (Intel MPI,
        # MPICH) reads it from the variable the MPI policy sets on the launcher.
        if (ml.mpi.mpi_implementation or "OpenMPI") == "OpenMPI":
            return ["mpirun", "--hostfile", C.MPI_HOSTFILE_PATH, "python"]
        return ["mpirun", "python"]
    return ["python"]


def _check_num_proc(runtime: AnyRuntime | None, name: str, num_proc_per_node: int | str | None) -> None:
    ml = runtime.spec.ml_policy if runtime is not None else None
    if num_proc_per_node is None or runtime is None or num_proc_per_node == 1:
        return
    if ml is not None and (ml.torch is not None or ml.mpi is not None):
        return
    policy = ", ".join(ml.frameworks()) if ml is not None and ml.frameworks() else "no ML policy"
    raise KubetrainError(
        f"train(num_proc_per_node={num_proc_per_node!r}): runtime {name!r} ({policy}) runs one process per node, "
        "so the world size would stay num_nodes; scale with num_nodes, or use a torch or MPI runtime for several "
        "processes per node"
    )
