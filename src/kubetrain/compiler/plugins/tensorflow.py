"""TensorFlow (kubetrain's own ML policy; Kubeflow Trainer has none): ``TF_CONFIG`` for MultiWorkerMirroredStrategy.

Every node is a worker of one cluster. ``TF_CONFIG`` lists all workers by their pod DNS names and names this pod's
index. The pod template is shared by all indexed pods, so the index cannot be written into it: it comes from the
Job completion index through the downward API (``TF_TASK_INDEX``), and the kubelet substitutes it into
``TF_CONFIG`` by dependent env expansion (``$(TF_TASK_INDEX)`` in a later variable's value).

Every worker listens on port 29500 of its own pod (the port JAX and XGBoost coordinators use), which the node
container declares.
"""

from __future__ import annotations

import json

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler import env as e
from kubetrain.compiler.info import Info


def applies(info: Info) -> bool:
    return info.ml_policy is not None and info.ml_policy.tensorflow is not None


def tf_config(workers: list[str], port: int = c.DEFAULT_PORT) -> str:
    """The TF_CONFIG value, with ``$(TF_TASK_INDEX)`` where this pod's index goes."""
    addresses = [f"{host}:{port}" for host in workers]
    cluster = json.dumps({"worker": addresses}, separators=(",", ":"))
    return f'{{"cluster":{cluster},"task":{{"type":"worker","index":$({c.TF_TASK_INDEX})}}}}'


class TensorFlow:
    name = "TensorFlow"

    def enforce_ml_policy(self, info: Info) -> None:
        if not applies(info):
            return
        ps = info.trainer()
        if ps is None:
            return
        tj = info.trainjob.spec.trainer
        if tj is not None and tj.num_nodes is not None:
            ps.count = tj.num_nodes
        node = ps.container(c.NODE)
        if node is None:
            return
        # The trainer job always runs one replica (the JobSet builder sets it), so its workers are replica 0's pods.
        workers = info.pod_hostnames(ps, replicas=1)
        # TF_TASK_INDEX must come before TF_CONFIG: the kubelet only expands references to variables defined earlier.
        node["env"] = [x for x in node.get("env") or [] if x.get("name") not in c.TENSORFLOW_RESERVED_ENV]
        e.set_env_from_index(node, c.TF_TASK_INDEX)
        e.set_env(node, c.TF_CONFIG, tf_config(workers))
        e.add_port(node)

    def validate(self, info: Info, old: TrainJob | None) -> Result:
        result = Result()
        if not applies(info):
            return result
        tj = info.trainjob.spec.trainer
        result.add(e.reserved_env_entries(
            tj.env if tj else None, c.TENSORFLOW_RESERVED_ENV, "TensorFlow",
            "remove it: kubetrain sets TF_CONFIG (the workers and this pod's index) on every node"))
        ps = info.trainer()
        if ps is None or ps.container(c.NODE) is None:
            where = f"replicated job {ps.name!r}" if ps is not None else "no replicated job labelled trainer"
            result.error(
                "spec.runtimeRef",
                f'runtime "{info.runtime.name}" has mlPolicy.tensorflow but {where} has no container named '
                "'node', which is where TF_CONFIG goes: every worker would train alone",
                "name the trainer container 'node' in a replicated job labelled "
                f"{c.LABEL_ANCESTOR}: {c.ANCESTOR_TRAINER}",
            )
        if tj is not None and tj.num_proc_per_node is not None and tj.num_proc_per_node != 1:
            result.warn(
                "spec.trainer.numProcPerNode",
                f"has no effect with the TensorFlow runtime (got {tj.num_proc_per_node!r}): each node runs one "
                "worker, which uses all of the node's devices",
                "remove numProcPerNode and scale with numNodes",
            )
        return result
