"""What the CRDs add to the models: CEL rules, list semantics, bounds, Kubernetes types and explain text.

``kubetrain.api.crd`` walks the models and applies these tables; every entry names a model field, and
``generate_crds`` fails if one no longer exists (so a rename cannot silently drop a rule). Data, no logic beyond
``k8s_field``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from kubetrain.api import jobset, k8sschema, meta, optimization, runtime, trainjob
from kubetrain.api.constants import (
    KIND_CLUSTER_TRAINING_RUNTIME,
    KIND_OPTIMIZATIONJOB,
    KIND_TRAINING_RUNTIME,
    KIND_TRAINJOB,
    MANAGED_BY_ALLOWED,
)

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

DESCRIPTIONS: Final[dict[tuple[type[BaseModel], str], str]] = {
    (trainjob.TrainJob, "spec"): "What to train and which runtime to train it with.",
    (trainjob.TrainJob, "status"): "Observed state of the TrainJob, written by the controller.",
    (trainjob.TrainJobSpec, "runtime_ref"): "The TrainingRuntime or ClusterTrainingRuntime this job is built "
    "from. Cannot be changed after creation.",
    (trainjob.TrainJobSpec, "initializer"): "Dataset and model initializers that run before the trainer. "
    "Cannot be changed after creation.",
    (trainjob.TrainJobSpec, "trainer"): "Overrides for the trainer nodes (image, command, node count, "
    "resources). Cannot be changed after creation, except numNodes when the runtime has a torch elasticPolicy "
    "(`kubectl scale trainjob/NAME --replicas N`).",
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
    (trainjob.TrainJobStatus, "scaling"): "Restart budget carried across JobSet re-creations of an elastic "
    "TrainJob whose node count changed.",
    (runtime.TrainingRuntimeSpec, "ml_policy"): "How the job is distributed: node count and at most one "
    "framework policy (torch, mpi, jax, xgboost, tensorflow, flux).",
    (runtime.TrainingRuntimeSpec, "pod_group_policy"): "Gang scheduling through a PodGroup (coscheduling or "
    "volcano).",
    (runtime.TrainingRuntimeSpec, "template"): "The JobSet every TrainJob using this runtime starts from.",
    (runtime.MLPolicy, "torch"): "Run the trainer with torchrun.",
    (runtime.MLPolicy, "mpi"): "Run the trainer with mpirun from a launcher.",
    (runtime.MLPolicy, "jax"): "Configure JAX distributed initialisation.",
    (runtime.MLPolicy, "xgboost"): "Configure the XGBoost (Rabit) tracker.",
    (runtime.MLPolicy, "tensorflow"): "Give each node the TF_CONFIG of a MultiWorkerMirroredStrategy cluster "
    "(kubetrain's own; not in Kubeflow Trainer).",
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
    (optimization.OptimizationJob, "spec"): "What to search over, how, and the TrainJob every trial runs. Cannot "
    "be changed after creation.",
    (optimization.OptimizationJob, "status"): "Observed state of the search, written by the controller.",
    (optimization.Parameter, "search_space"): "Exactly one of uniform, logUniform or categorical.",
    (optimization.SearchSpace, "uniform"): "Values spread evenly over [min, max].",
    (optimization.SearchSpace, "log_uniform"): "Values spread evenly on a log scale over [min, max] (min > 0).",
    (optimization.SearchSpace, "categorical"): "One of a list of values.",
}

KIND_DESCRIPTIONS: Final = {
    KIND_OPTIMIZATIONJOB: "A hyperparameter search: trials are TrainJobs made from a template, "
    "each with its own parameter values; the best trial's values end up in status.result.",
    KIND_TRAINJOB: "A training job: a runtime reference plus the job's own trainer, data and model settings.",
    KIND_TRAINING_RUNTIME: "A namespaced blueprint for TrainJobs: distribution policy plus a JobSet "
    "template.",
    KIND_CLUSTER_TRAINING_RUNTIME: "A cluster-wide blueprint for TrainJobs: distribution policy plus a "
    "JobSet template.",
}

API_VERSION_DESCRIPTION: Final = "Versioned schema of this object (trainer.kubeflow.org/v1alpha1)."
KIND_FIELD_DESCRIPTION: Final = "REST resource this object represents."
