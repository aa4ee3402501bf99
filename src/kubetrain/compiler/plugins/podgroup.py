"""Gang scheduling: coscheduling (scheduler-plugins) and Volcano PodGroups."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.runtime import CoschedulingPolicy, VolcanoPolicy
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler.framework import object_meta
from kubetrain.compiler.info import Info
from kubetrain.compiler.keys import KeyGen
from kubetrain.compiler.quantity import Quantity, sum_requests


def min_member(info: Info) -> int:
    # Upstream sums counts only; we multiply by replicas so rjobs with replicas > 1 are gang-scheduled whole.
    return sum(ps.count * ps.replicas for ps in info.pod_sets)


def min_resources(info: Info) -> dict[str, str]:
    parts: list[dict[str, Quantity]] = []
    for ps in info.pod_sets:
        n = ps.count * ps.replicas
        parts.append({k: q.scaled(n) for k, q in ps.single_pod_requests().items()})
    return {k: q.format() for k, q in sum_requests(parts).items()}


def pod_group(info: Info, api_version: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "PodGroup", "metadata": object_meta(info, info.name), "spec": spec}


P = TypeVar("P", CoschedulingPolicy, VolcanoPolicy)


class _PodGroupPlugin(Generic[P]):
    """What both gang schedulers share: a PodGroup named after the TrainJob, and its name on every pod. Each
    scheduler says where its policy lives, how pods name their group and what its PodGroup's spec holds."""

    api_version: str

    def _policy(self, info: Info) -> P | None:
        raise NotImplementedError

    def _mark(self, info: Info) -> None:
        raise NotImplementedError

    def _spec(self, info: Info, policy: P) -> dict[str, Any]:
        raise NotImplementedError

    def enforce_pod_group_policy(self, info: Info) -> None:
        if self._policy(info) is not None:
            self._mark(info)

    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]:
        policy = self._policy(info)
        return [] if policy is None else [pod_group(info, self.api_version, self._spec(info, policy))]


class Coscheduling(_PodGroupPlugin[CoschedulingPolicy]):
    name = "CoScheduling"
    api_version = c.COSCHEDULING_API_VERSION

    def _policy(self, info: Info) -> CoschedulingPolicy | None:
        return info.pod_group_policy.coscheduling if info.pod_group_policy is not None else None

    def _mark(self, info: Info) -> None:
        info.pod_labels[c.LABEL_COSCHEDULING_POD_GROUP] = info.name

    def _spec(self, info: Info, policy: CoschedulingPolicy) -> dict[str, Any]:
        timeout = policy.schedule_timeout_seconds
        spec: dict[str, Any] = {"minMember": min_member(info), "minResources": min_resources(info)}
        spec["scheduleTimeoutSeconds"] = 60 if timeout is None else timeout
        return spec


class Volcano(_PodGroupPlugin[VolcanoPolicy]):
    name = "Volcano"
    api_version = c.VOLCANO_API_VERSION

    def _policy(self, info: Info) -> VolcanoPolicy | None:
        return info.pod_group_policy.volcano if info.pod_group_policy is not None else None

    def _mark(self, info: Info) -> None:
        info.pod_annotations[c.ANNOTATION_VOLCANO_GROUP] = info.name

    def _spec(self, info: Info, policy: VolcanoPolicy) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "minMember": policy.min_member or min_member(info),
            "minResources": min_resources(info),
        }
        queue = policy.queue or info.annotations.get(c.ANNOTATION_VOLCANO_QUEUE)
        if queue:
            spec["queue"] = queue
        priority = policy.priority_class_name
        for ps in info.pod_sets:
            priority = ps.pod_spec.get("priorityClassName") or priority
        if priority:
            spec["priorityClassName"] = priority
        if policy.network_topology is not None:
            nt = policy.network_topology
            spec["networkTopology"] = {
                "mode": nt.mode or "hard",
                "highestTierAllowed": 1 if nt.highest_tier_allowed is None else nt.highest_tier_allowed,
            }
        return spec

    def validate(self, info: Info, old: TrainJob | None) -> Result:
        result = Result()
        policy = self._policy(info)
        if policy is None:
            return result
        if c.ANNOTATION_VOLCANO_QUEUE in info.annotations and not info.annotations[c.ANNOTATION_VOLCANO_QUEUE]:
            result.error(
                f"spec.annotations[{c.ANNOTATION_VOLCANO_QUEUE}]",
                "Volcano queue name must not be empty",
                "name a Volcano queue or remove the annotation",
            )
        if policy.min_member is not None and policy.min_member > min_member(info):
            result.warn(
                "spec.podGroupPolicy.volcano.minMember",
                f"minMember {policy.min_member} exceeds the {min_member(info)} pods this TrainJob creates; "
                "the PodGroup can never be scheduled",
                "lower minMember or raise numNodes",
            )
        return result
