"""Plain, JAX and XGBoost ML policies: node counts and the coordinator env each framework reads."""

from __future__ import annotations

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler import env as e
from kubetrain.compiler.info import Info


def _set_count(info: Info) -> None:
    tj = info.trainjob.spec.trainer
    ps = info.trainer()
    if ps is not None and tj is not None and tj.num_nodes is not None:
        ps.count = tj.num_nodes


class PlainML:
    """Runtimes with no ML policy (and xgboost, as upstream): numNodes and the TrainJob env only. The TensorFlow
    policy (kubetrain's own) sets its node count itself, as JAX does."""

    name = "PlainML"

    def enforce_ml_policy(self, info: Info) -> None:
        ml = info.ml_policy
        if ml is not None and (ml.torch or ml.mpi or ml.jax or ml.tensorflow):
            return
        _set_count(info)
        tj = info.trainjob.spec.trainer
        ps = info.trainer()
        node = ps.container(c.NODE) if ps else None
        if tj is not None and node is not None:
            e.upsert_envs(node, [x.to_wire() for x in tj.env or []])


class JAX:
    name = "JAX"

    def enforce_ml_policy(self, info: Info) -> None:
        if info.ml_policy is None or info.ml_policy.jax is None:
            return
        _set_count(info)
        ps = info.trainer()
        node = ps.container(c.NODE) if ps else None
        if ps is None or node is None or info.trainjob.spec.trainer is None:
            return
        e.set_env(node, "JAX_NUM_PROCESSES", str(ps.count))
        e.set_env_from_index(node, "JAX_PROCESS_ID")
        e.set_env(node, "JAX_COORDINATOR_ADDRESS", f"{info.master_host()}:{c.DEFAULT_PORT}")
        e.add_port(node)


class XGBoost:
    name = "XGBoost"

    def enforce_ml_policy(self, info: Info) -> None:
        if info.ml_policy is None or info.ml_policy.xgboost is None:
            return
        ps = info.trainer()
        if ps is None:
            return
        _set_count(info)
        node = ps.container(c.NODE)
        if node is None or info.trainjob.spec.trainer is None:
            return
        workers_per_node = info.gpu_count() or 1
        e.set_env(node, "DMLC_TRACKER_URI", info.master_host())
        e.set_env(node, "DMLC_TRACKER_PORT", str(c.DEFAULT_PORT))
        e.set_env_from_index(node, "DMLC_TASK_ID")
        e.set_env(node, "DMLC_NUM_WORKER", str(ps.count * workers_per_node))
        e.add_port(node)

    def validate(self, info: Info, old: TrainJob | None) -> Result:
        result = Result()
        if info.ml_policy is None or info.ml_policy.xgboost is None:
            return result
        tj = info.trainjob.spec.trainer
        result.add(e.reserved_env_entries(tj.env if tj else None, c.XGBOOST_RESERVED_ENV, "XGBoost",
                                          "remove it: kubetrain sets the DMLC_* tracker variables"))
        return result
