"""The local JobSet + Job controller: runs one compiled TrainJob's pods on this machine until it finishes.

One supervisor per TrainJob (a thread of ``kubetrain run``, or a detached process started by ``apply``). All state
it owns is written to the store as it changes, so ``get``/``describe`` from other processes see it live and a
killed supervisor can be reconciled by the next command (``kubetrain.local.reaper``).
"""

from __future__ import annotations

import argparse
import copy
import logging
import os
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.api import KubetrainError
from kubetrain.api import constants as C
from kubetrain.local import gang, namespaces, paths, pods, status
from kubetrain.local.env import ObjectIndex
from kubetrain.local.plan import JobPlan, Plan, PodPlan, build_plan, find_jobset
from kubetrain.local.store import PodRow, Store
from kubetrain.local.volumes import claim_template_names, pod_volumes

log = logging.getLogger("kubetrain.local.supervisor")

TICK = 0.05
PROBE_RETRY = 0.2
STOP_GRACE = 5.0


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


class Supervisor:
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
        self.plan: Plan = build_plan(find_jobset(row.objects))
        self.netns = namespaces.netns_name(namespace, name, row.uid)
        self.restarts = row.restarts
        self.jobs: list[JobRun] = []
        self._terminate: str | None = None
        self._dirty: set[str] = set()
        self._prober: ThreadPoolExecutor | None = None
        self._probes: dict[tuple[str, str], Future[bool]] = {}
        self._gpu_free: list[int] = list(range(gang.gpu_count()))
        self._started_at = time.time()
        self._admitted = False
        self._gang_wait_since: float | None = None
        self._last_reload = 0.0
        self._outbound: namespaces.Outbound | None = None
        self._pod_dirs: dict[str, tuple[Path, dict[str, Path]]] = {}  # pod -> (scratch dir, volume dirs)
        applied = [
            o
            for o in store.list_objects(("ConfigMap", "Secret"))
            if (o.get("metadata") or {}).get("namespace", "default") == namespace
        ]
        self.index = ObjectIndex(applied + row.objects)
        self.ctx = pods.PodContext(
            namespace=namespace,
            uid=row.uid,
            netns=self.netns,
            hosts_file=str(self.dir / "hosts"),
            workdir=row.workdir,
            index=self.index,
            mpi=self._is_mpi(row.objects),
            rsh_port=self._rsh_port(),
        )
        self._reset_jobs()

    # Setup.
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

    def _reset_jobs(self) -> None:
        self.jobs = [JobRun(plan=j, pods=[PodRun(plan=p) for p in j.pods]) for j in self.plan.jobs()]
        for j in self.jobs:
            for p in j.pods:
                self._dirty.add(p.plan.name)

    def terminate(self, reason: str) -> None:
        """Ask the loop to stop every process and record the TrainJob as Failed (safe from signal handlers)."""
        self._terminate = reason

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
        self.store.add_event(self.namespace, self.name, type_, reason, message)

    def _persist_pods(self) -> None:
        for j in self.jobs:
            for p in j.pods:
                if p.plan.name not in self._dirty:
                    continue
                pid = p.pid
                self.store.put_pod(
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
                    )
                )
        self._dirty.clear()

    def _persist_status(self) -> None:
        self._update_jobs_status()
        if self.status != (self.trainjob.get("status") or {}):
            self.trainjob["status"] = copy.deepcopy(self.status)
            self.store.update_trainjob(self.namespace, self.name, self.trainjob)

    def log_path(self, pod: PodPlan) -> Path:
        return self.dir / "logs" / f"{pod.short}.log"

    # Main loop.
    def run(self) -> dict[str, Any]:
        """Returns the final TrainJob status."""
        namespaces.check_available()
        self.dir.mkdir(parents=True, exist_ok=True)
        log.info(
            "supervisor start trainjob=%s/%s pid=%d netns=%s",
            self.namespace,
            self.name,
            os.getpid(),
            self.netns,
        )
        try:
            # Inside the try: whatever part of the setup fails, the finally below undoes the rest.
            (self.dir / "hosts").write_text(self.plan.hosts_file())
            namespaces.create_netns(self.netns)
            self._outbound = namespaces.start_outbound(self.netns)
            if self._outbound is not None:
                (self.dir / "resolv.conf").write_text(f"nameserver {namespaces.SLIRP_DNS}\n")
                self.ctx.resolv_conf = str(self.dir / "resolv.conf")
            self._prober = ThreadPoolExecutor(
                max_workers=2,
                initializer=namespaces.enter_netns_thread,
                initargs=(self.netns,),
                thread_name_prefix="probe",
            )
            self._preflight()
            if self._outbound is None:
                self.event(
                    "Warning",
                    "NoOutboundNetwork",
                    (
                        "slirp4netns is not installed: pods reach each other but not the host's network or the "
                        "internet (install it with `make system-deps` for downloads such as dataset initializers)"
                    ),
                )
            self.event(
                "Normal",
                "LocalImages",
                (
                    f"images are not pulled locally; pods run in the Python environment {pods.image_env_prefix(None)} "
                    f"(map images to environments in {paths.home() / 'images.yaml'})"
                ),
            )
            while not status.finished(self.status):
                self._tick()
                self._persist_pods()
                self._persist_status()
                time.sleep(TICK)
        except KubetrainError as exc:
            status.fail(self.status, status.REASON_START_FAILED, str(exc))
            self.event("Warning", status.REASON_START_FAILED, str(exc))
        finally:
            self._stop_all()
            self._persist_pods()
            self._persist_status()
            if self._prober is not None:
                self._prober.shutdown(wait=False, cancel_futures=True)
            if self._outbound is not None:
                self._outbound.stop()
            namespaces.delete_netns(self.netns)
            self.store.set_supervisor(self.namespace, self.name, None, None)
            log.info(
                "supervisor exit trainjob=%s/%s state=%s",
                self.namespace,
                self.name,
                status.state_of(self.status),
            )
        return self.status

    def _preflight(self) -> None:
        if gang.gpu_count() == 0:
            for p in self.plan.pods():
                for c in p.spec.get("containers") or []:
                    for e in c.get("env") or []:
                        if e.get("name") == C.PET_NPROC_PER_NODE and e.get("value") == "gpu":
                            raise KubetrainError(
                                "spec.trainer.numProcPerNode: 'gpu' needs GPUs, and this machine has none "
                                "(nvidia-smi finds no GPU); use 'cpu', 'auto' or a number of processes"
                            )

    def _tick(self) -> None:
        if self._terminate:
            self._stop_all()
            msg = f"the local supervisor was stopped ({self._terminate}); every process of the TrainJob was stopped"
            status.fail(self.status, status.REASON_TERMINATED, msg)
            self.event("Warning", status.REASON_TERMINATED, msg)
            return
        now = time.time()
        if now - self._last_reload > 0.3:
            self._last_reload = now
            row = self.store.get_trainjob(self.namespace, self.name)
            if row is None:
                self.terminate("TrainJob deleted")
                return
            self.trainjob["spec"] = row.trainjob["spec"]
        spec = self.trainjob["spec"]
        if self._handle_suspend(bool(spec.get("suspend"))):
            return
        if self._deadline_exceeded(spec.get("activeDeadlineSeconds")):
            return
        if not self._admit():
            return
        self._start_ready_jobs()
        self._poll()
        self._probe()
        self._evaluate()

    def _handle_suspend(self, suspend: bool) -> bool:
        cond = next((c for c in self.status.get("conditions") or [] if c["type"] == C.COND_SUSPENDED), None)
        if suspend:
            if cond is None or cond["status"] != "True":
                self._stop_all()
                self._reset_jobs()
                status.set_condition(
                    self.status, C.COND_SUSPENDED, "True", C.REASON_SUSPENDED, C.MSG_SUSPENDED
                )
                self.event("Normal", C.REASON_SUSPENDED, C.MSG_SUSPENDED)
            return True
        if cond is not None and cond["status"] == "True":
            status.set_condition(self.status, C.COND_SUSPENDED, "False", C.REASON_RESUMED, C.MSG_RESUMED)
            self.event("Normal", C.REASON_RESUMED, C.MSG_RESUMED)
            self._started_at = time.time()
            self._admitted = False
        return False

    def _deadline_exceeded(self, seconds: int | None) -> bool:
        if not seconds:
            return False
        start = self.row.created
        cond = next((c for c in self.status.get("conditions") or [] if c["type"] == C.COND_SUSPENDED), None)
        if cond is not None and cond["status"] == "False":
            start = self._started_at
        if time.time() <= start + seconds:
            return False
        self._stop_all()
        status.fail(self.status, C.REASON_DEADLINE, C.MSG_DEADLINE)
        self.event("Warning", C.REASON_DEADLINE, C.MSG_DEADLINE)
        return True

    def _admit(self) -> bool:
        """Gang admission: with a PodGroup, nothing starts until the whole group fits on this machine."""
        if self._admitted:
            return True
        pg = gang.find_podgroup(self.row.objects)
        if pg is None:
            self._admitted = True
            return True
        pg_spec = pg.get("spec") or {}
        missing = gang.missing_resources(pg_spec.get("minResources") or {}, gang.Capacity.of_machine())
        if not missing:
            self._admitted = True
            self.event("Normal", "Scheduled", f"pod group {pg['metadata']['name']} fits on this machine")
            return True
        now = time.time()
        if self._gang_wait_since is None:
            self._gang_wait_since = now
            self.event(
                "Warning",
                "FailedScheduling",
                f"pod group {pg['metadata']['name']} does not fit on this machine: {'; '.join(missing)}",
            )
        timeout = int(pg_spec.get("scheduleTimeoutSeconds") or 60)
        if now - self._gang_wait_since >= timeout:
            msg = (
                f"pod group {pg['metadata']['name']} could not be scheduled within scheduleTimeoutSeconds="
                f"{timeout}: {'; '.join(missing)}"
            )
            status.fail(self.status, status.REASON_UNSCHEDULABLE, msg)
            self.event("Warning", status.REASON_UNSCHEDULABLE, msg)
        return False

    # Jobs and pods.
    def _rjob_satisfied(self, rjob: str, want: str) -> bool:
        runs = [j for j in self.jobs if j.plan.rjob == rjob]
        if want == "Complete":
            return all(j.state == "Complete" for j in runs)
        return all(j.ready or j.state == "Complete" for j in runs)

    def _start_ready_jobs(self) -> None:
        order = [r.name for r in self.plan.rjobs]
        in_order = (self.plan.spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder"
        for rj in self.plan.rjobs:
            deps = list(rj.depends_on)
            i = order.index(rj.name)
            if in_order and i > 0:
                deps.append((order[i - 1], "Ready"))
            if not all(self._rjob_satisfied(d, s) for d, s in deps):
                continue
            for j in self.jobs:
                if j.plan.rjob != rj.name or j.state not in ("Pending", "Active"):
                    continue
                j.state = "Active"
                running = sum(1 for p in j.pods if p.state == "Running")
                for p in j.pods:
                    if running >= j.plan.parallelism:
                        break
                    if p.state == "Pending":
                        self._start_pod(j, p)
                        running += 1

    def _start_pod(self, job: JobRun, pod: PodRun) -> None:
        spec = pod.plan.spec
        where = f"JobSet {self.plan.name} spec.replicatedJobs[{pod.plan.rjob}].template.spec.template.spec"
        want = int(gang.pod_requests(spec).get(gang.GPU, 0))
        if want and pod.gpus is None:
            if len(self._gpu_free) < want:
                return  # stays Pending until GPUs are released
            pod.gpus, self._gpu_free = self._gpu_free[:want], self._gpu_free[want:]
        elif not want and gang.gpu_count() > 0:
            pod.gpus = []
        pod_dir = self.dir / "pods" / pod.plan.short / f"attempt-{self.restarts}"
        pod_dir.mkdir(parents=True, exist_ok=True)
        volumes = pod_volumes(
            spec,
            pod_dir=pod_dir,
            claims_dir=paths.claims_dir(self.namespace, self.name),
            claim_templates=claim_template_names(self.plan.spec),
            index=self.index,
            where=where,
        )
        pod.init_left = list(spec.get("initContainers") or [])
        pod.state, pod.ready, pod.exit_code, pod.message = "Running", False, None, None
        self._dirty.add(pod.plan.name)
        self._pod_dirs[pod.plan.name] = (pod_dir, volumes)
        self._launch_stage(pod)
        self.event("Normal", "Started", f"pod {pod.plan.short} started (pid {pod.pid})")

    def _launch_stage(self, pod: PodRun) -> None:
        _, volumes = self._pod_dirs[pod.plan.name]
        spec = pod.plan.spec
        base = f"JobSet {self.plan.name} spec.replicatedJobs[{pod.plan.rjob}].template.spec.template.spec"
        if pod.init_left:
            specs, pod.in_init = [pod.init_left.pop(0)], True
            kind = "initContainers"
        else:
            specs, pod.in_init = list(spec.get("containers") or []), False
            kind = "containers"
        pod.containers = []
        for i, c in enumerate(specs):
            where = f"{base}.{kind}[{c.get('name', i)}]"
            cont = pods.prepare_container(
                pod.plan, c, self.ctx, restart_attempt=self.restarts, where=where, gpus=pod.gpus
            )
            pods.start_container(
                pod.plan, cont, self.ctx, volumes=volumes, log=self.log_path(pod.plan), where=where
            )
            pod.containers.append(cont)

    def _poll(self) -> None:
        for job in self.jobs:
            if job.state != "Active":
                continue
            for pod in job.pods:
                if pod.state != "Running":
                    continue
                codes = [c.proc.poll() if c.proc else 0 for c in pod.containers]
                failed = [c for c in codes if c not in (None, 0)]
                if failed:
                    self._pod_failed(job, pod, int(failed[0]))
                elif all(c == 0 for c in codes):
                    if pod.in_init or pod.init_left:
                        self._launch_stage(pod)
                        continue
                    pod.state, pod.exit_code, pod.ready = "Succeeded", 0, False
                    self._release_gpus(pod)
                    self._dirty.add(pod.plan.name)

    def _release_gpus(self, pod: PodRun) -> None:
        if pod.gpus:
            self._gpu_free = sorted(self._gpu_free + pod.gpus)
        pod.gpus = None

    def _pod_failed(self, job: JobRun, pod: PodRun, code: int) -> None:
        pods.stop([c.proc for c in pod.containers if c.proc is not None], STOP_GRACE)
        pod.exit_code, pod.ready = code, False
        job.failures += 1
        self._dirty.add(pod.plan.name)
        if job.failures > job.plan.backoff_limit:
            pod.state = "Failed"
            pod.message = (
                f"exit code {code}; job {job.plan.name} reached backoffLimit={job.plan.backoff_limit}"
            )
            self._release_gpus(pod)
            self.event(
                "Warning",
                "BackoffLimitExceeded",
                f"job {job.plan.name} has reached the specified backoff limit "
                f"(pod {pod.plan.short} exited with code {code})",
            )
            job.state = "Failed"
            self._stop_job(job)
            return
        pod.restarts += 1
        pod.message = f"restarted after exit code {code}"
        self.event(
            "Warning",
            "BackOff",
            f"pod {pod.plan.short} exited with code {code}; restarting it "
            f"(restartPolicy {job.plan.restart_policy}, failure {job.failures} of backoffLimit "
            f"{job.plan.backoff_limit})",
        )
        self._append_log_marker(pod, f"restart {pod.restarts} after exit code {code}")
        pod.state = "Pending"
        pod.init_left = []
        self._start_pod(job, pod)

    def _append_log_marker(self, pod: PodRun, text: str) -> None:
        with open(self.log_path(pod.plan), "ab") as f:
            f.write(f"--- kubetrain: {pod.plan.short}: {text} ---\n".encode())

    def _stop_job(self, job: JobRun) -> None:
        procs = [c.proc for p in job.pods for c in p.containers if c.proc is not None]
        pods.stop(procs, STOP_GRACE)
        for p in job.pods:
            if p.state == "Running":
                p.state, p.ready = "Failed", False
                p.message = p.message or "stopped: its job finished or failed"
                p.exit_code = (
                    p.containers[0].proc.returncode if p.containers and p.containers[0].proc else None
                )
                self._dirty.add(p.plan.name)
            self._release_gpus(p)

    def _stop_all(self) -> None:
        procs = [c.proc for j in self.jobs for p in j.pods for c in p.containers if c.proc is not None]
        pods.stop(procs, STOP_GRACE)
        for j in self.jobs:
            for p in j.pods:
                if p.state == "Running":
                    p.state, p.ready = "Failed", False
                    p.message = p.message or "stopped by kubetrain"
                    if p.containers and p.containers[0].proc is not None:
                        p.exit_code = p.containers[0].proc.returncode
                    self._dirty.add(p.plan.name)
                self._release_gpus(p)

    def _probe(self) -> None:
        assert self._prober is not None
        now = time.monotonic()
        for job in self.jobs:
            for pod in job.pods:
                if pod.state != "Running" or pod.in_init or pod.ready:
                    continue
                all_ready = True
                for c in pod.containers:
                    probe = c.spec.get("readinessProbe")
                    if c.ready or probe is None:
                        c.ready = True
                        continue
                    all_ready = False
                    key = (pod.plan.name, c.name)
                    fut = self._probes.get(key)
                    if fut is not None and fut.done():
                        del self._probes[key]
                        if fut.result():
                            c.ready = True
                            continue
                        c.next_probe = now + PROBE_RETRY
                    elif fut is None and now >= c.next_probe:
                        self._probes[key] = self._prober.submit(pods.run_probe, probe, c, pod.plan.address)
                if all_ready or all(c.ready for c in pod.containers):
                    pod.ready = True
                    self._dirty.add(pod.plan.name)

    def _evaluate(self) -> None:
        for job in self.jobs:
            if job.state == "Active" and all(p.state == "Succeeded" for p in job.pods):
                job.state = "Complete"
        spec = self.plan.spec
        sp = spec.get("successPolicy") or {}
        targets = sp.get("targetReplicatedJobs") or [r.name for r in self.plan.rjobs]
        tjobs = [j for j in self.jobs if j.plan.rjob in targets]
        done = (
            any(j.state == "Complete" for j in tjobs)
            if sp.get("operator") == "Any"
            else bool(tjobs) and all(j.state == "Complete" for j in tjobs)
        )
        if done:
            self._stop_all_running_as_succeeded()
            status.complete(self.status)
            self.event("Normal", C.REASON_ALL_JOBS_COMPLETED, C.MSG_ALL_JOBS_COMPLETED)
            return
        failed = [j for j in self.jobs if j.state == "Failed"]
        if not failed:
            return
        fp = spec.get("failurePolicy")
        if fp is None:
            self._fail(C.REASON_FAILED_JOBS, C.MSG_FAILED_JOBS)
            return
        action = "RestartJobSet"
        for rule in fp.get("rules") or []:
            targets_r = rule.get("targetReplicatedJobs")
            reasons = rule.get("onJobFailureReasons")
            if targets_r and failed[0].plan.rjob not in targets_r:
                continue
            if reasons and "BackoffLimitExceeded" not in reasons:
                continue
            action = rule["action"]
            break
        if action == "FailJobSet":
            self._fail(C.REASON_FAILED_JOBS, C.MSG_FAILED_JOBS)
        elif action == "RestartJobSet" and self.restarts >= int(fp.get("maxRestarts") or 0):
            self._fail(C.REASON_MAX_RESTARTS, C.MSG_MAX_RESTARTS)
        else:
            self._restart_jobset(count=action == "RestartJobSet")

    def _stop_all_running_as_succeeded(self) -> None:
        # Pods still running when the success policy is met (e.g. MPI nodes) are stopped, not failed.
        procs = [c.proc for j in self.jobs for p in j.pods for c in p.containers if c.proc is not None]
        pods.stop(procs, STOP_GRACE)
        for j in self.jobs:
            for p in j.pods:
                if p.state == "Running":
                    p.state, p.ready, p.message = (
                        "Succeeded",
                        False,
                        "stopped: the JobSet success policy was met",
                    )
                    self._dirty.add(p.plan.name)

    def _fail(self, reason: str, message: str) -> None:
        self._stop_all()
        status.fail(self.status, reason, message)
        self.event("Warning", reason, message)

    def _restart_jobset(self, *, count: bool) -> None:
        self._stop_all()
        if count:
            self.restarts += 1
            self.store.set_restarts(self.namespace, self.name, self.restarts)
        self.event("Warning", "Restarting", f"restarting the JobSet (restart {self.restarts}): a job failed")
        previous = {p.plan.name: p.restarts for j in self.jobs for p in j.pods}
        self._reset_jobs()
        for j in self.jobs:
            for p in j.pods:
                p.restarts = previous.get(p.plan.name, 0)
                self._append_log_marker(p, f"JobSet restart {self.restarts}")

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


def record_start_failure(store: Store, namespace: str, name: str, message: str) -> None:
    """A TrainJob whose supervisor cannot even start (e.g. an invalid JobSet) ends Failed, not SupervisorLost."""
    row = store.get_trainjob(namespace, name)
    if row is None:
        return
    st = row.trainjob.get("status") or {}
    status.fail(st, status.REASON_START_FAILED, message)
    row.trainjob["status"] = st
    store.update_trainjob(namespace, name, row.trainjob)
    store.add_event(namespace, name, "Warning", status.REASON_START_FAILED, message)
    store.set_supervisor(namespace, name, None, None)


def supervise(store: Store, namespace: str, name: str, *, install_signals: bool) -> dict[str, Any]:
    try:
        sup = Supervisor(store, namespace, name)
    except KubetrainError as exc:
        record_start_failure(store, namespace, name, str(exc))
        raise
    if install_signals:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda s, _f: sup.terminate(signal.Signals(s).name))
    return sup.run()


def configure_logging() -> None:
    handler = logging.FileHandler(paths.supervisor_log())
    handler.setFormatter(
        logging.Formatter("time=%(asctime)s level=%(levelname)s pid=%(process)d %(message)s")
    )
    root = logging.getLogger("kubetrain")
    if not any(isinstance(h, logging.FileHandler) for h in root.handlers):
        root.addHandler(handler)
    root.setLevel(logging.INFO)


def main() -> None:
    parser = argparse.ArgumentParser(description="kubetrain local supervisor (started by `kubetrain apply`)")
    parser.add_argument("namespace")
    parser.add_argument("name")
    args = parser.parse_args()
    configure_logging()
    store = Store()
    try:
        supervise(store, args.namespace, args.name, install_signals=True)
    except KubetrainError as exc:
        log.error("supervisor failed trainjob=%s/%s error=%r", args.namespace, args.name, str(exc))
        raise SystemExit(1) from None


if __name__ == "__main__":
    threading.current_thread().name = "supervisor"
    main()
