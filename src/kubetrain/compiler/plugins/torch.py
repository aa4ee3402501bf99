"""Torch: node count, numProcPerNode resolution, ``PET_*`` env for torchrun, elastic rendezvous."""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.runtime import AnyRuntime, ElasticPolicy
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler import env as e
from kubetrain.compiler.errors import CompileError
from kubetrain.compiler.framework import object_meta
from kubetrain.compiler.info import Info, PodSet, cpu_count
from kubetrain.compiler.keys import KeyGen
from kubetrain.compiler.plugins import torchtune


def applies(info: Info) -> bool:
    return info.ml_policy is not None and info.ml_policy.torch is not None


def resolve_num_proc(info: Info) -> str:
    """``PET_NPROC_PER_NODE``: an int as a string, ``auto`` (GPUs present) or ``gpu``."""
    assert info.ml_policy is not None and info.ml_policy.torch is not None
    runtime_value = info.ml_policy.torch.num_proc_per_node
    value: int | str = "auto" if runtime_value is None else runtime_value  # 0 is an error, never "auto"
    trainer = info.trainjob.spec.trainer
    if trainer is not None and trainer.num_proc_per_node is not None:
        value = trainer.num_proc_per_node
    if isinstance(value, int):
        return str(value)
    if value == "gpu":
        return "gpu"
    if value == "auto" and info.gpu_count() > 0:
        return "auto"
    return str(max(1, cpu_count(info.effective_resources())))


def elastic_policy_of(runtime: AnyRuntime) -> ElasticPolicy | None:
    """The runtime's torch elasticPolicy: only then may a TrainJob's node count change while it runs."""
    ml = runtime.spec.ml_policy
    return ml.torch.elastic_policy if ml is not None and ml.torch is not None else None


def default_node_count(runtime: AnyRuntime) -> int | None:
    """An elastic runtime's node count for a TrainJob that does not set numNodes (None: not elastic)."""
    ep = elastic_policy_of(runtime)
    if ep is None:
        return None
    ml = runtime.spec.ml_policy
    if ml is not None and ml.num_nodes is not None:
        return ml.num_nodes
    return ep.max_nodes or ep.min_nodes or 1


def elastic_bounds(policy: ElasticPolicy, count: int) -> tuple[int, int]:
    lo = policy.min_nodes if policy.min_nodes is not None else count
    hi = policy.max_nodes if policy.max_nodes is not None else max(count, lo)
    return lo, hi


