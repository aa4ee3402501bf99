"""Object-level validation (what the CRD schema, CEL rules and runtime webhooks check upstream).

Pure functions returning ``Result``; every finding names a field path, what was expected and a fix.
Checks that need both a TrainJob and its runtime live in ``kubetrain.compiler.validate_trainjob``.
"""

from __future__ import annotations

import difflib
import re

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.metricspec import check_metrics
from kubetrain.api.podschema import check_pod_spec
from kubetrain.api.resources import check_resources
from kubetrain.api.runtime import AnyRuntime
from kubetrain.api.trainjob import Trainer, TrainJob

_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_FAILURE_RULE_NAME = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def deprecation_warning(runtime: AnyRuntime, *, referenced: bool) -> str | None:
    if runtime.labels.get(c.LABEL_SUPPORT) != c.SUPPORT_DEPRECATED:
        return None
    prefix = "Referenced " if referenced else ""
    return (
        f'{prefix}{runtime.kind} "{runtime.name}" is deprecated and will be removed in a future release of '
        f"Kubeflow Trainer. See runtime deprecation policy: {c.DEPRECATION_POLICY_URL}"
    )


def name_rules(result: Result, name: str | None, kind: str) -> None:
    if not name:
        result.error("metadata.name", f"a {kind} needs a name", "set metadata.name")
        return
    if kind == c.KIND_TRAINJOB:
        if not _RFC1035.match(name):
            result.error(
                "metadata.name",
                f"metadata.name must match RFC 1035 DNS label format, got {name!r}",
                "use lowercase letters, digits and '-', starting with a letter and ending with a letter or digit",
            )
        if len(name) > 63:
            result.error(
                "metadata.name",
                f"metadata.name must be no more than 63 characters (got {len(name)})",
                "shorten the name: it becomes part of every pod hostname",
            )
    elif not _DNS1123_SUBDOMAIN.match(name) or len(name) > 253:
        result.error(
            "metadata.name",
            f"{name!r} is not a valid object name (lowercase RFC 1123 subdomain)",
            "use lowercase letters, digits, '-' and '.'",
        )


def validate_trainjob_object(trainjob: TrainJob, *, old: TrainJob | None = None) -> Result:
    """Schema- and CEL-level rules of a TrainJob on its own (plus immutability against ``old``)."""
    result = Result()
    name_rules(result, trainjob.metadata.name, c.KIND_TRAINJOB)
    spec = trainjob.spec
    if spec.managed_by is not None and spec.managed_by not in c.MANAGED_BY_ALLOWED:
        result.error(
            "spec.managedBy",
            f"ManagedBy must be {c.MANAGED_BY_DEFAULT} or {c.MANAGED_BY_MULTIKUEUE} if set, got {spec.managed_by!r}",
            "remove spec.managedBy to let kubetrain manage the job",
        )
    init = spec.initializer
    for field in ("dataset", "model"):
        part = getattr(init, field) if init else None
        uri = part.storage_uri if part else None
        if uri and not _URI.match(uri):
            result.error(
                f"spec.initializer.{field}.storageUri",
                f"storageUri may be empty, or it must be a valid URI (scheme://...), got {uri!r}",
                "write it as hf://org/name, s3://bucket/path, ...",
            )
    t = spec.trainer
    if t is not None and t.num_nodes is not None and t.num_nodes > c.MAX_JOB_PODS:
        result.error("spec.trainer.numNodes", f"must be at most {c.MAX_JOB_PODS} (Kubernetes runs an Indexed Job of "
                     f"at most that many pods), got {t.num_nodes}", "use fewer nodes")
    if t is not None and isinstance(t.num_proc_per_node, int) and t.num_proc_per_node < 1:
        result.error(
            "spec.trainer.numProcPerNode",
            f"numProcPerNode must be greater than or equal to 1, got {t.num_proc_per_node}",
            "use a positive integer, or auto / cpu / gpu",
        )
    if t is not None and t.resources_per_node is not None:
        result.errors.extend(check_resources(t.resources_per_node.to_wire(), "spec.trainer.resourcesPerNode",
                                             partial=True))
    if t is not None:
        names = [e.name for e in t.env or []]
        for dup in sorted({n for n in names if names.count(n) > 1}):
            result.error("spec.trainer.env", f"duplicate env name {dup!r}", "keep one entry per name")
    for i, override in enumerate(spec.pod_template_overrides or []):
        if override.spec is not None:
            result.errors.extend(check_pod_spec(override.spec, f"spec.podTemplateOverrides[{i}].spec", partial=True))
    for i, patch in enumerate(spec.runtime_patches or []):
        tmpl = patch.training_runtime_spec.template if patch.training_runtime_spec else None
        for j, rj in enumerate((tmpl.spec.replicated_jobs if tmpl and tmpl.spec else None) or []):
            pod = rj.template.spec.template if rj.template and rj.template.spec else None
            if pod is not None and pod.spec is not None:
                base = f"spec.runtimePatches[{i}].trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
                result.errors.extend(check_pod_spec(pod.spec, f"{base}.template.spec.template.spec", partial=True))
    if spec.pod_template_overrides and spec.runtime_patches:
        result.warn(
            "spec.podTemplateOverrides",
            "both podTemplateOverrides (v2.1) and runtimePatches (v2.2+) are set; overrides apply after patches",
            "move the overrides into runtimePatches",
        )
    if old is not None:
        _immutable(result, trainjob, old)
    return result


