"""CustomResourceDefinitions generated from the pydantic API models.

The models in ``kubetrain.api`` are the single source of truth for the wire shape. This module turns
their JSON schemas into *structural* OpenAPI v3 schemas the Kubernetes API server accepts, and adds what
pydantic cannot express: CEL rules (``x-kubernetes-validations``), list semantics, printer columns and
``kubectl explain`` text for fields the models leave undocumented.

Pure: no I/O. ``kubetrain crds`` prints the result; ``manifests/crds/`` holds a checked-in copy.

Public:

``generate_crds() -> list[dict]``
    The three CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime), as plain dicts.
``crd_filename(crd) -> str``
    ``<group>_<plural>.yaml``, the file name used under ``manifests/crds``.
``dump_yaml(docs) -> str``
    Deterministic multi-document YAML.
``openapi_schema(model) -> dict``
    The structural schema of one model (used by the CRDs and by tests).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final, get_args, get_origin

import yaml
from pydantic import BaseModel

from kubetrain.api import jobset, k8sschema, meta, runtime, trainjob
from kubetrain.api.constants import (
    GROUP,
    KIND_CLUSTER_TRAINING_RUNTIME,
    KIND_TRAINING_RUNTIME,
    KIND_TRAINJOB,
    LABEL_FRAMEWORK,
    MANAGED_BY_ALLOWED,
    VERSION,
)

Schema = dict[str, Any]

# --- CEL rules ---
# Messages match upstream Kubeflow Trainer where upstream has the rule, so clients that match on them keep
# working.

_IMMUTABLE: Final = {"rule": "self == oldSelf", "message": "field is immutable"}
# JobSet's own CRD uses this wording for the parts of its spec it freezes; runtimes embed a JobSetSpec.
_JOBSET_IMMUTABLE: Final = {"rule": "self == oldSelf", "message": "Value is immutable"}

_MANAGED_BY_RULE: Final = {
    "rule": "self in [" + ", ".join(f"'{v}'" for v in MANAGED_BY_ALLOWED) + "]",
    "message": "ManagedBy must be " + " or ".join(MANAGED_BY_ALLOWED) + " if set",
}
_STORAGE_URI_RULE: Final = {
    "rule": "self == '' || self.matches('^[A-Za-z][A-Za-z0-9+.-]*://.+$')",
    "message": "storageUri may be empty, or it must be a valid URI (scheme://...)",
}
# numProcPerNode is int-or-string here (the v2.1 wire shape); CEL sees it as dyn, so each rule first checks
# the type. Two rules instead of one so the message says which half was violated.
_TRAINER_NPROC_RULES: Final = [
    {
        "rule": "type(self) != int || self >= 1",
        "message": "numProcPerNode must be greater than or equal to 1",
    },
    {
        "rule": "type(self) == int || self in ['auto', 'cpu', 'gpu']",
        "message": "numProcPerNode must be an integer or one of auto, cpu, gpu",
    },
]
_TORCH_NPROC_RULE: Final = {
    "rule": "self > 0 || self in ['auto', 'cpu', 'gpu']",
    "message": "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
}

_FIELD_RULES: Final[dict[tuple[type[BaseModel], str], list[dict[str, str]]]] = {
    (trainjob.TrainJobSpec, "runtime_ref"): [_IMMUTABLE],
    (trainjob.TrainJobSpec, "initializer"): [_IMMUTABLE],
    (trainjob.TrainJobSpec, "trainer"): [_IMMUTABLE],
    (trainjob.TrainJobSpec, "active_deadline_seconds"): [_IMMUTABLE],
    (trainjob.TrainJobSpec, "managed_by"): [_MANAGED_BY_RULE, _IMMUTABLE],
    (trainjob.RuntimePatch, "manager"): [_IMMUTABLE],
    (trainjob.InitializerSpec, "storage_uri"): [_STORAGE_URI_RULE],
    (trainjob.Trainer, "num_proc_per_node"): _TRAINER_NPROC_RULES,
    (runtime.TorchPolicy, "num_proc_per_node"): [_TORCH_NPROC_RULE],
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
    (jobset.JobSetSpec, "network"): [_JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "success_policy"): [_JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "failure_policy"): [_JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "startup_policy"): [_JOBSET_IMMUTABLE],
    (jobset.JobSetSpec, "volume_claim_policies"): [_JOBSET_IMMUTABLE],
    (jobset.ReplicatedJob, "depends_on"): [_JOBSET_IMMUTABLE],
}

_MODEL_RULES: Final[dict[type[BaseModel], list[dict[str, str]]]] = {
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
            "rule": "[has(self.torch), has(self.mpi), has(self.jax), has(self.xgboost), has(self.flux)]"
            ".filter(x, x).size() <= 1",
            "message": "Only one of the policy can be configured",
        },
    ],
}

# Lists merged by key (server-side apply and strategic merge treat entries with the same key as one entry).
_LIST_MAPS: Final[dict[tuple[type[BaseModel], str], list[str]]] = {
    (trainjob.TrainJobSpec, "runtime_patches"): ["manager"],
    (trainjob.Trainer, "env"): ["name"],
    (trainjob.InitializerSpec, "env"): ["name"],
    (trainjob.JobSetSpecPatch, "replicated_jobs"): ["name"],
    (trainjob.TrainJobStatus, "conditions"): ["type"],
    (trainjob.TrainJobStatus, "jobs_status"): ["name"],
    (runtime.EnvInjection, "targets"): ["jobName"],
    # Also what lets the API server correlate old and new items, so dependsOn's transition rule may run.
    (jobset.JobSetSpec, "replicated_jobs"): ["name"],
    (jobset.ReplicatedJob, "depends_on"): ["name"],
}
# Limits the CRD needs beyond the models' own. The API server estimates each CEL rule's worst-case cost from
# the maxItems/maxLength/maxProperties of what the rule reads (unbounded means "as much as fits in a 3 MiB
# request") times how often the rule can run (the maxItems of every list above it), and rejects the CRD when a
# rule could cost more than its budget. tests/api/test_crd_cost.py estimates every rule the same way.
_SCHEMA_EXTRA: Final[dict[tuple[type[BaseModel], str], dict[str, Any]]] = {
    (runtime.EnvInjectionTarget, "container_names"): {"items": {"maxLength": 63}},
    # Upstream's bounds: they keep the cost of the trainer's immutability rule (self == oldSelf) estimable.
    (trainjob.Trainer, "command"): {"items": {"maxLength": 1048576}},
    (trainjob.Trainer, "args"): {"items": {"maxLength": 1048576}},
    # JobSet's own bounds: dependsOn's immutability rule compares whole lists, so their length must be known.
    (jobset.ReplicatedJob, "depends_on"): {"maxItems": 5},
    (jobset.JobSetSpec, "volume_claim_policies"): {"maxItems": 50},
    (jobset.VolumeClaimPolicy, "templates"): {"maxItems": 50},
    # Upstream's bounds on status (metav1.Condition's own limits).
    (meta.Condition, "type"): {"maxLength": 316},
    (meta.Condition, "reason"): {"maxLength": 1024},
    (meta.Condition, "message"): {"maxLength": 32768},
    (trainjob.JobStatus, "name"): {"maxLength": 253},
}
_LIST_SETS: Final[set[tuple[type[BaseModel], str]]] = {(runtime.EnvInjectionTarget, "container_names")}
_LIST_ATOMIC: Final[set[tuple[type[BaseModel], str]]] = {
    (trainjob.Trainer, "command"),
    (trainjob.Trainer, "args"),
}

# --- Kubernetes types ---
# Fields the models keep as Kubernetes-shaped dicts (pod specs, PVC templates, metric specs) or model only in
# part get the full schema of the Kubernetes type, generated from the Kubernetes OpenAPI definitions
# (``k8sschema``), so the API server prunes and type-checks them even when the webhook is down, and
# ``kubectl explain`` documents them.


@dataclass(frozen=True)
class _K8s:
    definition: str
    patch: bool = False
    """A strategic-merge patch: the definition's top-level required fields come from what it patches."""


