"""A trial: the TrainJob an OptimizationJob runs with one set of parameter values.

Trial ``i`` of OptimizationJob ``tune`` is the TrainJob ``tune-<i>``, in the OptimizationJob's namespace, made from
``spec.trainJobTemplate`` with the trial's values in its placeholders and in ``KUBEFLOW_TRAINER_OPT_<NAME>`` of the
trainer, labelled and annotated so that either backend finds its trials and their values again from the TrainJobs
alone (both controllers keep no other state), and owned by the OptimizationJob (deleting it deletes its trials).
"""

from __future__ import annotations

import json
from typing import Any, Final

from kubetrain.api import constants as c
from kubetrain.api.optimization import OptimizationJob
from kubetrain.compiler.optimization.suggest import seed_of, suggestion, trial_count
from kubetrain.compiler.optimization.template import env_name, substitute

# kubetrain's own (upstream has not settled how trials are marked; its KEP keeps the values in an annotation).
LABEL_OPTIMIZATIONJOB: Final = "kubetrain.dev/optimizationjob"
LABEL_TRIAL_INDEX: Final = "kubetrain.dev/trial-index"
ANNOTATION_PARAMETERS: Final = "kubetrain.dev/trial-parameters"
MAX_NAME: Final = 63


def trial_name(name: str, index: int) -> str:
    return f"{name}-{index}"


def longest_trial_name(oj: OptimizationJob) -> str:
    return trial_name(oj.name, max(trial_count(oj.spec) - 1, 0))


def owner_reference(oj: OptimizationJob) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_OPTIMIZATIONJOB,
        "name": oj.name,
        "uid": oj.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def trial_values(oj: OptimizationJob, index: int) -> dict[str, str]:
    """Trial ``index``'s parameter values (see ``suggest``)."""
    return suggestion(oj.spec, index, seed_of(oj.spec, oj.metadata.uid))


def build_trial(oj: OptimizationJob, index: int, values: dict[str, str] | None = None) -> dict[str, Any]:
    """Trial ``index`` as a TrainJob manifest (a plain dict, as the backends apply it)."""
    values = trial_values(oj, index) if values is None else values
    template = substitute(oj.spec.train_job_template.to_wire(), values)
    meta_in = template.get("metadata") or {}
    spec: dict[str, Any] = template["spec"]
    trainer = spec.setdefault("trainer", {})
    env = [e for e in trainer.get("env") or [] if e.get("name") not in {env_name(n) for n in values}]
    trainer["env"] = env + [{"name": env_name(n), "value": v} for n, v in values.items()]
    labels = {**(meta_in.get("labels") or {}), LABEL_OPTIMIZATIONJOB: oj.name, LABEL_TRIAL_INDEX: str(index)}
    annotations = {**(meta_in.get("annotations") or {}), ANNOTATION_PARAMETERS: json.dumps(values)}
    meta: dict[str, Any] = {
        "name": trial_name(oj.name, index),
        "namespace": oj.namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if meta_in.get("finalizers"):
        meta["finalizers"] = list(meta_in["finalizers"])
    if oj.metadata.uid:
        meta["ownerReferences"] = [owner_reference(oj)]
    return {"apiVersion": c.API_VERSION, "kind": c.KIND_TRAINJOB, "metadata": meta, "spec": spec}


def build_trials(oj: OptimizationJob) -> list[dict[str, Any]]:
    """Every trial the search runs, in order (``kubetrain render``, the golden files)."""
    seed = seed_of(oj.spec, oj.metadata.uid)
    return [build_trial(oj, i, suggestion(oj.spec, i, seed)) for i in range(trial_count(oj.spec))]


def trial_parameters(trainjob: dict[str, Any]) -> dict[str, str]:
    """The values a trial TrainJob was made with (its annotation), ``{}`` when unreadable."""
    text = ((trainjob.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PARAMETERS)
    try:
        values = json.loads(text) if text else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in values.items()} if isinstance(values, dict) else {}


def trial_index(trainjob: dict[str, Any]) -> int | None:
    text = ((trainjob.get("metadata") or {}).get("labels") or {}).get(LABEL_TRIAL_INDEX)
    return int(text) if text is not None and str(text).isdigit() else None


def owned_by(trainjob: dict[str, Any], oj: OptimizationJob) -> bool:
    """Whether the TrainJob is a trial of this OptimizationJob (its controller ownerReference, or, locally where
    uids are kubetrain's own, the label)."""
    refs = (trainjob.get("metadata") or {}).get("ownerReferences") or []
    if oj.metadata.uid:
        return any(r.get("uid") == oj.metadata.uid and r.get("controller") for r in refs)
    return ((trainjob.get("metadata") or {}).get("labels") or {}).get(LABEL_OPTIMIZATIONJOB) == oj.name