def _without_num_nodes(trainer: Trainer | None) -> Trainer | None:
    """The trainer as far as it is immutable: numNodes may change for elastic runtimes (the compiler checks the
    runtime), so it is left out; a trainer that only set numNodes counts as no trainer."""
    if trainer is None:
        return None
    rest = trainer.model_copy(update={"num_nodes": None})
    return None if rest == Trainer() else rest


def _immutable(result: Result, new: TrainJob, old: TrainJob) -> None:
    pairs = {
        "spec.runtimeRef": (new.spec.runtime_ref, old.spec.runtime_ref),
        "spec.initializer": (new.spec.initializer, old.spec.initializer),
        "spec.trainer": (_without_num_nodes(new.spec.trainer), _without_num_nodes(old.spec.trainer)),
        "spec.managedBy": (new.spec.managed_by, old.spec.managed_by),
        "spec.activeDeadlineSeconds": (new.spec.active_deadline_seconds, old.spec.active_deadline_seconds),
    }
    for path, (a, b) in pairs.items():
        if a != b:
            result.error(path, "field is immutable", "delete and re-create the TrainJob to change it")
    if (new.spec.runtime_patches or []) != (old.spec.runtime_patches or []) and not (
        new.spec.suspend or old.spec.suspend
    ):
        result.error(
            "spec.runtimePatches",
            "RuntimePatches can only be modified when the TrainJob is suspended before or after the update",
            "set spec.suspend: true in the same update",
        )


