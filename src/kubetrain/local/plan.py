"""The compiled JobSet, unrolled into the pods the JobSet and Job controllers would create.

Replicated job × replica → one Job; each Job has ``completions`` pods with Indexed-completion semantics. Names and
hostnames follow the JobSet convention ``<jobset>-<rjob>-<replica>-<index>.<subdomain>``, and every pod gets its
own address (``10.250.x.y``) on the TrainJob's pod network, as a pod gets one from its node's pod CIDR.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.constants import ANNOTATION_COMPLETION_INDEX, LABEL_JOBSET_NAME
from kubetrain.api.errors import KubetrainError

LABEL_RJOB: str = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOB_INDEX: str = "jobset.sigs.k8s.io/job-index"
LABEL_RESTART_ATTEMPT: str = "jobset.sigs.k8s.io/restart-attempt"
LABEL_RJOB_REPLICAS: str = "jobset.sigs.k8s.io/replicatedjob-replicas"
LABEL_JOB_NAME: str = "batch.kubernetes.io/job-name"
SNAPSHOT_SUFFIX: str = "-runtime-snapshot"


class PlanError(KubetrainError):
    pass


@dataclass
class PodPlan:
    name: str  # <jobset>-<rjob>-<r>-<p>, also the hostname
    short: str  # <rjob>-<r>-<p>: what `describe` and `logs --step` show
    rjob: str
    replica: int
    index: int
    subdomain: str
    address: str
    spec: dict[str, Any]
    labels: dict[str, str]
    annotations: dict[str, str]

    @property
    def fqdn(self) -> str:
        return f"{self.name}.{self.subdomain}"

    @property
    def prefix(self) -> str:
        """The ``[step/rank]`` log prefix."""
        return f"{self.rjob}-{self.replica}/{self.index}"

    def meta(self, namespace: str, uid: str, restart_attempt: int) -> dict[str, Any]:
        labels = dict(self.labels)
        labels[LABEL_RESTART_ATTEMPT] = str(restart_attempt)
        return {
            "name": self.name,
            "namespace": namespace,
            "uid": uid,
            "labels": labels,
            "annotations": dict(self.annotations),
        }


@dataclass
class JobPlan:
    rjob: str
    replica: int
    parallelism: int
    completions: int
    backoff_limit: int
    restart_policy: str
    pods: list[PodPlan] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.rjob}-{self.replica}"


@dataclass
class RJobPlan:
    name: str
    replicas: int
    depends_on: list[tuple[str, str]]
    jobs: list[JobPlan] = field(default_factory=list)


@dataclass
class Plan:
    jobset: dict[str, Any]
    rjobs: list[RJobPlan]

    @property
    def name(self) -> str:
        return str(self.jobset["metadata"]["name"])

    @property
    def spec(self) -> dict[str, Any]:
        return dict(self.jobset.get("spec") or {})

    def pods(self) -> list[PodPlan]:
        return [p for r in self.rjobs for j in r.jobs for p in j.pods]

    def jobs(self) -> list[JobPlan]:
        return [j for r in self.rjobs for j in r.jobs]

    def hosts_file(self) -> str:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        ns = (self.jobset.get("metadata") or {}).get("namespace", "default")
        for p in self.pods():
            lines.append(f"{p.address}\t{p.fqdn} {p.fqdn}.{ns}.svc.cluster.local {p.name}")
        return "\n".join(lines) + "\n"


GATEWAY = "10.250.0.1"
"""The TrainJob's side of its pod network (the bridge every pod's ``eth0`` is attached to): the pods' default
route, their ``status.hostIP``, and where the local status endpoint listens. The network namespace holder
(``sandbox/_nsholder.py``, a stdlib-only script) carries the same constant."""


def address(n: int) -> str:
    """The n-th pod's address on the TrainJob's pod network (10.250.0.0/16, private to the TrainJob)."""
    return f"10.250.{n // 250}.{n % 250 + 2}"


def elastic_policy(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``mlPolicy.torch.elasticPolicy`` of the runtime snapshot among the compiled objects, if the runtime has one."""
    for o in objects:
        if o.get("kind") == "ConfigMap" and (o.get("metadata") or {}).get("name", "").endswith(SNAPSHOT_SUFFIX):
            text = (o.get("data") or {}).get("runtime") or ""
            if "elasticPolicy" not in text:
                return None  # most runtimes: no need to load a YAML parser to learn that
            import yaml

            try:
                runtime = yaml.safe_load(text) or {}
            except yaml.YAMLError:
                return None
            torch = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("torch") or {}
            policy = torch.get("elasticPolicy")
            return dict(policy) if isinstance(policy, dict) else None
    return None


