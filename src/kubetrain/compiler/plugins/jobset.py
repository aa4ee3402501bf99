"""JobSet: endpoints and parallelism (pre-build), the JobSet object (build), template checks (validate)."""

from __future__ import annotations

import copy
import re
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import CompileError, Result
from kubetrain.api.resources import check_resources
from kubetrain.api.trainjob import InitializerSpec, TrainJob
from kubetrain.compiler import env as e
from kubetrain.compiler.framework import object_meta
from kubetrain.compiler.info import Info, PodSet
from kubetrain.compiler.keys import KeyGen
from kubetrain.compiler.plugins import mpi

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RESERVED_PATCH_CONTAINERS = (c.ANCESTOR_DATASET_INITIALIZER, c.ANCESTOR_MODEL_INITIALIZER, c.NODE)


def is_domain_prefixed_path(value: str) -> bool:
    """Kubernetes ``IsDomainPrefixedPath``: ``acme.io/manager`` yes, ``kueue.k8s.io/`` no."""
    domain, sep, path = value.partition("/")
    if not sep or not path or not domain:
        return False
    labels = domain.split(".")
    return len(domain) <= 253 and all(_DNS1123_LABEL.match(x) for x in labels) and bool(
        re.match(r"^[A-Za-z0-9/\-._~%!$&'()*+,;=:]+$", path)
    )


def _bounded(info: Info, ps: PodSet) -> None:
    """Refuse a replicated job of more pods than Kubernetes runs, before one name per pod is made (a numNodes of
    10^12 would otherwise take all memory, in validation as in the webhook)."""
    pods = ps.replicas * ps.count
    if pods <= c.MAX_JOB_PODS:
        return
    trainer = info.trainjob.spec.trainer
    mine = ps is info.trainer() and trainer is not None and trainer.num_nodes is not None
    raise CompileError(
        "spec.trainer.numNodes" if mine else "spec.runtimeRef",
        f'replicated job "{ps.name}" would run {pods} pods ({ps.replicas} Job(s) of {ps.count}); Kubernetes runs '
        f"an Indexed Job of at most {c.MAX_JOB_PODS} pods",
        "use fewer nodes" if mine else f'lower the numNodes, parallelism or replicas of {info.runtime.kind} '
        f'"{info.runtime.name}"',
    )