_K8S_FIELDS: Final[dict[tuple[type[BaseModel], str], _K8s]] = {
    (jobset.JobTemplateSpec, "spec"): _K8s(k8sschema.JOB_SPEC),
    (jobset.PodTemplateSpec, "spec"): _K8s(k8sschema.POD_SPEC),
    (jobset.VolumeClaimPolicy, "templates"): _K8s(k8sschema.PVC),
    (runtime.ElasticPolicy, "metrics"): _K8s(k8sschema.METRIC_SPEC),
    (trainjob.PodTemplateOverride, "spec"): _K8s(k8sschema.POD_SPEC, patch=True),
    (trainjob.PodTemplatePatch, "spec"): _K8s(k8sschema.POD_SPEC, patch=True),
}
# Models that stand for a Kubernetes type wherever they appear.
_K8S_MODELS: Final[dict[type[BaseModel], str]] = {
    meta.EnvVar: k8sschema.ENV_VAR,
    meta.ResourceRequirements: k8sschema.RESOURCES,
    meta.TemplateMeta: "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta",  # the embedded form
}


def _k8s_field(prop: Schema, spec: _K8s) -> Schema:
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

_DESCRIPTIONS: Final[dict[tuple[type[BaseModel], str], str]] = {
    (trainjob.TrainJob, "spec"): "What to train and which runtime to train it with.",
    (trainjob.TrainJob, "status"): "Observed state of the TrainJob, written by the controller.",
    (trainjob.TrainJobSpec, "runtime_ref"): "The TrainingRuntime or ClusterTrainingRuntime this job is built "
    "from. Cannot be changed after creation.",
    (trainjob.TrainJobSpec, "initializer"): "Dataset and model initializers that run before the trainer. "
    "Cannot be changed after creation.",
    (trainjob.TrainJobSpec, "trainer"): "Overrides for the trainer nodes (image, command, node count, "
    "resources). Cannot be changed after creation.",
    (trainjob.TrainJobSpec, "labels"): "Labels added to the JobSet (v2.1 API; prefer runtimePatches).",
    (
        trainjob.TrainJobSpec,
        "annotations",
    ): "Annotations added to the JobSet (v2.1 API; prefer runtimePatches).",
    (
        trainjob.TrainJobSpec,
        "pod_template_overrides",
    ): "Per-replicated-job pod template overrides (v2.1 API). Later entries override earlier ones.",
    (trainjob.TrainJobSpec, "runtime_patches"): "Patches onto the runtime template, one entry per manager "
    "(e.g. a queueing controller). Changeable only while the job is suspended.",
    (trainjob.TrainJobSpec, "suspend"): "When true, no training pods run; setting it back to false resumes.",
    (
        trainjob.TrainJobSpec,
        "active_deadline_seconds",
    ): "Seconds the job may run (counted from creation or the "
    "last resume) before it is failed with reason DeadlineExceeded. Cannot be changed after creation.",
    (trainjob.TrainJobSpec, "managed_by"): "The controller that reconciles this job: "
    + " or ".join(MANAGED_BY_ALLOWED)
    + ". Cannot be changed after creation.",
    (trainjob.RuntimeRef, "name"): "Name of the runtime.",
    (trainjob.RuntimeRef, "api_group"): "API group of the runtime.",
    (trainjob.RuntimeRef, "kind"): "TrainingRuntime (same namespace) or ClusterTrainingRuntime.",
    (trainjob.Initializer, "dataset"): "Downloads the dataset into the shared initializer volume.",
    (trainjob.Initializer, "model"): "Downloads the pretrained model into the shared initializer volume.",
    (trainjob.InitializerSpec, "storage_uri"): "Where to fetch from, as scheme://path (e.g. hf://org/name, "
    "s3://bucket/key).",
    (trainjob.InitializerSpec, "env"): "Extra environment variables for the initializer container.",
    (trainjob.InitializerSpec, "secret_ref"): "Secret whose keys become environment variables of the "
    "initializer container (credentials).",
    (trainjob.Trainer, "image"): "Container image of the trainer node container.",
    (trainjob.Trainer, "command"): "Entrypoint of the trainer node container.",
    (trainjob.Trainer, "args"): "Arguments of the trainer node container.",
    (trainjob.Trainer, "env"): "Extra environment variables for the trainer node container.",
    (trainjob.Trainer, "num_nodes"): "Number of training nodes; overrides the runtime's mlPolicy.numNodes.",
    (trainjob.Trainer, "resources_per_node"): "Compute resources of each node's trainer container; merged "
    "key by key over the runtime's.",
    (trainjob.Trainer, "num_proc_per_node"): "Processes per node: auto, cpu, gpu or a positive integer.",
    (trainjob.RuntimePatch, "manager"): "Who owns this patch, as a domain-prefixed path "
    "(e.g. kueue.x-k8s.io/manager).",
    (trainjob.RuntimePatch, "time"): "When the patch last changed; stamped by the mutating webhook.",
    (trainjob.RuntimePatch, "training_runtime_spec"): "The patch, shaped like a runtime spec.",
    (trainjob.TrainJobStatus, "conditions"): "Suspended, Complete and Failed conditions.",
    (trainjob.TrainJobStatus, "jobs_status"): "Pod counts per replicated job, copied from the JobSet.",
    (trainjob.TrainJobStatus, "trainer_status"): "Progress reported by the training process.",
    (runtime.TrainingRuntimeSpec, "ml_policy"): "How the job is distributed: node count and at most one "
    "framework policy (torch, mpi, jax, xgboost, flux).",
    (runtime.TrainingRuntimeSpec, "pod_group_policy"): "Gang scheduling through a PodGroup (coscheduling or "
    "volcano).",
    (runtime.TrainingRuntimeSpec, "template"): "The JobSet every TrainJob using this runtime starts from.",
    (runtime.MLPolicy, "torch"): "Run the trainer with torchrun.",
    (runtime.MLPolicy, "mpi"): "Run the trainer with mpirun from a launcher.",
    (runtime.MLPolicy, "jax"): "Configure JAX distributed initialisation.",
    (runtime.MLPolicy, "xgboost"): "Configure the XGBoost (Rabit) tracker.",
    (runtime.MLPolicy, "flux"): "Run the trainer under the Flux framework.",
    (runtime.MPIPolicy, "mpi_implementation"): "MPI flavour, which decides the hostfile format and env.",
    (runtime.MPIPolicy, "ssh_auth_mount_path"): "Where the generated SSH keys are mounted.",
    (runtime.MPIPolicy, "run_launcher_as_node"): "Whether the launcher also runs a training process.",
    (runtime.FluxPolicy, "num_proc_per_node"): "Tasks per node.",
    (runtime.TorchPolicy, "elastic_policy"): "Elastic training limits (torchrun --nnodes=min:max).",
    (runtime.TorchPolicy, "env_injection"): "Also inject the PET_* environment into other containers.",
    (runtime.EnvInjectionTarget, "job_name"): "Replicated job whose containers get the env.",
    (runtime.EnvInjectionTarget, "container_names"): "Containers that get the env (never node).",
    (runtime.CoschedulingPolicy, "schedule_timeout_seconds"): "How long the gang may wait to be scheduled.",
    (runtime.VolcanoPolicy, "queue"): "Volcano queue of the PodGroup.",
    (runtime.VolcanoPolicy, "priority_class_name"): "PriorityClass of the PodGroup.",
    (runtime.VolcanoPolicy, "min_member"): "Pods that must be schedulable together.",
    (runtime.VolcanoPolicy, "network_topology"): "Network topology constraint of the PodGroup.",
    (runtime.PodGroupPolicy, "coscheduling"): "Use the scheduler-plugins coscheduling PodGroup.",
    (runtime.PodGroupPolicy, "volcano"): "Use a Volcano PodGroup.",
    (jobset.JobSetTemplateSpec, "spec"): "A jobset.x-k8s.io/v1alpha2 JobSetSpec.",
    (jobset.JobSetSpec, "replicated_jobs"): "The groups of identical Jobs the JobSet runs.",
    (jobset.ReplicatedJob, "name"): "Name of the replicated job (node, launcher, dataset-initializer, ...).",
    (jobset.ReplicatedJob, "replicas"): "How many Jobs of this template to run.",
    (jobset.ReplicatedJob, "template"): "A batch/v1 JobTemplateSpec.",
}