def validate_runtime_object(runtime: AnyRuntime, *, old: AnyRuntime | None = None) -> Result:
    """Rules for a TrainingRuntime or ClusterTrainingRuntime on its own."""
    result = Result()
    name_rules(result, runtime.metadata.name, runtime.kind)
    spec = runtime.spec
    ml = spec.ml_policy
    if ml is not None:
        chosen = ml.frameworks()
        if len(chosen) > 1:
            result.error(
                "spec.mlPolicy",
                f"Only one of the policy can be configured (found {', '.join(chosen)})",
                "keep exactly one of torch, mpi, jax, xgboost, tensorflow, flux",
            )
        if ml.torch is not None and ml.torch.elastic_policy is not None and ml.num_nodes is not None:
            result.error(
                "spec.mlPolicy.numNodes",
                "numNodes should not be set if torch.elasticPolicy is configured",
                "remove numNodes and set elasticPolicy.minNodes/maxNodes",
            )
        elastic = ml.torch.elastic_policy if ml.torch is not None else None
        for path, nodes in (("spec.mlPolicy.numNodes", ml.num_nodes),
                            ("spec.mlPolicy.torch.elasticPolicy.minNodes", elastic.min_nodes if elastic else None),
                            ("spec.mlPolicy.torch.elasticPolicy.maxNodes", elastic.max_nodes if elastic else None)):
            if nodes is not None and nodes > c.MAX_JOB_PODS:
                result.error(path, f"must be at most {c.MAX_JOB_PODS} (Kubernetes runs an Indexed Job of at most "
                             f"that many pods), got {nodes}", "use fewer nodes")
        if ml.torch is not None and ml.torch.elastic_policy is not None:
            metrics = ml.torch.elastic_policy.metrics
            result.errors.extend(check_metrics(metrics, "spec.mlPolicy.torch.elasticPolicy.metrics"))
        npp = ml.torch.num_proc_per_node if ml.torch else None
        if isinstance(npp, int) and npp < 1:
            result.error(
                "spec.mlPolicy.torch.numProcPerNode",
                "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
                "use a positive integer or auto / cpu / gpu",
            )
        for i, target in enumerate((ml.torch.env_injection.targets if ml.torch and ml.torch.env_injection else
                                    None) or []):
            if c.NODE in target.container_names:
                result.error(
                    f"spec.mlPolicy.torch.envInjection.targets[{i}].containerNames",
                    "containerNames must not include the main node container because PET_* envs are always "
                    "injected into it",
                    "remove 'node' from containerNames",
                )
    pgp = spec.pod_group_policy
    if pgp is not None and pgp.coscheduling is not None and pgp.volcano is not None:
        result.error(
            "spec.podGroupPolicy", "only one of coscheduling and volcano may be set", "keep one gang scheduler"
        )
    _replicated_jobs(result, runtime)
    if c.LABEL_FRAMEWORK not in runtime.labels:
        result.warn(
            f"metadata.labels[{c.LABEL_FRAMEWORK}]",
            f"{runtime.kind} \"{runtime.name}\" has no {c.LABEL_FRAMEWORK} label: the Kubeflow SDK will not "
            "list it",
            f"add the label, e.g. {c.LABEL_FRAMEWORK}: torch",
        )
    warning = deprecation_warning(runtime, referenced=False)
    if warning:
        result.warn(f"metadata.labels[{c.LABEL_SUPPORT}]", warning)
    support = runtime.labels.get(c.LABEL_SUPPORT)
    if support is not None and support != c.SUPPORT_DEPRECATED:
        close = difflib.get_close_matches(support.lower(), [c.SUPPORT_DEPRECATED], n=1, cutoff=0.6)
        result.warn(
            f"metadata.labels[{c.LABEL_SUPPORT}]",
            f"unknown value {support!r}: the only value with a meaning is {c.SUPPORT_DEPRECATED!r} (users are "
            "warned about deprecated runtimes); this label does nothing",
            f"did you mean {c.SUPPORT_DEPRECATED!r}?" if close else "remove the label, or set it to deprecated",
        )
    _coordinator_job(result, runtime)
    return result