def find_jobset(objects: list[dict[str, Any]]) -> dict[str, Any]:
    for o in objects:
        if o.get("kind") == "JobSet":
            return o
    raise PlanError("the compiled objects contain no JobSet (expected kind JobSet, jobset.x-k8s.io/v1alpha2)")


def build_plan(jobset: dict[str, Any], addresses: dict[str, str] | None = None) -> Plan:
    """``addresses``: pods that already run keep theirs (a scaled TrainJob's other pods must not move)."""
    plan = _build_plan(jobset)
    if addresses:
        taken = set(addresses.values())
        free = (a for a in map(address, range(len(taken) + len(plan.pods()) + 1)) if a not in taken)
        for p in plan.pods():
            p.address = addresses.get(p.name) or next(free)
    return plan


def _build_plan(jobset: dict[str, Any]) -> Plan:
    meta = jobset.get("metadata") or {}
    js_name = meta.get("name")
    if not js_name:
        raise PlanError("JobSet metadata.name is empty")
    spec = jobset.get("spec") or {}
    subdomain = (spec.get("network") or {}).get("subdomain") or js_name
    rjobs: list[RJobPlan] = []
    n = 0
    for i, rj in enumerate(spec.get("replicatedJobs") or []):
        where = f"spec.replicatedJobs[{i}]"
        replicas = int(rj.get("replicas", 1))
        jspec = (rj.get("template") or {}).get("spec") or {}
        completions = jspec.get("completions")
        parallelism = jspec.get("parallelism")
        completions = int(completions if completions is not None else (parallelism or 1))
        parallelism = int(parallelism if parallelism is not None else completions)
        mode = jspec.get("completionMode", "Indexed")
        if mode != "Indexed":
            raise PlanError(
                f"{where}.template.spec.completionMode: only Indexed is supported locally, got {mode!r}"
            )
        ptemplate = copy.deepcopy(jspec.get("template") or {})
        pspec = ptemplate.get("spec") or {}
        if not pspec.get("containers"):
            raise PlanError(
                f"{where}.template.spec.template.spec.containers: at least one container is required"
            )
        # JobSet's webhook defaults an unset restartPolicy to OnFailure; the Job default backoffLimit is 6.
        restart_policy = pspec.get("restartPolicy") or "OnFailure"
        backoff = jspec.get("backoffLimit")
        rplan = RJobPlan(
            name=rj["name"],
            replicas=replicas,
            depends_on=[(d["name"], d["status"]) for d in rj.get("dependsOn") or []],
        )
        pmeta = ptemplate.get("metadata") or {}
        for r in range(replicas):
            job = JobPlan(
                rjob=rj["name"],
                replica=r,
                parallelism=parallelism,
                completions=completions,
                backoff_limit=6 if backoff is None else int(backoff),
                restart_policy=restart_policy,
            )
            for p in range(completions):
                name = f"{js_name}-{rj['name']}-{r}-{p}"
                labels = dict(pmeta.get("labels") or {})
                labels.update(
                    {
                        LABEL_JOBSET_NAME: js_name,
                        LABEL_RJOB: rj["name"],
                        LABEL_JOB_INDEX: str(r),
                        LABEL_RJOB_REPLICAS: str(replicas),
                        LABEL_JOB_NAME: f"{js_name}-{rj['name']}-{r}",
                        ANNOTATION_COMPLETION_INDEX: str(p),
                    }
                )
                annotations = dict(pmeta.get("annotations") or {})
                annotations.update(
                    {
                        ANNOTATION_COMPLETION_INDEX: str(p),
                        LABEL_JOBSET_NAME: js_name,
                        LABEL_RJOB: rj["name"],
                        LABEL_JOB_INDEX: str(r),
                    }
                )
                job.pods.append(
                    PodPlan(
                        name=name,
                        short=f"{rj['name']}-{r}-{p}",
                        rjob=rj["name"],
                        replica=r,
                        index=p,
                        subdomain=subdomain,
                        address=address(n),
                        spec=pspec,
                        labels=labels,
                        annotations=annotations,
                    )
                )
                n += 1
            rplan.jobs.append(job)
        rjobs.append(rplan)
    names = {rp.name for rp in rjobs}
    for rp in rjobs:
        for dep, _ in rp.depends_on:
            if dep not in names:
                raise PlanError(f"replicatedJob {rp.name!r} dependsOn {dep!r}, which is not a replicatedJob")
    return Plan(jobset=jobset, rjobs=rjobs)
