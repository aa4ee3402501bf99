"""What the CRDs add to the models: CEL rules, list semantics, bounds, Kubernetes types and explain text.

``kubetrain.api.crd`` walks the models and applies these tables; every entry names a model field, and
``generate_crds`` fails if one no longer exists (so a rename cannot silently drop a rule). Data, no logic beyond
``k8s_field``; the explain text is prose, so it lives in ``data/descriptions.yaml``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import Any, Final, cast

import yaml
from pydantic import BaseModel

from kubetrain.api import jobset, k8sschema, meta, optimization, runtime, trainjob
from kubetrain.api.constants import MANAGED_BY_ALLOWED

Schema = dict[str, Any]

# --- CEL rules ---
# Messages match upstream Kubeflow Trainer where upstream has the rule, so clients that match on them keep
# working.

IMMUTABLE: Final = {"rule": "self == oldSelf", "message": "field is immutable"}
# JobSet's own CRD uses this wording for the parts of its spec it freezes; runtimes embed a JobSetSpec.
JOBSET_IMMUTABLE: Final = {"rule": "self == oldSelf", "message": "Value is immutable"}

MANAGED_BY_RULE: Final = {
    "rule": "self in [" + ", ".join(f"'{v}'" for v in MANAGED_BY_ALLOWED) + "]",
    "message": "ManagedBy must be " + " or ".join(MANAGED_BY_ALLOWED) + " if set",
}
STORAGE_URI_RULE: Final = {
    "rule": "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
    "message": "storageUri may be empty, or it must be a valid URI (scheme://...)",
}
# numProcPerNode is int-or-string here (the v2.1 wire shape); CEL sees it as dyn, so each rule first checks
# the type. Two rules instead of one so the message says which half was violated.
TRAINER_NPROC_RULES: Final = [
    {
        "rule": "type(self) != int || self >= 1",
        "message": "numProcPerNode must be greater than or equal to 1",
    },
    {
        "rule": "type(self) == int || self in ['auto', 'cpu', 'gpu']",
        "message": "numProcPerNode must be an integer or one of auto, cpu, gpu",
    },
]
TORCH_NPROC_RULE: Final = {
    "rule": "self > 0 || self in ['auto', 'cpu', 'gpu']",
    "message": "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
}

FIELD_RULES: Final[dict[tuple[type[BaseModel], str], list[dict[str, str]]]] = {
    (trainjob.TrainJobSpec, "runtime_ref"): [IMMUTABLE],
    (trainjob.TrainJobSpec, "initializer"): [IMMUTABLE],
    (trainjob.TrainJobSpec, "active_deadline_seconds"): [IMMUTABLE],
    (trainjob.TrainJobSpec, "managed_by"): [MANAGED_BY_RULE, IMMUTABLE],
    (trainjob.RuntimePatch, "manager"): [IMMUTABLE],
    (trainjob.InitializerSpec, "storage_uri"): [STORAGE_URI_RULE],
    (trainjob.Trainer, "num_proc_per_node"): TRAINER_NPROC_RULES,
    (runtime.TorchPolicy, "num_proc_per_node"): [TORCH_NPROC_RULE],
    (runtime.MPIPolicy, "num_proc_per_node"): [
        {"rule": "self >= 1", "message": "NumProcPerNode in mpiPolicy must be >= 1"}
    ],
    (runtime.FluxPolicy, "num_proc_per_node"): [
        {"rule": "self >= 1", "message": "NumProcPerNode in fluxPolicy must be >= 1"}
    ],
    (runtime.EnvInjectionTarget, "container_names"): [
        {
            "rule": "!self.exists(c, c == 'node')",
            "message": "containerNames must not include the main node container because PET_* envs are "
            "always injected into it",
        }
    ],
    (jobset.JobSetSpec, "network"): [JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "success_policy"): [JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "failure_policy"): [JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "startup_policy"): [JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "volume_claim_policies"): [JOBSET_IMMUTABLE],
    (jobset.ReplicatedJob, "depends_on"): [JOBSET_IMMUTABLE],
    (optimization.TrainJobTemplateSpec, "metadata"): [
        {"rule": "!has(self.name) && !has(self.namespace)",
         "message": "name and namespace cannot be set in a template."}
    ],
}

# The trainer is immutable except numNodes, which elastic runtimes may change (the scale subresource writes it).
# One rule per field, at the trainer, so adding or removing a field is caught too (a transition rule on the field
# itself runs only when both sides have it). Whether numNodes may change is the webhook's call: it needs the
# runtime.
TRAINER_FIELDS_IMMUTABLE: Final = [
    {
        "rule": f"has(self.{f}) == has(oldSelf.{f}) && (!has(self.{f}) || self.{f} == oldSelf.{f})",
        "message": f"field is immutable: {f} cannot change (only numNodes may, for an elastic runtime)",
    }
    for f in ("image", "command", "args", "env", "resourcesPerNode", "numProcPerNode")
]

def _exactly_one(*fields: str) -> dict[str, str]:
    """Upstream's rule for a union (kubebuilder's ExactlyOneOf), with its wording."""
    return {
        "rule": "[" + ",".join(f"has(self.{f})" for f in fields) + "].filter(x,x==true).size() == 1",
        "message": f"exactly one of the fields in [{' '.join(fields)}] must be set",
    }


_MIN_BELOW_MAX: Final = {"rule": "double(self.min) < double(self.max)", "message": "min must be strictly less than max"}

# OptimizationJob (upstream main, KEP-3562): the rules and messages of its CRD.
OPTIMIZATION_RULES: Final[dict[type[BaseModel], list[dict[str, str]]]] = {
    optimization.OptimizationJobSpec: [
        {"rule": "self == oldSelf", "message": "OptimizationJobSpec is immutable and cannot be updated after creation"},
        {"rule": "self.parallelTrials <= self.numTrials", "message": "parallelTrials cannot exceed numTrials"},
        {
            "rule": "!has(self.searchAlgorithm.grid) || self.parameters.all(p, has(p.searchSpace.categorical))",
            "message": "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not "
            "supported.",
        },
    ],
    optimization.SearchAlgorithm: [_exactly_one("random", "grid")],
    optimization.SearchSpace: [_exactly_one("uniform", "logUniform", "categorical")],
    optimization.UniformSpace: [_MIN_BELOW_MAX],
    optimization.LogUniformSpace: [
        {"rule": "double(self.min) > 0.0", "message": "min must be strictly greater than 0"},
        _MIN_BELOW_MAX,
    ],
}

MODEL_RULES: Final[dict[type[BaseModel], list[dict[str, str]]]] = {
    **OPTIMIZATION_RULES,
    trainjob.Trainer: TRAINER_FIELDS_IMMUTABLE,
    trainjob.TrainerStatus: [
        {"rule": "has(self.lastUpdatedTime)", "message": "lastUpdatedTime is required when trainerStatus is present"}
    ],
    jobset.VolumeClaimPolicy: [
        {
            "rule": "!has(self.templates) || self.templates.all(t, !has(t.metadata) || !has(t.metadata.namespace) "
            "|| size(t.metadata.namespace) == 0)",
            "message": "namespace cannot be set for VolumeClaimPolicies templates",
        }
    ],
    trainjob.TrainJob: [
        {
            "rule": "self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",
            "message": "metadata.name must match RFC 1035 DNS label format",
        },
        {
            "rule": "size(self.metadata.name) <= 63",
            "message": "metadata.name must be no more than 63 characters",
        },
    ],
    runtime.MLPolicy: [
        {
            "rule": "!(has(self.numNodes) && (has(self.torch) && has(self.torch.elasticPolicy)))",
            "message": "numNodes should not be set if torch.elasticPolicy is configured",
        },
        {
            "rule": "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.tensorflow), "
            "has(self.flux)].filter(x, x).size() <= 1",
            "message": "Only one of the policy can be configured",
        },
    ],
}

# Lists merged by key (server-side apply and strategic merge treat entries with the same key as one entry).
LIST_MAPS: Final[dict[tuple[type[BaseModel], str], list[str]]] = {
    (trainjob.TrainJobSpec, "runtime_patches"): ["manager"],
    (trainjob.Trainer, "env"): ["name"],
    (trainjob.InitializerSpec, "env"): ["name"],
    (trainjob.JobSetSpecPatch, "replicated_jobs"): ["name"],
    (trainjob.TrainJobStatus, "conditions"): ["type"],
    (trainjob.TrainJobStatus, "jobs_status"): ["name"],
    (runtime.EnvInjection, "targets"): ["jobName"],
    (optimization.OptimizationJobSpec, "objectives"): ["metric"],
    (optimization.OptimizationJobSpec, "parameters"): ["name"],
    (optimization.OptimizationJobStatus, "conditions"): ["type"],
    (optimization.OptimizationResult, "parameters"): ["name"],
    # Also what lets the API server correlate old and new items, so dependsOn's transition rule may run.
    (jobset.JobSetSpec, "replicated_jobs"): ["name"],
    (jobset.ReplicatedJob, "depends_on"): ["name"],
}
# Limits the CRD needs beyond the models' own. The API server estimates each CEL rule's worst-case cost from
# the maxItems/maxLength/maxProperties of what the rule reads (unbounded means "as much as fits in a 3 MiB
# request") times how often the rule can run (the maxItems of every list above it), and rejects the CRD when a
# rule could cost more than its budget. tests/api/test_crd_cost.py estimates every rule the same way.
SCHEMA_EXTRA: Final[dict[tuple[type[BaseModel], str], dict[str, Any]]] = {
    (runtime.EnvInjectionTarget, "container_names"): {"items": {"maxLength": 63}},
    # Upstream's bounds: they keep the cost of the trainer's immutability rule (self == oldSelf) estimable.
    (trainjob.Trainer, "command"): {"items": {"maxLength": 1048576}},
    (trainjob.Trainer, "args"): {"items": {"maxLength": 1048576}},
    # JobSet's own bounds: dependsOn's immutability rule compares whole lists, so their length must be known.
    (jobset.ReplicatedJob, "depends_on"): {"maxItems": 5},
    (jobset.JobSetSpec, "volume_claim_policies"): {"maxItems": 50},
    (jobset.VolumeClaimPolicy, "templates"): {"maxItems": 50},
    # Upstream's v2.3 trainerStatus: typed as the Go struct is (int32, a metav1.Time), so the server checks it.
    (trainjob.TrainerStatus, "progress_percentage"): {"format": "int32"},
    (trainjob.TrainerStatus, "estimated_remaining_seconds"): {"format": "int32"},
    (trainjob.TrainerStatus, "last_updated_time"): {"format": "date-time"},
    # Upstream's bounds on status (metav1.Condition's own limits).
    (meta.Condition, "type"): {"maxLength": 316},
    (meta.Condition, "reason"): {"maxLength": 1024},
    (meta.Condition, "message"): {"maxLength": 32768},
    (trainjob.JobStatus, "name"): {"maxLength": 253},
    # Upstream's OptimizationJob: int32 counts, choices of at most 64 characters.
    (optimization.OptimizationJobSpec, "num_trials"): {"format": "int32"},
    (optimization.OptimizationJobSpec, "parallel_trials"): {"format": "int32"},
    (optimization.CategoricalSpace, "choices"): {"items": {"maxLength": optimization.MAX_TEXT}},
}
LIST_SETS: Final[set[tuple[type[BaseModel], str]]] = {
    (runtime.EnvInjectionTarget, "container_names"),
    (optimization.CategoricalSpace, "choices"),
}
LIST_ATOMIC: Final[set[tuple[type[BaseModel], str]]] = {
    (trainjob.Trainer, "command"),
    (trainjob.Trainer, "args"),
    (trainjob.TrainerStatus, "metrics"),
}

# --- Kubernetes types ---
# Fields the models keep as Kubernetes-shaped dicts (pod specs, PVC templates, metric specs) or model only in
# part get the full schema of the Kubernetes type, generated from the Kubernetes OpenAPI definitions
# (``k8sschema``), so the API server prunes and type-checks them even when the webhook is down, and
# ``kubectl explain`` documents them.


@dataclass(frozen=True)
class K8s:
    definition: str
    patch: bool = False
    """A strategic-merge patch: the definition's top-level required fields come from what it patches."""