def _coordinator_job(result: Result, runtime: AnyRuntime) -> None:
    """Torch, JAX and XGBoost point every node at ``<trainjob>-node-0-0`` (upstream hard-codes the name ``node``):
    a trainer job with another name leaves that address unresolvable and the job waiting for it forever."""
    ml = runtime.spec.ml_policy
    framework = next((f for f in ("torch", "jax", "xgboost") if ml is not None and getattr(ml, f) is not None), None)
    if framework is None:
        return
    for i, rj in enumerate(runtime.spec.template.spec.replicated_jobs):
        labels = (rj.template.metadata.labels if rj.template.metadata else None) or {}
        if labels.get(c.LABEL_ANCESTOR) == c.ANCESTOR_TRAINER and rj.name != c.NODE:
            env = {"torch": "PET_MASTER_ADDR", "jax": "JAX_COORDINATOR_ADDRESS", "xgboost": "DMLC_TRACKER_URI"}
            result.warn(
                f"spec.template.spec.replicatedJobs[{i}].name",
                f"the trainer replicated job is named {rj.name!r}, but the {framework} policy points "
                f"{env[framework]} at <trainjob>-node-0-0 (the name `node` is fixed, as in Kubeflow Trainer): that "
                "host will not exist and the nodes wait for it until they time out",
                f"rename the replicated job {rj.name!r} to 'node'",
            )
            return