class Torch:
    name = "Torch"

    def enforce_ml_policy(self, info: Info) -> None:
        if not applies(info):
            return
        assert info.ml_policy is not None and info.ml_policy.torch is not None
        policy = info.ml_policy.torch
        trainer_ps = info.trainer()
        tj = info.trainjob.spec.trainer
        if trainer_ps is not None:
            if tj is not None and tj.num_nodes is not None:
                trainer_ps.count = tj.num_nodes
            elif policy.elastic_policy is not None and info.ml_policy.num_nodes is None:
                trainer_ps.count = default_node_count(info.runtime) or 1
        nproc = resolve_num_proc(info)
        count = trainer_ps.count if trainer_ps is not None else 1
        nnodes = str(count)
        if policy.elastic_policy is not None:
            lo, hi = elastic_bounds(policy.elastic_policy, count)
            nnodes = f"{lo}:{hi}"
            ep = policy.elastic_policy
            if trainer_ps is not None and ep.max_restarts is not None:
                # maxRestarts also bounds the node pods' own failures (an agent that dies takes its pod with it),
                # unless the runtime's Job template sets its own backoffLimit.
                job = trainer_ps.replicated_job.setdefault("template", {}).setdefault("spec", {})
                job.setdefault("backoffLimit", ep.max_restarts)

        tune = torchtune.is_torchtune(info.trainjob)
        node = trainer_ps.container(c.NODE) if trainer_ps is not None else None
        if tj is not None and node is not None:
            e.upsert_envs(node, [x.to_wire() for x in tj.env or []])
            self._inject(info, node, nnodes, nproc, master=not tune)
            if tune:
                torchtune.mutate_command(info, nproc)
            e.add_port(node)

        for target in (policy.env_injection.targets if policy.env_injection else None) or []:
            ps = info.by_name(target.job_name)
            for cname in target.container_names:
                container = ps.any_container(cname) if ps is not None else None
                if container is None:
                    raise CompileError(
                        "spec.runtimeRef",
                        f'envInjection target podSet "{target.job_name}" container "{cname}" '
                        "not found in runtime template",
                    )
                self._inject(info, container, nnodes, nproc, master=True)

    def _inject(self, info: Info, container: dict[str, object], nnodes: str, nproc: str, master: bool) -> None:
        e.set_env(container, c.PET_NNODES, nnodes)
        e.set_env(container, c.PET_NPROC_PER_NODE, nproc)
        e.set_env_from_index(container, c.PET_NODE_RANK)
        if master:
            e.set_env(container, c.PET_MASTER_ADDR, info.master_host())
            e.set_env(container, c.PET_MASTER_PORT, str(c.DEFAULT_PORT))
        assert info.ml_policy is not None and info.ml_policy.torch is not None
        ep = info.ml_policy.torch.elastic_policy
        if ep is not None:
            # Elastic training needs a dynamic rendezvous: c10d hosted by the first node.
            e.set_env(container, c.PET_RDZV_BACKEND, "c10d")
            e.set_env(container, c.PET_RDZV_ENDPOINT, f"{info.master_host()}:{c.DEFAULT_PORT}")
            e.set_env(container, c.PET_RDZV_ID, info.name)
            e.set_env(container, c.PET_MAX_RESTARTS, str(ep.max_restarts if ep.max_restarts is not None else 3))
            # Tuning a user may override through trainer.env (theirs was upserted before this runs).
            if not _has_env(container, c.PET_RDZV_CONF):
                e.set_env(container, c.PET_RDZV_CONF, f"last_call_timeout={c.ELASTIC_LAST_CALL_SECONDS}")
            if not _has_env(container, c.TORCH_DISABLE_SHARE_RDZV_TCP_STORE):
                e.set_env(container, c.TORCH_DISABLE_SHARE_RDZV_TCP_STORE, "1")

    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]:
        """With ``elasticPolicy.metrics``: one autoscaling/v2 HorizontalPodAutoscaler whose target is the TrainJob
        itself (its scale subresource sets ``spec.trainer.numNodes``), bounded by minNodes..maxNodes."""
        if not applies(info):
            return []
        assert info.ml_policy is not None and info.ml_policy.torch is not None
        ep = info.ml_policy.torch.elastic_policy
        trainer_ps = info.trainer()
        if ep is None or not ep.metrics or trainer_ps is None:
            return []
        lo, hi = elastic_bounds(ep, trainer_ps.count)
        return [
            {
                "apiVersion": "autoscaling/v2",
                "kind": "HorizontalPodAutoscaler",
                "metadata": object_meta(info, info.name),
                "spec": {
                    "scaleTargetRef": {"apiVersion": c.API_VERSION, "kind": c.KIND_TRAINJOB, "name": info.name},
                    "minReplicas": lo,
                    "maxReplicas": hi,
                    "metrics": copy.deepcopy(ep.metrics),
                },
            }
        ]

    def validate(self, info: Info, old: TrainJob | None) -> Result:
        result = Result()
        if not applies(info):
            return result
        assert info.ml_policy is not None and info.ml_policy.torch is not None
        policy = info.ml_policy.torch
        tj = info.trainjob.spec.trainer
        reserved = set(c.TORCH_RESERVED_ENV)
        if policy.elastic_policy is not None:
            reserved |= set(c.TORCH_ELASTIC_RESERVED_ENV)
        result.add(e.reserved_env(tj.env if tj else None, reserved,
                                  "remove them: the torch runtime sets them from numNodes/numProcPerNode"))
        for target in (policy.env_injection.targets if policy.env_injection else None) or []:
            ps = info.by_name(target.job_name)
            for cname in target.container_names:
                if ps is None or ps.any_container(cname) is None:
                    result.error(
                        "spec.runtimeRef",
                        f'envInjection target podSet "{target.job_name}" container "{cname}" '
                        "not found in runtime template",
                        "fix mlPolicy.torch.envInjection in the runtime",
                    )
        ep = policy.elastic_policy
        trainer_ps = info.trainer()
        if ep is not None and trainer_ps is not None:
            lo, hi = elastic_bounds(ep, trainer_ps.count)
            if lo > hi:
                result.error(
                    "spec.mlPolicy.torch.elasticPolicy",
                    f"minNodes ({lo}) must not exceed maxNodes ({hi})",
                    "swap or correct the bounds",
                )
            if tj is not None and tj.num_nodes is not None and not lo <= tj.num_nodes <= hi:
                fix = (
                    f"scale within {lo}..{hi} (the runtime's elasticPolicy)"
                    if old is not None
                    else f"set numNodes within {lo}..{hi} or drop it to start with {hi} nodes"
                )
                result.error(
                    "spec.trainer.numNodes",
                    f"must be between elasticPolicy minNodes ({lo}) and maxNodes ({hi}), got {tj.num_nodes}",
                    fix,
                )
        if torchtune.is_torchtune(info.trainjob):
            result.extend(torchtune.validate(info))
        else:
            result.extend(torchtune.warn_runtime_command(info))
        return result


def _has_env(container: dict[str, object], name: str) -> bool:
    env = container.get("env")
    return isinstance(env, list) and any(isinstance(x, dict) and x.get("name") == name for x in env)


def trainer_pod_set(info: Info) -> PodSet | None:
    return info.trainer()