K8S_FIELDS: Final[dict[tuple[type[BaseModel], str], K8s]] = {
    (jobset.JobTemplateSpec, "spec"): K8s(k8sschema.JOB_SPEC),
    (jobset.PodTemplateSpec, "spec"): K8s(k8sschema.POD_SPEC),
    (jobset.VolumeClaimPolicy, "templates"): K8s(k8sschema.PVC),
    (runtime.ElasticPolicy, "metrics"): K8s(k8sschema.METRIC_SPEC),
    (trainjob.PodTemplateOverride, "spec"): K8s(k8sschema.POD_SPEC, patch=True),
    (trainjob.PodTemplatePatch, "spec"): K8s(k8sschema.POD_SPEC, patch=True),
}
# Models that stand for a Kubernetes type wherever they appear.
K8S_MODELS: Final[dict[type[BaseModel], str]] = {
    meta.EnvVar: k8sschema.ENV_VAR,
    meta.ResourceRequirements: k8sschema.RESOURCES,
    meta.TemplateMeta: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",  # the embedded form
}


def k8s_field(prop: Schema, spec: K8s) -> Schema:
    """``prop`` (a model field's schema) with the Kubernetes type in place of its object or list items."""
    k8s = k8sschema.schema(spec.definition, patch=spec.patch)
    if prop.get("type") == "array":
        out = {k: v for k, v in prop.items() if k != "items"}
        out["items"] = k8s
        return out
    own: Schema = {k: prop[k] for k in ("description", "x-kubernetes-validations") if k in prop}
    return {**k8s, **own}