_KIND_DESCRIPTIONS: Final = {
    KIND_TRAINJOB: "A training job: a runtime reference plus the job's own trainer, data and model settings.",
    KIND_TRAINING_RUNTIME: "A namespaced blueprint for TrainJobs: distribution policy plus a JobSet "
    "template.",
    KIND_CLUSTER_TRAINING_RUNTIME: "A cluster-wide blueprint for TrainJobs: distribution policy plus a "
    "JobSet template.",
}

_API_VERSION_DESCRIPTION: Final = "Versioned schema of this object (trainer.kubeflow.org/v1alpha1)."
_KIND_FIELD_DESCRIPTION: Final = "REST resource this object represents."


# --- model walking ---


def _models_under(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from ``model``'s fields, by class name (pydantic's ``$defs`` key)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ in found:
                return
            found[tp.__name__] = tp
            for f in tp.model_fields.values():
                visit(f.annotation)
            return
        for arg in get_args(tp):
            visit(arg)
        if get_origin(tp) is not None:
            visit(get_origin(tp))

    visit(model)
    return found


def _alias(model: type[BaseModel], field: str) -> str:
    info = model.model_fields[field]  # KeyError here means a table above names a field that no longer exists
    return info.alias or field


class _Converter:
    """Turns one pydantic JSON schema into a structural OpenAPI v3 schema."""

    def __init__(self, root: type[BaseModel]):
        self.root = root
        self.raw = root.model_json_schema(by_alias=True, mode="validation")
        self.defs: dict[str, Schema] = self.raw.get("$defs", {})
        self.models = _models_under(root)
        self.applied: set[object] = set()

    def run(self) -> Schema:
        return self._model(self.raw, self.root)

    def _model(self, node: Schema, model: type[BaseModel] | None) -> Schema:
        out = self._node(node)
        if model is None:
            return out
        props: dict[str, Schema] = out.get("properties", {})
        for name, info in model.model_fields.items():
            key = info.alias or name
            if key not in props:
                continue
            prop = props[key]
            # A field's own description= wins; the table beats the docstring of the field's class.
            own = "description" in (node.get("properties") or {}).get(key, {})
            if not own and (model, name) in _DESCRIPTIONS:
                prop["description"] = _DESCRIPTIONS[(model, name)]
            if (model, name) in _DESCRIPTIONS:
                self.applied.add(("desc", model, name))
            if (model, name) in _FIELD_RULES:
                prop.setdefault("x-kubernetes-validations", []).extend(
                    copy.deepcopy(_FIELD_RULES[(model, name)])
                )
                self.applied.add(("rule", model, name))
            if (model, name) in _LIST_MAPS:
                prop["x-kubernetes-list-type"] = "map"
                prop["x-kubernetes-list-map-keys"] = list(_LIST_MAPS[(model, name)])
                self.applied.add(("map", model, name))
            for extra_key, extra in _SCHEMA_EXTRA.get((model, name), {}).items():
                prop[extra_key] = {**prop.get(extra_key, {}), **extra} if isinstance(extra, dict) else extra
                self.applied.add(("extra", model, name))
            if (model, name) in _LIST_SETS:
                prop["x-kubernetes-list-type"] = "set"
            if (model, name) in _LIST_ATOMIC:
                prop["x-kubernetes-list-type"] = "atomic"
            if (model, name) in _K8S_FIELDS:
                props[key] = _k8s_field(prop, _K8S_FIELDS[(model, name)])
                self.applied.add(("k8s", model, name))
        if model in _MODEL_RULES:
            out.setdefault("x-kubernetes-validations", []).extend(copy.deepcopy(_MODEL_RULES[model]))
            self.applied.add(("model", model))
        return out

    def _node(self, node: Schema) -> Schema:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            model = self.models.get(name)
            if model in _K8S_MODELS:
                resolved = k8sschema.schema(_K8S_MODELS[model])
            else:
                resolved = self._model(self.defs[name], model)
            # Keys beside the $ref (a field's own description) describe this use and win over the class's.
            for k, v in self._node({k: v for k, v in node.items() if k != "$ref"}).items():
                resolved[k] = v
            return resolved
        if "anyOf" in node:
            return self._any_of(node)
        out: Schema = {}
        for key, value in node.items():
            if key in ("title", "$defs"):
                continue
            if key == "default" and value is None:
                continue  # "unset" in pydantic; the API server must not fill it in
            if key == "const":
                out["enum"] = [value]
            elif key == "exclusiveMinimum":
                # JSON Schema 2020-12 gives a number; OpenAPI v3.0 (what CRDs use) wants minimum + a boolean.
                out["minimum"] = value
                out["exclusiveMinimum"] = True
            elif key == "exclusiveMaximum":
                out["maximum"] = value
                out["exclusiveMaximum"] = True
            elif key == "properties":
                out["properties"] = {k: self._node(v) for k, v in value.items()}
            elif key == "items":
                out["items"] = self._node(value)
            elif key == "additionalProperties":
                if isinstance(value, dict):
                    out["additionalProperties"] = self._node(value)
                elif value is True and "properties" not in node:
                    # A free-form dict the tables above do not type. No CRD field is left like that (a test
                    # checks), but the converter stays total.
                    out["x-kubernetes-preserve-unknown-fields"] = True
                # True next to properties (a model that passes unknown fields through in Python): the CRD
                # still prunes them, so what the server stores is what the schema describes.
                # False: pruning already drops unknown fields; structural schemas may not say false.
            else:
                out[key] = copy.deepcopy(value)
        if out.get("type") == "object" and "additionalProperties" in out and "properties" in out:
            del out["additionalProperties"]  # not allowed together in a structural schema
        return out

    def _any_of(self, node: Schema) -> Schema:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        siblings = self._node({k: v for k, v in node.items() if k != "anyOf"})
        if len(options) == 1:
            out = self._node(options[0])
        else:
            types = {o.get("type") for o in options}
            if not types <= {"integer", "number", "string"} or "string" not in types:
                raise ValueError(f"cannot express anyOf {options!r} in a structural schema")
            # int | str (IntOrString, quantities): the one union structural schemas allow.
            out = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        out.update(siblings)
        return out


