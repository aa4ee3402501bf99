"""Elastic TrainJobs on compiled objects: which replicated job holds the trainer nodes, how many it runs, how its
pods are selected, and what changes when the node count does. Pure dict helpers (no models, so the local supervisor
imports them cheaply); the operator and the local backend share them.

A torch elastic TrainJob's compiled objects depend on its node count in two places only: the trainer
replicated job's ``parallelism``/``completions`` (``PET_NNODES`` is the fixed ``minNodes:maxNodes`` range) and,
with gang scheduling, the PodGroup's ``minMember``/``minResources``. ``count_changes_only`` tells a scale
(apply those in place) from any other change.
"""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api import constants as c

Obj = dict[str, Any]


def find(objects: list[Obj], kind: str) -> Obj | None:
    return next((o for o in objects if o.get("kind") == kind), None)


def trainer_replicated_job(jobset: Obj) -> Obj | None:
    """The replicated job of the trainer nodes: the one labelled as the trainer ancestor, else ``node``."""
    rjobs = (jobset.get("spec") or {}).get("replicatedJobs") or []
    for rj in rjobs:
        labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(c.LABEL_ANCESTOR) == c.ANCESTOR_TRAINER:
            return dict(rj)
    return next((dict(rj) for rj in rjobs if rj.get("name") == c.NODE), None)


def node_count(jobset: Obj) -> int | None:
    """Trainer pods the JobSet runs (replicas x completions of the trainer replicated job)."""
    rj = trainer_replicated_job(jobset)
    if rj is None:
        return None
    spec = (rj.get("template") or {}).get("spec") or {}
    per_job = spec.get("completions", spec.get("parallelism", 1))
    return int(rj.get("replicas", 1)) * int(per_job if per_job is not None else 1)


def pod_selector(jobset: Obj) -> str | None:
    """The label selector of the trainer pods (JobSet labels every pod with its JobSet and replicated job)."""
    rj = trainer_replicated_job(jobset)
    name = (jobset.get("metadata") or {}).get("name")
    if rj is None or not name:
        return None
    return f"{c.LABEL_JOBSET_NAME}={name},{c.LABEL_REPLICATED_JOB_NAME}={rj['name']}"


def _counts_masked(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    if out.get("kind") == "JobSet":
        for rj in (out.get("spec") or {}).get("replicatedJobs") or []:
            job = (rj.get("template") or {}).get("spec") or {}
            job.pop("parallelism", None)
            job.pop("completions", None)
    elif out.get("kind") == "PodGroup":
        spec = out.get("spec") or {}
        spec.pop("minMember", None)
        spec.pop("minResources", None)
    return out


def count_changes_only(old: list[Obj], new: list[Obj]) -> bool:
    """Whether ``new`` differs from ``old`` (compiled objects of one TrainJob) only in pod counts."""
    if len(old) != len(new):
        return False
    return all(_counts_masked(a) == _counts_masked(b) for a, b in zip(old, new, strict=True))
