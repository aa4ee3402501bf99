"""The one intermediate model plugins work on: ``Info`` with one ``PodSet`` per replicated job.

``build_info`` merges the TrainJob's overrides into a working copy of the runtime's JobSet template; plugins
then mutate that copy through the pod sets (each pod set points into it), and only the JobSet plugin turns it
into an object.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.runtime import AnyRuntime, MLPolicy, PodGroupPolicy
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler.merge import strategic_merge
from kubetrain.compiler.quantity import Quantity, QuantityError, sum_requests

Obj = dict[str, Any]


@dataclass
class PodSet:
    """One replicated job: its pod count per replica and a live handle on its pod spec."""

    name: str
    ancestor: str | None
    count: int
    replicated_job: Obj  # the replicatedJobs[i] dict of the working JobSet spec
    endpoints: list[str] = field(default_factory=list)

    @property
    def replicas(self) -> int:
        r = self.replicated_job.get("replicas")
        return 1 if r is None else int(r)

    @property
    def pod_spec(self) -> Obj:
        job = self.replicated_job.setdefault("template", {}).setdefault("spec", {})
        return job.setdefault("template", {}).setdefault("spec", {})  # type: ignore[no-any-return]

    def containers(self) -> list[Obj]:
        return self.pod_spec.setdefault("containers", [])  # type: ignore[no-any-return]

    def init_containers(self) -> list[Obj]:
        return self.pod_spec.setdefault("initContainers", [])  # type: ignore[no-any-return]

    def container(self, name: str) -> Obj | None:
        """A regular container by name."""
        return next((x for x in self.pod_spec.get("containers") or [] if x.get("name") == name), None)

    def any_container(self, name: str) -> Obj | None:
        """Regular containers first, then init containers (upstream's lookup order)."""
        found = self.container(name)
        if found is None:
            found = next((x for x in self.pod_spec.get("initContainers") or [] if x.get("name") == name), None)
        return found

    def volumes(self) -> list[Obj]:
        return self.pod_spec.setdefault("volumes", [])  # type: ignore[no-any-return]

    def single_pod_requests(self) -> dict[str, Quantity]:
        """Pod requests as the scheduler computes them: max(sum of containers, largest init container)."""
        return pod_requests(self.pod_spec)


@dataclass
class Info:
    trainjob: TrainJob
    runtime: AnyRuntime
    labels: dict[str, str]
    annotations: dict[str, str]
    jobset_spec: Obj
    pod_sets: list[PodSet]
    ml_policy: MLPolicy | None
    pod_group_policy: PodGroupPolicy | None
    pod_labels: dict[str, str] = field(default_factory=dict)
    pod_annotations: dict[str, str] = field(default_factory=dict)
    trainer_command: list[str] | None = None  # set by plugins that derive the command (torchtune, Flux)
    trainer_args_dropped: bool = False  # set by plugins that fold the TrainJob's args into that command (Flux)

    @property
    def name(self) -> str:
        return self.trainjob.name

    @property
    def namespace(self) -> str:
        return self.trainjob.namespace

    def trainer(self) -> PodSet | None:
        return self.by_ancestor(c.ANCESTOR_TRAINER)

    def by_ancestor(self, ancestor: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.ancestor == ancestor), None)

    def by_name(self, name: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.name == name), None)

    def master_host(self) -> str:
        """Upstream hard-codes rjob ``node`` and the TrainJob name as subdomain for coordinator addresses."""
        return f"{self.name}-{c.NODE}-0-0.{self.name}"

    @property
    def subdomain(self) -> str:
        """The pods' subdomain: the JobSet's headless service (``network.subdomain``, else the JobSet's name)."""
        return str((self.jobset_spec.get("network") or {}).get("subdomain") or self.name)

    def pod_hostnames(self, ps: PodSet, replicas: int | None = None) -> list[str]:
        """The DNS names JobSet gives the pod set's pods (``<jobset>-<rjob>-<replica>-<index>.<subdomain>``), for
        ``replicas`` replicas (default: the replicated job's) of ``ps.count`` pods each."""
        n = ps.replicas if replicas is None else replicas
        return [f"{self.name}-{ps.name}-{r}-{p}.{self.subdomain}" for r in range(n) for p in range(ps.count)]

    def effective_resources(self) -> Obj:
        """Resources the ML plugins size processes by: the TrainJob's as given, else the trainer container's."""
        trainer = self.trainjob.spec.trainer
        if trainer is not None and trainer.resources_per_node is not None:
            return trainer.resources_per_node.to_wire()
        for ps in self.pod_sets:
            if ps.name == c.NODE or ps.ancestor == c.ANCESTOR_TRAINER:
                node = ps.container(c.NODE)
                return dict((node or {}).get("resources") or {})
        return {}

    def gpu_count(self) -> int:
        return gpu_count(self.effective_resources())


def _first_count(resources: Obj, matches: Callable[[str], bool]) -> int:
    """The first non-zero matching quantity, requests before limits, rounded up; 0 when there is none."""
    for section in ("requests", "limits"):
        for key, raw in (resources.get(section) or {}).items():
            if matches(key):
                try:
                    n = Quantity.parse(raw).ceil()
                except QuantityError:
                    n = 0
                if n:
                    return n
    return 0


def gpu_count(resources: Obj) -> int:
    """The first resource whose name contains ``gpu``: its request, else its limit."""
    return _first_count(resources, lambda key: "gpu" in key.lower())