def openapi_schema(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI v3 schema for ``model`` (no ``$ref``, no null unions, CEL rules attached)."""
    schema: Schema = _tidy(_Converter(model).run())
    return schema


# Schema keys in the order a reader scans them (what it is, then constraints, then children, then extensions).
_KEY_ORDER: Final = (
    "description", "type", "format", "default", "enum",
    "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "minProperties", "maxProperties",
    "anyOf", "properties", "additionalProperties", "items", "required",
)  # fmt: skip


def _tidy(node: Any) -> Any:
    """Orders keys for readable YAML; turns reST ``literals`` into Markdown `literals` for kubectl explain."""
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    if not isinstance(node, dict):
        return node
    rank = {k: i for i, k in enumerate(_KEY_ORDER)}
    out: dict[str, Any] = {}
    for key in sorted(node, key=lambda k: (rank.get(k, len(rank)), k)):
        value = node[key]
        if key == "properties":
            if not value:
                # The API server drops an empty `properties` when it stores the CRD; emitting it would make every
                # server-side apply by a second field manager (kubectl after helm, an upgrade) a conflict, because
                # what it applies would differ from what is stored.
                continue
            out[key] = {name: _tidy(v) for name, v in value.items()}  # keep the models' field order
        elif key == "description" and isinstance(value, str):
            out[key] = value.replace("``", "`")
        elif key in ("default", "enum", "x-kubernetes-validations"):
            out[key] = copy.deepcopy(value)
        else:
            out[key] = _tidy(value)
    return out


def _crd(
    schema: Schema,
    kind: str,
    plural: str,
    short: str,
    scope: str,
    columns: list[dict[str, str]],
    status: bool,
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": columns,
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "kubetrain", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
            },
            "scope": scope,
            "versions": [version],
        },
    }


_AGE: Final = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_FRAMEWORK: Final = {
    "name": "Framework",
    "type": "string",
    "jsonPath": ".metadata.labels." + LABEL_FRAMEWORK.replace(".", "\\."),
}


def generate_crds() -> list[dict[str, Any]]:
    """TrainJob, TrainingRuntime and ClusterTrainingRuntime CRDs, in that order.

    Raises ``LookupError`` if a CEL rule, list rule or description above names a field the models no longer
    have (so a rename cannot silently drop a validation).
    """
    converters_applied: set[object] = set()

    def build(model: type[BaseModel], kind: str, *args: Any) -> dict[str, Any]:
        conv = _Converter(model)
        crd = _crd(_top_level(conv, kind), kind, *args)
        converters_applied.update(conv.applied)
        return crd

    crds = [
        build(
            trainjob.TrainJob,
            KIND_TRAINJOB,
            "trainjobs",
            "tj",
            "Namespaced",
            [
                {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"},
                {"name": "Runtime", "type": "string", "jsonPath": ".spec.runtimeRef.name"},
                _AGE,
            ],
            True,
        ),
        build(
            runtime.TrainingRuntime,
            KIND_TRAINING_RUNTIME,
            "trainingruntimes",
            "tr",
            "Namespaced",
            [_FRAMEWORK, _AGE],
            False,
        ),
        build(
            runtime.ClusterTrainingRuntime,
            KIND_CLUSTER_TRAINING_RUNTIME,
            "clustertrainingruntimes",
            "ctr",
            "Cluster",
            [_FRAMEWORK, _AGE],
            False,
        ),
    ]
    expected: set[object] = {("rule", m, f) for m, f in _FIELD_RULES}
    expected |= {("map", m, f) for m, f in _LIST_MAPS}
    expected |= {("desc", m, f) for m, f in _DESCRIPTIONS}
    expected |= {("model", m) for m in _MODEL_RULES}
    expected |= {("extra", m, f) for m, f in _SCHEMA_EXTRA}
    expected |= {("k8s", m, f) for m, f in _K8S_FIELDS}
    for m, f in (
        *_FIELD_RULES, *_LIST_MAPS, *_DESCRIPTIONS, *_LIST_SETS, *_LIST_ATOMIC, *_SCHEMA_EXTRA, *_K8S_FIELDS
    ):
        _alias(m, f)
    missing = expected - converters_applied
    if missing:
        raise LookupError(f"CRD annotations not applied (model changed?): {sorted(map(str, missing))}")
    return crds


def _top_level(conv: _Converter, kind: str) -> Schema:
    """The root schema: standard apiVersion/kind/metadata, then the model's spec (and status)."""
    schema = conv.run()
    props = schema["properties"]
    props["apiVersion"] = {"type": "string", "description": _API_VERSION_DESCRIPTION}
    props["kind"] = {"type": "string", "description": _KIND_FIELD_DESCRIPTION}
    # The API server validates metadata itself and forbids a detailed schema for it at the root.
    props["metadata"] = {"type": "object"}
    schema["description"] = _KIND_DESCRIPTIONS[kind]
    required = [r for r in schema.get("required", []) if r not in ("apiVersion", "kind", "metadata")]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    schema.pop("x-kubernetes-preserve-unknown-fields", None)
    tidy: Schema = _tidy(schema)
    return tidy


def crd_filename(crd: dict[str, Any]) -> str:
    """``trainer.kubeflow.org_trainjobs.yaml``: the upstream naming, so diffs against upstream line up."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.yaml"


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(docs: list[dict[str, Any]]) -> str:
    """Multi-document YAML with keys in insertion order (the models' field order), stable across runs."""
    return "".join(
        "---\n" + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=120, default_flow_style=False)
        for doc in docs
    )