def _replicated_jobs(result: Result, runtime: AnyRuntime) -> None:
    js = runtime.spec.template.spec
    base = "spec.template.spec.replicatedJobs"
    names = [rj.name for rj in js.replicated_jobs]
    if not names:
        result.error(base, "a runtime needs at least one replicated job", "add e.g. a `node` replicated job")
    for dup in sorted({n for n in names if names.count(n) > 1}):
        result.error(base, f"duplicate replicated job name {dup!r}", "give every replicated job its own name")
    ancestors: dict[str, str] = {}
    for i, rj in enumerate(js.replicated_jobs):
        path = f"{base}[{i}]"
        labels = (rj.template.metadata.labels if rj.template.metadata else None) or {}
        ancestor = labels.get(c.LABEL_ANCESTOR)
        pod = rj.template.spec.template.spec
        job = rj.template.spec
        for field, count in (("parallelism", job.parallelism), ("completions", job.completions)):
            if count is not None and count > c.MAX_JOB_PODS:
                result.error(f"{path}.template.spec.{field}", f"must be at most {c.MAX_JOB_PODS} (Kubernetes runs an "
                             f"Indexed Job of at most that many pods), got {count}", "use fewer pods")
        total = (rj.replicas or 1) * (job.parallelism or 1)
        if total > c.MAX_JOB_PODS:
            result.error(f"{path}.replicas", f"{rj.replicas} Jobs x {job.parallelism or 1} pod(s) = {total} pods, more "
                         f"than the {c.MAX_JOB_PODS} kubetrain runs per replicated job", "use fewer replicas")
        for finding in check_pod_spec(pod, f"{path}.template.spec.template.spec"):
            result.errors.append(finding)
        containers = pod.get("containers")
        cpath = f"{path}.template.spec.template.spec.containers"
        if not isinstance(containers, list) or not containers:
            result.error(cpath, "a pod template needs at least one container", "add a container with name and image")
            containers = []
        for k, cont in enumerate(containers):
            if not isinstance(cont, dict) or not cont.get("name"):
                result.error(f"{cpath}[{k}].name", "every container needs a name", "set name: node")
        if ancestor is not None:
            if ancestor not in c.ANCESTORS:
                result.warn(
                    f"{path}.template.metadata.labels[{c.LABEL_ANCESTOR}]",
                    f"unknown ancestor step {ancestor!r}; kubetrain ignores it",
                    f"use one of {', '.join(c.ANCESTORS)}",
                )
                continue
            if ancestor in ancestors:
                result.warn(
                    f"{path}.template.metadata.labels[{c.LABEL_ANCESTOR}]",
                    f"replicated jobs {ancestors[ancestor]!r} and {rj.name!r} both carry ancestor {ancestor!r}; "
                    "only the first receives the TrainJob's values",
                    "label only one replicated job per step",
                )
            ancestors.setdefault(ancestor, rj.name)
            if rj.replicas not in (None, 1):
                result.error(f"{path}.replicas", f"always must be 1 (got {rj.replicas})", "set replicas: 1")
            required = c.NODE if ancestor == c.ANCESTOR_TRAINER else ancestor
            if not any(isinstance(x, dict) and x.get("name") == required for x in containers):
                result.error(
                    cpath,
                    f"must contain the required container for the ancestor: {ancestor} (a container named "
                    f"{required!r})",
                    f"rename the step's main container to {required!r}",
                )
        for j, dep in enumerate(rj.depends_on or []):
            if dep.name == rj.name:
                result.error(
                    f"{path}.dependsOn[{j}].name",
                    f"replicated job {rj.name!r} depends on itself, so it could never start",
                    "remove this dependsOn entry, or name the replicated job it must wait for"
                    + (f" (one of: {', '.join(n for n in names[:i])})" if i else ""),
                )
            elif dep.name not in names:
                result.error(
                    f"{path}.dependsOn[{j}].name",
                    f"depends on replicated job {dep.name!r}, which does not exist",
                    f"use one of: {', '.join(n for n in names if n != rj.name)}",
                )
            elif names.index(dep.name) >= i:
                result.error(
                    f"{path}.dependsOn[{j}].name",
                    f"{dep.name!r} must come before {rj.name!r}: JobSet starts replicated jobs in order",
                    f"move {dep.name!r} above {rj.name!r}",
                )
        if rj.depends_on and js.startup_policy is not None:
            result.error(
                f"{path}.dependsOn",
                "StartupPolicy and DependsOn APIs are mutually exclusive",
                "remove spec.template.spec.startupPolicy",
            )
    if js.success_policy is not None:
        for j, target in enumerate(js.success_policy.target_replicated_jobs or []):
            if target not in names:
                result.error(
                    f"spec.template.spec.successPolicy.targetReplicatedJobs[{j}]",
                    f"replicated job {target!r} does not exist",
                    f"use one of: {', '.join(names)}",
                )
    _failure_policy(result, runtime, names)
    if js.coordinator is not None and js.coordinator.replicated_job not in names:
        result.error(
            "spec.template.spec.coordinator.replicatedJob",
            f"replicated job {js.coordinator.replicated_job!r} does not exist",
            f"use one of: {', '.join(names)}",
        )
    trainers = [rj.name for rj in js.replicated_jobs if
                ((rj.template.metadata.labels if rj.template.metadata else None) or {}).get(c.LABEL_ANCESTOR)
                == c.ANCESTOR_TRAINER]
    if runtime.spec.ml_policy is not None and not trainers and names:
        result.warn(
            base,
            f"no replicated job is labelled {c.LABEL_ANCESTOR}: trainer, so a TrainJob's trainer settings "
            "(image, command, numNodes, env) have nowhere to go",
            f"label the training job with {c.LABEL_ANCESTOR}: trainer",
        )


def _failure_policy(result: Result, runtime: AnyRuntime, names: list[str]) -> None:
    """JobSet's admission rules for failure policy rules: valid, unique names and existing target jobs."""
    fp = runtime.spec.template.spec.failure_policy
    base = "spec.template.spec.failurePolicy.rules"
    seen: set[str] = set()
    for i, rule in enumerate((fp.rules if fp else None) or []):
        if not _FAILURE_RULE_NAME.match(rule.name) or len(rule.name) > 128:
            result.error(
                f"{base}[{i}].name",
                f"rule name {rule.name!r} must match ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ (at most 128 characters)",
                "start with a letter; use letters, digits, '_', ',' and ':'",
            )
        result.unique(f"{base}[{i}].name", rule.name, seen, "rule name", "give every rule its own name")
        for j, target in enumerate(rule.target_replicated_jobs or []):
            if target not in names:
                result.error(
                    f"{base}[{i}].targetReplicatedJobs[{j}]",
                    f"invalid replicatedJob name {target!r} in failure policy does not appear in .spec.ReplicatedJobs",
                    f"use one of: {', '.join(names)}" if names else "add the replicated job first",
                )