# --- kubectl explain text ---
# Used only where the model field has no ``description=`` of its own (a model description always wins), so the
# lead can move any of these into the models without changing the CRDs.

def _descriptions() -> dict[str, Any]:
    text = (resources.files("kubetrain.api") / "data" / "descriptions.yaml").read_text(encoding="utf-8")
    return cast(dict[str, Any], yaml.safe_load(text.replace("{managed_by_allowed}", " or ".join(MANAGED_BY_ALLOWED))))


def _field_name(model: type[BaseModel], wire: str) -> str:
    for name, info in model.model_fields.items():
        if (info.alias or name) == wire:
            return name
    raise LookupError(f"descriptions.yaml: {model.__name__} has no field {wire!r}")


_TEXT: Final = _descriptions()
_MODULES: Final = {m.__name__.rsplit(".", 1)[1]: m for m in (jobset, runtime, trainjob, optimization)}

# What `kubectl explain` prints for each field, kept as prose in data/descriptions.yaml.
DESCRIPTIONS: Final[dict[tuple[type[BaseModel], str], str]] = {
    (model, _field_name(model, wire)): text
    for where, fields in _TEXT["fields"].items()
    for model in [getattr(_MODULES[where.split(".")[0]], where.split(".")[1])]
    for wire, text in fields.items()
}
KIND_DESCRIPTIONS: Final[dict[str, str]] = _TEXT["kinds"]
API_VERSION_DESCRIPTION: Final[str] = _TEXT["apiVersion"]
KIND_FIELD_DESCRIPTION: Final[str] = _TEXT["kind"]
