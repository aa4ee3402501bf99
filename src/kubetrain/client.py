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

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api import constants as C


class Client:
    """The local backend by default; the cluster backend with ``kubeconfig``/``context`` or
    ``KUBETRAIN_BACKEND=k8s`` (the same choice the CLI makes)."""

    def __init__(
        self, *, namespace: str = "default", kubeconfig: str | None = None, context: str | None = None
    ) -> None:
        self.namespace = namespace
        self._cluster = bool(
            kubeconfig or context or os.environ.get("KUBETRAIN_BACKEND", "").lower() in ("k8s", "kubernetes")
        )
        self._backend: Any
        if self._cluster:
            try:
                from kubetrain.k8s.cli_backend import ClusterBackend
            except ImportError as exc:
                raise KubetrainError(f"the Kubernetes backend is not available: {exc}") from None
            self._backend = ClusterBackend(kubeconfig, context)
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

        ``func`` is shipped as source (``inspect.getsource``) and called with ``**func_args`` on every process;
        with a torch runtime it runs under ``torchrun``. Alternatively give ``command``/``args``.
        """
        if func is not None and command is not None:
            raise KubetrainError("train(): give either func or command, not both")
        name = name or f"tj-{uuid.uuid4().hex[:10]}"
        trainer: dict[str, Any] = {}
        if func is not None:
            trainer["command"] = self._func_command(func, func_args or {}, runtime)
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
        manifest = {
            "apiVersion": C.API_VERSION,
            "kind": C.KIND_TRAINJOB,
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {"runtimeRef": {"name": runtime, "kind": runtime_kind}, "trainer": trainer},
        }
        if self._cluster:
            self._backend.apply([manifest], namespace=self.namespace)
        else:
            self._backend.apply([manifest], namespace=self.namespace, workdir=workdir or os.getcwd())
        return name

    @staticmethod
    def _func_command(func: Callable[..., Any], func_args: dict[str, Any], runtime: str) -> list[str]:
        try:
            source = textwrap.dedent(inspect.getsource(func))
        except (OSError, TypeError) as exc:
            raise KubetrainError(
                f"train(func=...): the source of {getattr(func, '__name__', func)!r} cannot be read ({exc}); "
                "define it in a .py file (not in a REPL or `python -`)"
            ) from None
        # The code travels inside the TrainJob itself, so the same TrainJob works on a cluster.
        code = f"{source}\nimport json\n{func.__name__}(**json.loads({json.dumps(json.dumps(func_args))}))\n"
        if runtime.startswith("torch"):
            return ["torchrun", "--no-python", "python", "-c", code]
        return ["python", "-c", code]

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