def cpu_count(resources: Obj) -> int:
    """CPU request if non-zero, else limit, rounded up (``2500m`` -> 3); 0 when neither is set."""
    return _first_count(resources, lambda key: key == "cpu")


def pod_requests(pod_spec: Obj) -> dict[str, Quantity]:
    def requests_of(container: Obj) -> dict[str, Quantity]:
        res = container.get("resources") or {}
        # A limit without a request defaults the request to the limit, as the API server does.
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        out: dict[str, Quantity] = {}
        for k, v in merged.items():
            try:
                out[k] = Quantity.parse(v)
            except QuantityError:
                continue
        return out

    total = sum_requests([requests_of(x) for x in pod_spec.get("containers") or []])
    sidecars: dict[str, Quantity] = {}
    for init in pod_spec.get("initContainers") or []:
        req = requests_of(init)
        if init.get("restartPolicy") == "Always":
            sidecars = sum_requests([sidecars, req])
            total = sum_requests([total, req])
            continue
        with_sidecars = sum_requests([sidecars, req])
        for k, q in with_sidecars.items():
            if k not in total or q.value > total[k].value:
                total[k] = q
    for k, v in (pod_spec.get("overhead") or {}).items():
        try:
            total = sum_requests([total, {k: Quantity.parse(v)}])
        except QuantityError:
            continue
    return total


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def build_info(trainjob: TrainJob, runtime: AnyRuntime) -> Info:
    """Metadata, overrides and patches merged; one pod set per replicated job with its count."""
    template = runtime.spec.template
    spec: Obj = template.spec.to_wire()
    spec.setdefault("replicatedJobs", [])
    meta = template.metadata.to_wire() if template.metadata else {}
    labels: dict[str, str] = dict(meta.get("labels") or {})
    annotations: dict[str, str] = dict(meta.get("annotations") or {})
    tj = trainjob.spec
    # Beyond upstream: a TrainJob labelled for Kueue queues through Kueue's JobSet integration, which reads the
    # labels on the JobSet (a Kueue with a TrainJob integration reads them on the TrainJob and skips owned JobSets).
    own = trainjob.metadata.labels or {}
    labels.update({k: own[k] for k in c.KUEUE_JOB_LABELS if k in own})
    labels.update(tj.labels or {})
    annotations.update(tj.annotations or {})

    for patch in tj.runtime_patches or []:
        tmpl = patch.training_runtime_spec.template if patch.training_runtime_spec else None
        if tmpl is None:
            continue
        if tmpl.metadata is not None:
            labels.update(tmpl.metadata.labels or {})
            annotations.update(tmpl.metadata.annotations or {})
        if tmpl.spec is not None:
            order = [rj.get("name") for rj in spec["replicatedJobs"]]
            spec = strategic_merge(spec, tmpl.spec.to_wire())
            # Upstream re-sorts replicated jobs into the runtime's order after a patch.
            spec["replicatedJobs"].sort(key=lambda rj: order.index(rj["name"]) if rj["name"] in order else 1 << 30)

    for override in tj.pod_template_overrides or []:
        patch_obj: Obj = {}
        if override.metadata is not None:
            patch_obj["metadata"] = override.metadata.to_wire()
        if override.spec is not None:
            patch_obj["spec"] = copy.deepcopy(override.spec)
        targets = {t.name for t in override.target_jobs}
        for rj in spec["replicatedJobs"]:
            if rj.get("name") in targets:
                job = rj.setdefault("template", {}).setdefault("spec", {})
                job["template"] = strategic_merge(job.get("template") or {}, patch_obj)

    # A null field is an absent one to the API server (``env: null`` in a runtime); the plugins write into these
    # objects, so after the merges (where null means "delete") none is left.
    spec = _without_nulls(spec)
    ml = runtime.spec.ml_policy
    pod_sets: list[PodSet] = []
    for rj in spec["replicatedJobs"]:
        rj_labels = ((rj.get("template") or {}).get("metadata") or {}).get("labels") or {}
        ancestor = rj_labels.get(c.LABEL_ANCESTOR)
        parallelism = ((rj.get("template") or {}).get("spec") or {}).get("parallelism")
        count = 1 if parallelism is None else int(parallelism)
        if ancestor == c.ANCESTOR_TRAINER and ml is not None:
            count = ml.num_nodes if ml.num_nodes is not None else 1
        pod_sets.append(PodSet(name=rj["name"], ancestor=ancestor, count=max(count, 1), replicated_job=rj))

    info = Info(
        trainjob=trainjob,
        runtime=runtime,
        labels=labels,
        annotations=annotations,
        jobset_spec=spec,
        pod_sets=pod_sets,
        ml_policy=ml,
        pod_group_policy=runtime.spec.pod_group_policy,
    )
    _merge_resources(info)
    return info


def _merge_resources(info: Info) -> None:
    trainer = info.trainjob.spec.trainer
    if trainer is None or trainer.resources_per_node is None:
        return
    patch = trainer.resources_per_node.to_wire()
    launcher_as_node = bool(info.ml_policy and info.ml_policy.mpi and info.ml_policy.mpi.run_launcher_as_node)
    for ps in info.pod_sets:
        # Upstream merges only when an mlPolicy is set; a plain runtime deserves the same (compatibility.md).
        targeted = ps.ancestor == c.ANCESTOR_TRAINER or (
            launcher_as_node and ps.name == c.NODE
        )
        node = ps.container(c.NODE) if targeted else None
        if node is not None:
            node["resources"] = strategic_merge(node.get("resources") or {}, patch)
