"""The runtime state of one TrainJob under its supervisor: its jobs and pods, its events, and their persistence.

``JobState`` holds what the supervisor knows (the compiled plan, each job's and pod's state, the TrainJob status)
and writes it to the store as it changes, so ``get``/``describe`` from other processes see it live. The
supervisor (``kubetrain.local.supervisor.controller``) builds on it.
"""

from __future__ import annotations

import copy
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api import constants as C
from kubetrain.api import elastic
from kubetrain.api.errors import KubetrainError
from kubetrain.api.logtext import default_container
from kubetrain.local import config, paths
from kubetrain.local.images import choose
from kubetrain.local.images.pulls import Puller, Waiting, policy_of
from kubetrain.local.images.rootfs import ImageRoot
from kubetrain.local.images.store import ImageStore
from kubetrain.local.plan import JobPlan, Plan, PodPlan, build_plan, elastic_policy, find_jobset
from kubetrain.local.sandbox import pods
from kubetrain.local.sandbox.env import ObjectIndex
from kubetrain.local.sandbox.netns import NetworkNamespace, Outbound
from kubetrain.local.scheduling import gang
from kubetrain.local.scheduling.resources import Capacity, find_podgroup, pod_requests
from kubetrain.local.scheduling.scheduler import Owner, Scheduler
from kubetrain.local.statusendpoint.progress import ProgressKeeper
from kubetrain.local.store.db import PodRow, Store, StoreError
from kubetrain.local.supervisor.backoff import CrashLoopBackOff

if TYPE_CHECKING:
    from concurrent.futures import Future, ThreadPoolExecutor

    from kubetrain.local.statusendpoint.server import StatusServer

# Events are logged under the supervisor's name: they are its events.
log = logging.getLogger("kubetrain.local.supervisor")


@dataclass
class PodRun:
    plan: PodPlan
    state: str = "Pending"  # Pending | Running | Succeeded | Failed
    containers: list[pods.Container] = field(default_factory=list)
    init_left: list[dict[str, Any]] = field(default_factory=list)
    in_init: bool = False
    restarts: int = 0
    exit_code: int | None = None
    message: str | None = None
    gpus: list[int] | None = None
    ready: bool = False
    admitted: bool = False  # holds its resources in the local scheduler
    restart_at: float | None = None  # in restart back-off until then (time.monotonic())
    backoff: CrashLoopBackOff = field(default_factory=CrashLoopBackOff)

    @property
    def pid(self) -> int | None:
        live = [c.proc for c in self.containers if c.proc is not None]
        return live[0].pid if live else None


@dataclass
class JobRun:
    plan: JobPlan
    pods: list[PodRun]
    state: str = "Pending"  # Pending | Active | Complete | Failed
    failures: int = 0

    @property
    def ready(self) -> bool:
        n = sum(1 for p in self.pods if p.ready or p.state == "Succeeded")
        return self.state in ("Active", "Complete") and n >= min(self.plan.parallelism, self.plan.completions)


