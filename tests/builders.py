"""Fixture builders for table tests: short, readable cases instead of YAML blobs."""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.api import ClusterTrainingRuntime, TrainingRuntime, TrainJob
from kubetrain.api import constants as c
from kubetrain.compiler import compile_trainjob, fixed_keygen

Obj = dict[str, Any]


class RuntimeBuilder:
    def __init__(self, name: str = "test-runtime", kind: str = "ClusterTrainingRuntime", namespace: str | None = None):
        self.obj: Obj = {
            "apiVersion": c.API_VERSION,
            "kind": kind,
            "metadata": {"name": name, "labels": {c.LABEL_FRAMEWORK: "torch"}},
            "spec": {"template": {"spec": {"replicatedJobs": []}}},
        }
        if namespace:
            self.obj["metadata"]["namespace"] = namespace

    def ml(self, **policy: Any) -> RuntimeBuilder:
        self.obj["spec"]["mlPolicy"] = policy
        return self

    def pod_group(self, **policy: Any) -> RuntimeBuilder:
        self.obj["spec"]["podGroupPolicy"] = policy
        return self

    def label(self, key: str, value: str) -> RuntimeBuilder:
        self.obj["metadata"]["labels"][key] = value
        return self

    def jobset(self, **fields: Any) -> RuntimeBuilder:
        self.obj["spec"]["template"]["spec"].update(fields)
        return self

    def meta(self, labels: Obj | None = None, annotations: Obj | None = None) -> RuntimeBuilder:
        m = self.obj["spec"]["template"].setdefault("metadata", {})
        if labels:
            m["labels"] = labels
        if annotations:
            m["annotations"] = annotations
        return self

    def rjob(
        self,
        name: str,
        *,
        ancestor: str | None = None,
        containers: list[Obj] | None = None,
        init_containers: list[Obj] | None = None,
        depends_on: list[tuple[str, str]] | None = None,
        replicas: int | None = None,
        parallelism: int | None = None,
        pod: Obj | None = None,
    ) -> RuntimeBuilder:
        pod_spec: Obj = dict(pod or {})
        pod_spec["containers"] = containers if containers is not None else [{"name": c.NODE, "image": "img"}]
        if init_containers:
            pod_spec["initContainers"] = init_containers
        job_spec: Obj = {"template": {"spec": pod_spec}}
        if parallelism is not None:
            job_spec["parallelism"] = parallelism
        tmpl: Obj = {"spec": job_spec}
        if ancestor:
            tmpl["metadata"] = {"labels": {c.LABEL_ANCESTOR: ancestor}}
        rj: Obj = {"name": name, "template": tmpl}
        if replicas is not None:
            rj["replicas"] = replicas
        if depends_on:
            rj["dependsOn"] = [{"name": n, "status": s} for n, s in depends_on]
        self.obj["spec"]["template"]["spec"]["replicatedJobs"].append(rj)
        return self

    def trainer(self, name: str = c.NODE, **container: Any) -> RuntimeBuilder:
        return self.rjob(name, ancestor=c.ANCESTOR_TRAINER, containers=[{"name": c.NODE, "image": "img", **container}])

    def build(self) -> ClusterTrainingRuntime | TrainingRuntime:
        model = ClusterTrainingRuntime if self.obj["kind"] == "ClusterTrainingRuntime" else TrainingRuntime
        return model.model_validate(copy.deepcopy(self.obj))


class TrainJobBuilder:
    def __init__(self, name: str = "test-job", namespace: str = "default", runtime: str = "test-runtime",
                 kind: str = "ClusterTrainingRuntime"):
        self.obj: Obj = {
            "apiVersion": c.API_VERSION,
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}"},
            "spec": {"runtimeRef": {"name": runtime, "kind": kind}},
        }

    def trainer(self, **fields: Any) -> TrainJobBuilder:
        self.obj["spec"].setdefault("trainer", {}).update(fields)
        return self

    def resources(self, requests: Obj | None = None, limits: Obj | None = None) -> TrainJobBuilder:
        res: Obj = {}
        if requests:
            res["requests"] = requests
        if limits:
            res["limits"] = limits
        return self.trainer(resourcesPerNode=res)

    def initializer(self, **fields: Any) -> TrainJobBuilder:
        self.obj["spec"]["initializer"] = fields
        return self

    def spec(self, **fields: Any) -> TrainJobBuilder:
        self.obj["spec"].update(fields)
        return self

    def build(self) -> TrainJob:
        return TrainJob.model_validate(copy.deepcopy(self.obj))


def compile_objects(tj: TrainJob, rt: ClusterTrainingRuntime | TrainingRuntime) -> dict[str, Obj]:
    """Compiled objects keyed ``Kind/name``."""
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in compile_trainjob(tj, rt, keygen=fixed_keygen())}


def jobset(tj: TrainJob, rt: ClusterTrainingRuntime | TrainingRuntime) -> Obj:
    return compile_objects(tj, rt)[f"JobSet/{tj.name}"]


def rjob(js: Obj, name: str) -> Obj:
    return next(r for r in js["spec"]["replicatedJobs"] if r["name"] == name)


def container(js: Obj, rjob_name: str, name: str = c.NODE, init: bool = False) -> Obj:
    pod = rjob(js, rjob_name)["template"]["spec"]["template"]["spec"]
    return next(x for x in pod["initContainers" if init else "containers"] if x["name"] == name)


def env(cont: Obj) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in cont.get("env", [])}


def env_names(cont: Obj) -> list[str]:
    return [e["name"] for e in cont.get("env", [])]


def optimizationjob(
    name: str = "tune",
    *,
    parameters: list[Obj] | None = None,
    trainer: Obj | None = None,
    runtime: str = "torch-distributed",
    **spec: Any,
) -> Obj:
    """An OptimizationJob over ``lr`` (log-uniform) and ``bs`` (categorical) with both placeholders used;
    ``spec`` keys (camelCase) replace the defaults."""
    body: Obj = {
        "objectives": [{"metric": "loss", "direction": "Minimize"}],
        "searchAlgorithm": {"random": {"seed": 7}},
        "parameters": parameters
        if parameters is not None
        else [
            {"name": "lr", "searchSpace": {"logUniform": {"min": "0.001", "max": "0.1"}}},
            {"name": "bs", "searchSpace": {"categorical": {"choices": ["16", "32", "64"]}}},
        ],
        "numTrials": 4,
        "parallelTrials": 2,
        "trainJobTemplate": {
            "spec": {
                "runtimeRef": {"name": runtime},
                "trainer": trainer
                if trainer is not None
                else {"command": ["python", "train.py", "--lr={{.lr}}", "--batch-size={{.bs}}"]},
            }
        },
    }
    body.update(spec)
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND_OPTIMIZATIONJOB,
        "metadata": {"name": name, "namespace": "default"},
        "spec": body,
    }