class JobSet:
    name = "JobSet"

    def pre_build(self, info: Info) -> None:
        for ps in info.pod_sets:
            _bounded(info, ps)
            ps.endpoints = info.pod_hostnames(ps)
            job = ps.replicated_job.setdefault("template", {}).setdefault("spec", {})
            job["parallelism"] = ps.count
            job["completions"] = ps.count

    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]:
        spec = info.jobset_spec
        tj = info.trainjob.spec
        for ps in info.pod_sets:
            if ps.ancestor == c.ANCESTOR_DATASET_INITIALIZER:
                self._initializer(ps, tj.initializer.dataset if tj.initializer else None)
            elif ps.ancestor == c.ANCESTOR_MODEL_INITIALIZER:
                self._initializer(ps, tj.initializer.model if tj.initializer else None)
            self._trainer(info, ps)
            pod_meta = ps.replicated_job["template"]["spec"].setdefault("template", {}).setdefault("metadata", {})
            if info.pod_labels:
                pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **info.pod_labels}
            if info.pod_annotations:
                pod_meta["annotations"] = {**(pod_meta.get("annotations") or {}), **info.pod_annotations}
            if not pod_meta:
                del ps.replicated_job["template"]["spec"]["template"]["metadata"]
        spec["suspend"] = bool(tj.suspend)
        meta = object_meta(info, info.name)
        if info.labels:
            meta["labels"] = dict(info.labels)
        if info.annotations:
            meta["annotations"] = dict(info.annotations)
        return [
            {"apiVersion": c.JOBSET_API_VERSION, "kind": "JobSet", "metadata": meta, "spec": copy.deepcopy(spec)}
        ]

    @staticmethod
    def _initializer(ps: PodSet, init: InitializerSpec | None) -> None:
        ps.replicated_job["replicas"] = 1
        container = ps.container(ps.ancestor or "")
        if init is None or container is None:
            return
        if init.storage_uri is not None:
            e.set_env(container, "STORAGE_URI", init.storage_uri)
        e.upsert_envs(container, [x.to_wire() for x in init.env or []])
        if init.secret_ref is not None:
            container.setdefault("envFrom", []).append({"secretRef": {"name": init.secret_ref.name}})

    @staticmethod
    def _trainer(info: Info, ps: PodSet) -> None:
        trainer = info.trainjob.spec.trainer
        is_trainer = ps.ancestor == c.ANCESTOR_TRAINER
        if is_trainer:
            ps.replicated_job["replicas"] = 1
        launcher_as_node = mpi.applies(info) and bool(mpi.policy(info).run_launcher_as_node) and ps.name == c.NODE
        node = ps.container(c.NODE)
        if trainer is None or node is None:
            return
        if is_trainer:
            if trainer.image is not None:
                node["image"] = trainer.image
            command = info.trainer_command if info.trainer_command is not None else trainer.command
            if command is not None:
                node["command"] = list(command)
            if trainer.args is not None and not info.trainer_args_dropped:
                node["args"] = list(trainer.args)
        if is_trainer or launcher_as_node:
            e.upsert_envs(node, [x.to_wire() for x in trainer.env or []])

    def validate(self, info: Info, old: TrainJob | None) -> Result:
        result = Result()
        tj = info.trainjob.spec
        init = tj.initializer
        for field, step, cfg in (
            ("dataset", c.ANCESTOR_DATASET_INITIALIZER, "datasetConfig"),
            ("model", c.ANCESTOR_MODEL_INITIALIZER, "modelConfig"),
        ):
            if init is None or getattr(init, field) is None:
                continue
            ps = info.by_ancestor(step) or info.by_name(step)
            path = f"spec.initializer.{field}"
            if ps is None:
                result.error(
                    path,
                    f"must have {step} job when trainJob is configured with input {cfg}: runtime "
                    f'"{info.runtime.name}" has no replicated job labelled {c.LABEL_ANCESTOR}: {step}',
                    f"remove spec.initializer.{field}, or use a runtime with a {step} step",
                )
                continue
            container = ps.container(step)
            if container is None:
                result.error(
                    path,
                    f"must have container with name - {step} in the {step} job",
                    f"name the runtime's {step} container {step!r}",
                )
                continue
            if not any(m.get("name") == c.INITIALIZER_VOLUME for m in container.get("volumeMounts") or []):
                result.error(
                    path,
                    f"must have volumeMount with name - {c.INITIALIZER_VOLUME} in container {step} of the "
                    f"{step} job",
                    f"mount a volume named {c.INITIALIZER_VOLUME!r} in the runtime's {step} container",
                )
        if tj.trainer is not None and tj.trainer.model_fields_set and info.trainer() is None:
            result.error(
                "spec.trainer",
                f'runtime "{info.runtime.name}" has no replicated job labelled '
                f"{c.LABEL_ANCESTOR}: {c.ANCESTOR_TRAINER}, so spec.trainer has nowhere to go",
                f"label the runtime's training job with {c.LABEL_ANCESTOR}: trainer, or remove spec.trainer",
            )
        elif tj.trainer is not None and info.trainer() is not None:
            trainer_ps = info.trainer()
            assert trainer_ps is not None
            if trainer_ps.container(c.NODE) is None and (
                tj.trainer.image or tj.trainer.command or tj.trainer.args or tj.trainer.env
            ):
                result.error(
                    "spec.trainer",
                    f'the trainer job "{trainer_ps.name}" of runtime "{info.runtime.name}" has no container '
                    "named node, so image/command/args/env cannot be applied",
                    "name the runtime's training container `node`",
                )
        self._validate_patches(info, result)
        self._validate_overrides(info, result)
        self._validate_merged_resources(info, result)
        return result

    @staticmethod
    def _validate_merged_resources(info: Info, result: Result) -> None:
        """resourcesPerNode is merged into the runtime's node container: the merge must still be a valid
        container (a GPU request against the runtime's different GPU limit is not)."""
        trainer = info.trainjob.spec.trainer
        ps = info.trainer()
        node = ps.container(c.NODE) if ps is not None else None
        if trainer is None or trainer.resources_per_node is None or node is None:
            return
        path = "spec.trainer.resourcesPerNode"
        for finding in check_resources(node.get("resources"), path, values=False):
            result.error(finding.path, f"after merging into the runtime's node container: {finding.message}",
                         finding.fix)

    @staticmethod
    def _validate_patches(info: Info, result: Result) -> None:
        rjobs = {rj.name: rj for rj in info.runtime.spec.template.spec.replicated_jobs}
        seen: set[str] = set()
        for i, patch in enumerate(info.trainjob.spec.runtime_patches or []):
            path = f"spec.runtimePatches[{i}]"
            if not is_domain_prefixed_path(patch.manager):
                result.error(
                    f"{path}.manager",
                    f"{patch.manager!r} must be a domain-prefixed path (such as 'acme.io/manager')",
                    "use <your domain>/<controller name>",
                )
            result.unique(f"{path}.manager", patch.manager, seen, "manager", "merge the two patches")
            tmpl = patch.training_runtime_spec.template if patch.training_runtime_spec else None
            for j, rj in enumerate((tmpl.spec.replicated_jobs if tmpl and tmpl.spec else None) or []):
                rpath = f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]"
                if rj.name not in rjobs:
                    result.error(
                        rpath,
                        "must not have replicated job that doesn't exist in the runtime job template",
                        f"choose one of: {', '.join(rjobs)}",
                    )
                    continue
                pod = rjobs[rj.name].template.spec.template.spec
                pspec = (rj.template.spec.template.spec if rj.template and rj.template.spec and
                         rj.template.spec.template else None) or {}
                for key, label in (("initContainers", "initContainer"), ("containers", "container")):
                    known = {x.get("name") for x in pod.get(key) or []}
                    for k, cont in enumerate(pspec.get(key) or []):
                        cpath = f"{rpath}.template.spec.template.spec.{key}[{k}]"
                        if cont.get("name") not in known:
                            result.error(
                                cpath,
                                f"must not have {label} that doesn't exist in the runtime job {rj.name}",
                                f"patch one of: {', '.join(sorted(n for n in known if n)) or '(none)'}",
                            )
                        if cont.get("env") and cont.get("name") in _RESERVED_PATCH_CONTAINERS:
                            result.error(
                                f"{cpath}.env",
                                "must not have envs for the dataset-initializer, model-initializer, node containers",
                                "set trainer env in spec.trainer.env and initializer env in spec.initializer",
                            )

    @staticmethod
    def _validate_overrides(info: Info, result: Result) -> None:
        names = [rj.name for rj in info.runtime.spec.template.spec.replicated_jobs]
        for i, override in enumerate(info.trainjob.spec.pod_template_overrides or []):
            for j, target in enumerate(override.target_jobs):
                if target.name not in names:
                    result.error(
                        f"spec.podTemplateOverrides[{i}].targetJobs[{j}].name",
                        f"replicated job {target.name!r} does not exist in runtime {info.runtime.name!r}",
                        f"target one of: {', '.join(names)}",
                    )