class JobState:
    """One TrainJob's plan, job and pod runs and status, persisted to the store as they change."""

    def __init__(self, store: Store, namespace: str, name: str) -> None:
        self.store = store
        self.namespace = namespace
        self.name = name
        row = store.get_trainjob(namespace, name)
        if row is None:
            raise KubetrainError(f"TrainJob {namespace}/{name} not found in the local store")
        self.row = row
        self.trainjob: dict[str, Any] = row.trainjob
        self.status: dict[str, Any] = copy.deepcopy(self.trainjob.get("status") or {})
        self.dir = paths.trainjob_dir(namespace, name, row.uid)
        self.restarts = row.restarts
        self.jobs: list[JobRun] = []
        self._terminate: str | None = None
        self._force = False
        self._dirty: set[str] = set()
        self.netns: NetworkNamespace | None = None
        self._outbound: Outbound | None = None
        self.status_server: StatusServer | None = None
        self.progress = ProgressKeeper(store, namespace, name, row.uid, row.trainjob)
        self._exec_probes: ThreadPoolExecutor | None = None
        self._probes: dict[tuple[str, str], Future[bool]] = {}
        self._started_at = time.time()
        self._last_reload = 0.0
        self._pod_dirs: dict[str, tuple[Path, dict[str, Path]]] = {}  # pod -> (scratch dir, volume dirs)
        settings = config.load()
        self.autoscaling = settings.autoscaling
        self.stored_trainer_status: dict[str, Any] | None = None  # as last read from the store (other writers)
        self.capacity = Capacity.of_machine(settings.capacity, str(paths.home()))
        self.scheduler = Scheduler(store, self.capacity, Owner(namespace, name, row.uid))
        self._admitted_stages: set[int] = set()
        self._gangs_checked = False
        self.overcommit = os.environ.get(gang.OVERCOMMIT_ENV) == "1"
        self._next_admission = 0.0
        self._queued: tuple[str, str] | None = None  # (reason, message) while pods wait for resources
        self.exec_failure: int | None = None  # 127/126 when a container's command could not be executed
        self._events: list[tuple[str, str, str]] = []
        self._store_error: str | None = None
        self.ctx = pods.PodContext(
            namespace=namespace,
            uid=row.uid,
            network=None,  # set once the network namespace exists
            rootless=os.geteuid() != 0,
            hosts_file=str(self.dir / "hosts"),
            workdir=row.workdir,
            index=ObjectIndex([], namespace),
            mpi=False,
            rsh_port=2222,
        )
        self.image_store = ImageStore()
        self.puller = Puller(self.image_store, self._image_event)
        self._choices: dict[str | None, choose.Choice] = {}
        self.image_roots: dict[tuple[str, str], ImageRoot] = {}  # (pod, container) -> the image it runs in
        self._held: dict[str, int] = {}  # image id -> a shared lock that keeps `images prune` off it
        self._load_objects(row.objects)
        self._latest_objects = row.objects  # as last read from the store (they change only while suspended)
        self._reset_jobs()

    # Setup.
    def _load_objects(self, objects: list[dict[str, Any]], addresses: dict[str, str] | None = None) -> None:
        """The compiled objects this supervisor runs (again after a resume, when runtimePatches changed, or when
        an elastic TrainJob's node count changed: ``addresses`` then keeps the running pods' addresses)."""
        self.objects = objects
        self.plan: Plan = build_plan(find_jobset(objects), addresses)
        self.elastic_policy = elastic_policy(objects)
        self.podgroup = find_podgroup(objects)
        self.requests = {p.short: pod_requests(p.spec) for p in self.plan.pods()}
        self.stages = gang.stages(self.plan, self.requests, one_gang=self.podgroup is not None)
        self.stage_of = {rjob: s for s in self.stages for rjob in s.rjobs}
        self.refresh_index()
        self.ctx.mpi = self._is_mpi(objects)
        self.ctx.rsh_port = self._rsh_port()

    def refresh_index(self) -> None:
        """Read the ConfigMaps, Secrets and claims applied in the namespace again: a pod (re)started now sees them
        as they are now, as a kubelet reads them when it creates a container."""
        try:
            applied = [
                o
                for o in self.store.list_objects(("ConfigMap", "Secret", "PersistentVolumeClaim"))
                if (o.get("metadata") or {}).get("namespace", "default") == self.namespace
            ]
        except StoreError as exc:
            self._store_trouble(exc)
            return  # the objects as last read
        self.index = ObjectIndex(applied + self.objects, self.namespace)
        self.ctx.index = self.index

    @staticmethod
    def _is_mpi(objects: list[dict[str, Any]]) -> bool:
        return any(
            o.get("kind") == "ConfigMap" and o["metadata"]["name"].endswith("-mpi-hostfile") for o in objects
        )

    def _rsh_port(self) -> int:
        for p in self.plan.pods():
            for c in p.spec.get("containers") or []:
                tcp = (c.get("readinessProbe") or {}).get("tcpSocket")
                if tcp and str(tcp.get("port", "")).isdigit():
                    return int(tcp["port"])
        return 2222

    @staticmethod
    def _close_pidfds_of(containers: list[pods.Container]) -> None:
        for c in containers:
            if c.pidfd is not None:
                os.close(c.pidfd)
                c.pidfd = None

    def _reset_jobs(self) -> None:
        for j in self.jobs:
            for p in j.pods:
                self._close_pidfds_of(p.containers)
        self.jobs = [JobRun(plan=j, pods=[PodRun(plan=p) for p in j.pods]) for j in self.plan.jobs()]
        self._admitted_stages = set()  # new pods: each stage is admitted again, as a whole
        for j in self.jobs:
            for p in j.pods:
                self._dirty.add(p.plan.name)

    def terminate(self, reason: str) -> None:
        """Ask the loop to stop every process (each pod gets its grace period) and record the TrainJob as Failed;
        asking again cuts the grace periods short. Safe from signal handlers."""
        if self._terminate is not None:
            self._force = True
        self._terminate = reason

    def forced(self) -> bool:
        return self._force

    # Events and persistence.
    def event(self, type_: str, reason: str, message: str) -> None:
        log.info(
            "event trainjob=%s/%s type=%s reason=%s message=%r",
            self.namespace,
            self.name,
            type_,
            reason,
            message,
        )
        self._events.append((type_, reason, message))
        self._flush_events()

    def _flush_events(self) -> None:
        # Kept in memory while the store cannot be written (disk full), and written once it can again.
        while self._events:
            try:
                self.store.add_event(self.namespace, self.name, *self._events[0])
            except StoreError as exc:
                self._store_trouble(exc)
                return
            self._events.pop(0)

    def unrecorded(self) -> str | None:
        """Why the TrainJob's latest status is not in the store (e.g. a full disk), or None when it is."""
        if self.status == (self.trainjob.get("status") or {}):
            return None
        return self._store_error or "the state database could not be written"

    def _store_trouble(self, exc: StoreError) -> None:
        if self._store_error != str(exc):
            self._store_error = str(exc)
            log.warning(
                "store write failed trainjob=%s/%s (pods keep running; retrying) error=%r",
                self.namespace,
                self.name,
                str(exc),
            )

    def _persist_pods(self) -> None:
        rows = []
        for j in self.jobs:
            for p in j.pods:
                if p.plan.name not in self._dirty:
                    continue
                pid = p.pid
                rows.append(
                    PodRow(
                        namespace=self.namespace,
                        trainjob=self.name,
                        name=p.plan.short,
                        rjob=p.plan.rjob,
                        state=p.state,
                        pid=pid,
                        pid_start=pods.proc_start_time(pid) if pid else None,
                        exit_code=p.exit_code,
                        restarts=p.restarts,
                        message=p.message,
                        log=str(self.log_path(p.plan)),
                        ready=p.ready,
                    )
                )
        try:
            self.store.put_pods(rows)
        except StoreError as exc:
            self._store_trouble(exc)
            return
        self._dirty.clear()

    def _persist_status(self) -> None:
        self._update_jobs_status()
        if self.status != (self.trainjob.get("status") or {}):
            try:
                self.store.set_status(self.namespace, self.name, self.row.uid, copy.deepcopy(self.status))
            except StoreError as exc:
                self._store_trouble(exc)
                return
            self.trainjob["status"] = copy.deepcopy(self.status)
        self._flush_events()

    def _write_hosts(self) -> None:
        """The ``/etc/hosts`` every pod sees (bound into each sandbox: rewriting it in place reaches running pods)."""
        (self.dir / "hosts").write_text(self.plan.hosts_file())

    def image_choices(self) -> list[choose.Choice]:
        """What each image of the TrainJob's containers stands for here (``images.choose``), decided once."""
        for p in self.plan.pods():
            for c in [*(p.spec.get("initContainers") or []), *(p.spec.get("containers") or [])]:
                image = c.get("image")
                if image not in self._choices:
                    self._choices[image] = choose.choose(image, self.image_store, mpi=self.ctx.mpi)
        return list(self._choices.values())

    def environments(self) -> str:
        """What the pods run in, per image: the run banner's and the LocalImages event's words."""
        return choose.summary(self.image_choices())

    def pod_images(self, pod: PodRun) -> Waiting | None:
        """Find (or start making present) the image of each container of ``pod`` that runs in its image, into
        ``image_roots``; None when all are there, else why the pod waits."""
        self.image_choices()
        for c in [*(pod.plan.spec.get("initContainers") or []), *(pod.plan.spec.get("containers") or [])]:
            key = (pod.plan.name, c.get("name", ""))
            choice = self._choices[c.get("image")]
            if not choice.in_image:
                self.image_roots.pop(key, None)
                continue
            got = self.puller.get(str(choice.image), policy_of(c), in_podman=choice.in_podman)
            if isinstance(got, Waiting):
                return got
            if got.id not in self._held:
                self._held[got.id] = self.image_store.hold(got)
            self.image_roots[key] = ImageRoot(got)
        return None

    def _image_event(self, type_: str, reason: str, message: str) -> None:
        self.event(type_, reason, message)

    def release_images(self) -> None:
        for fd in self._held.values():
            os.close(fd)
        self._held.clear()

    def log_path(self, pod: PodPlan, container: str | None = None) -> Path:
        """The log of the pod's default container (``kubetrain logs`` without ``-c``, progress from logs), or of
        ``container``: each container of a pod writes its own file, as each has its own log on a node."""
        default = default_container(pod.spec, pod.annotations, pod.rjob)
        return paths.container_log(self.dir / "logs" / f"{pod.short}.log", container, default)

    def _update_jobs_status(self) -> None:
        suspended = any(
            c["type"] == C.COND_SUSPENDED and c["status"] == "True"
            for c in self.status.get("conditions") or []
        )
        out = []
        for rj in self.plan.rjobs:
            runs = [j for j in self.jobs if j.plan.rjob == rj.name]
            out.append(
                {
                    "name": rj.name,
                    "ready": sum(1 for j in runs if j.state == "Active" and j.ready),
                    "succeeded": sum(1 for j in runs if j.state == "Complete"),
                    "failed": sum(1 for j in runs if j.state == "Failed"),
                    "active": sum(
                        1 for j in runs if j.state == "Active" and any(p.state == "Running" for p in j.pods)
                    ),
                    "suspended": len(runs) if suspended else 0,
                }
            )
        self.status["jobsStatus"] = out
        if self.elastic_policy is not None:
            # What the scale subresource reads on a cluster: the trainer nodes and the selector of their pods.
            count, selector = elastic.node_count(self.plan.jobset), elastic.pod_selector(self.plan.jobset)
            if count is not None and selector is not None:
                self.status["numNodes"], self.status["selector"] = count, selector
