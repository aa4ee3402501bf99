"""Starting and stopping a TrainJob's pods: admission by the local scheduler, GPUs, scratch and volume
directories, init containers, and the kubelet's graceful stop."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubetrain.local import paths
from kubetrain.local.sandbox import gpus, in_image, pods, terminate
from kubetrain.local.sandbox import security_context as sc
from kubetrain.local.sandbox.env import MOUNT_WAIT, MissingReference
from kubetrain.local.sandbox.volumes import claim_template_names, pod_volumes
from kubetrain.local.scheduling import gang
from kubetrain.local.scheduling.resources import never_fits
from kubetrain.local.scheduling.scheduler import INSUFFICIENT, Decision
from kubetrain.local.store import status
from kubetrain.local.store.db import StoreError
from kubetrain.local.supervisor.jobstate import JobRun, JobState, PodRun

ADMISSION_RETRY = 0.5  # seconds between attempts of a queued pod or gang
REFERENCE_RETRY = 1.0  # seconds between attempts of a pod waiting for a ConfigMap or Secret
IMAGE_RETRY = 0.5  # seconds between looks at a pod's images while they are pulled (back-off is the puller's)
COND_QUEUED = status.COND_QUEUED


class PodLauncher(JobState):
    """Starts pods (container stage by stage) once the scheduler admits them, and stops them."""

    # Admission.
    def _unschedulable(self, what: str, missing: list[str]) -> None:
        msg = f"{what} can never fit on this machine: {'; '.join(missing)}"
        status.fail(self.status, status.REASON_UNSCHEDULABLE, msg)
        self.event("Warning", status.REASON_UNSCHEDULABLE, msg)

    def _set_queued(self, reason: str, message: str) -> None:
        if self._queued != (reason, message):
            if self._queued is None or self._queued[0] != reason:
                self.event("Normal", "Queued", message)
                if reason.startswith(INSUFFICIENT):
                    # What kube-scheduler records on a pod it cannot place, with the local books' details.
                    self.event("Warning", "FailedScheduling", f"0/1 nodes are available: 1 {reason}. ({message})")
            self._queued = (reason, message)
        if not any(p.state == "Running" for j in self.jobs for p in j.pods):
            status.set_condition(self.status, COND_QUEUED, "True", reason, message)

    def _clear_queued(self, what: str) -> None:
        if self._queued is not None:
            self._queued = None
            self.event("Normal", "Scheduled", f"{what} admitted by the local scheduler")
        conds = self.status.get("conditions") or []
        if any(c["type"] == COND_QUEUED for c in conds):
            # Locally only: the STATE column is the last condition's type, and a waiting job is no longer waiting.
            self.status["conditions"] = [c for c in conds if c["type"] != COND_QUEUED]

    def _decide(self, key: str, requests: dict[str, dict[str, float]]) -> Decision:
        try:
            return self.scheduler.admit(key, requests, overcommit=self.overcommit)
        except StoreError as exc:
            self._store_trouble(exc)
            return Decision(False, reason="StoreUnavailable", message=f"the local scheduler cannot decide: {exc}")

    def _check_gangs(self) -> bool:
        """Every stage of the TrainJob fits this machine when idle, or the TrainJob is Unschedulable at once,
        naming the totals, before any of its pods (an initializer, say) has run."""
        if self._gangs_checked:
            return True
        who = f"{self.namespace}/{self.name}"
        for stage in self.stages:
            missing = gang.shortfalls(stage, self.capacity, overcommit=self.overcommit)
            if missing:
                msg = gang.never_fits_message(who, stage, self.capacity, missing)
                status.fail(self.status, status.REASON_UNSCHEDULABLE, msg)
                self.event("Warning", status.REASON_UNSCHEDULABLE, msg)
                return False
            over = gang.overcommitted(stage, self.capacity) if self.overcommit else []
            if over:
                self.event("Warning", "Overcommitted", f"runs over-committed (--overcommit): {'; '.join(over)}")
        self._gangs_checked = True
        return True

    def _admit_stage(self, rjob: str) -> bool:
        """The pods that run at the same time as ``rjob``'s (its stage, ``gang``) are admitted together or none
        is: a TrainJob is never half-started, and a stage that can fit later waits as a whole."""
        stage = self.stage_of.get(rjob)
        if stage is None or stage.index in self._admitted_stages:
            return True
        members = [p for j in self.jobs for p in j.pods if j.plan.rjob in stage.rjobs and not p.admitted]
        requests = {p.plan.short: self.requests[p.plan.short] for p in members if self.requests[p.plan.short]}
        name = f"the pods of {', '.join(stage.rjobs)}"
        if requests:
            if time.monotonic() < self._next_admission:
                return False
            decision = self._decide(f"stage-{stage.index}", requests)
            if not decision.admitted:
                self._next_admission = time.monotonic() + ADMISSION_RETRY
                self._set_queued(decision.reason, decision.message)
                for p in members:
                    if p.message != decision.message:
                        p.message = decision.message
                        self._dirty.add(p.plan.name)
                return False
            devices = decision.devices
        else:
            devices = {}
        for p in members:
            p.admitted = True
            p.gpus = devices.get(p.plan.short, []) if self.capacity.gpus else None
            if p.message is not None and p.state == "Pending":
                p.message = None
                self._dirty.add(p.plan.name)
        self._admitted_stages.add(stage.index)
        if requests:
            self._clear_queued(name)
        return True

    def _admit_pod(self, pod: PodRun) -> bool:
        if pod.admitted:
            return True
        req = self.requests[pod.plan.short]
        if not req:
            pod.admitted = True  # requests nothing: nothing to account (it never sees a GPU)
            pod.gpus = [] if self.capacity.gpus else None
            return True
        missing = never_fits(req, self.capacity, self.overcommit)
        if missing:
            self._unschedulable(f"pod {pod.plan.short}", missing)
            return False
        if time.monotonic() < self._next_admission:
            return False
        decision = self._decide(pod.plan.short, {pod.plan.short: req})
        if not decision.admitted:
            self._next_admission = time.monotonic() + ADMISSION_RETRY
            if pod.message != decision.message:
                pod.message = decision.message
                self._dirty.add(pod.plan.name)
            self._set_queued(decision.reason, decision.message)
            return False
        pod.admitted = True
        pod.gpus = decision.devices.get(pod.plan.short, []) if self.capacity.gpus else None
        pod.message = None
        self._clear_queued(f"pod {pod.plan.short}")
        return True

    def _release(self, pods_: list[PodRun]) -> None:
        """Give back what finished pods held (a pod restarting in place keeps its resources)."""
        held = [p for p in pods_ if p.admitted and self.requests[p.plan.short]]
        for p in pods_:
            p.admitted = False
            p.gpus = None
        if held:
            # Gang members too: a finished initializer's CPUs are free again, like a finished pod's on a node.
            try:
                self.scheduler.release([p.plan.short for p in held])
            except StoreError as exc:
                self._store_trouble(exc)  # the books are corrected when this supervisor ends

    def _release_all(self) -> None:
        for j in self.jobs:
            for p in j.pods:
                p.admitted, p.gpus = False, None
        self._admitted_stages = set()
        try:
            self.scheduler.release_all()
        except StoreError as exc:
            self._store_trouble(exc)

    # Starting.
    def _start_pod(self, job: JobRun, pod: PodRun) -> None:
        if not self._admit_pod(pod):
            return
        spec = pod.plan.spec
        where = f"JobSet {self.plan.name} spec.replicatedJobs[{pod.plan.rjob}].template.spec.template.spec"
        pod_dir = self.dir / "pods" / pod.plan.short / f"attempt-{self.restarts}"
        pod_dir.mkdir(parents=True, exist_ok=True)
        self.refresh_index()
        try:
            volumes = pod_volumes(
                spec,
                pod_dir=pod_dir,
                claims_dir=paths.claims_dir(self.namespace, self.name),
                claim_templates=claim_template_names(self.plan.spec),
                index=self.index,
                where=where,
            )
        except MissingReference as exc:
            self._wait_for_reference(pod, exc)
            return
        if not self._images_ready(pod):
            return
        pod.init_left = list(spec.get("initContainers") or [])
        pod.state, pod.ready, pod.exit_code, pod.restart_at = "Running", False, None, None
        pod.message = None
        self._dirty.add(pod.plan.name)
        self._pod_dirs[pod.plan.name] = (pod_dir, volumes)
        try:
            if not self._launch_stage(pod):
                return
        except pods.ExecError as exc:
            self._exec_failed(job, pod, exc)
            return
        self.event("Normal", "Started", f"pod {pod.plan.short} started (pid {pod.pid})")

    def _wait_for_reference(self, pod: PodRun, exc: MissingReference) -> None:
        # The kubelet keeps such a pod waiting and tries again: applying the object (`kubetrain apply`) starts it.
        # The pod keeps its place in the scheduler's books meanwhile, as a pod bound to a node does.
        message = f"{exc.reason}: {exc.message}"
        if pod.message != message:
            if exc.reason == MOUNT_WAIT:
                self.event("Warning", "FailedMount", f"pod {pod.plan.short}: {exc.message} ({exc.FIX})")
            else:
                self.event("Warning", "Failed", f"pod {pod.plan.short}: Error: {exc.message} ({exc.FIX})")
        pod.state, pod.ready, pod.message = "Pending", False, message
        pod.init_left, pod.in_init = [], False
        pod.restart_at = time.monotonic() + REFERENCE_RETRY
        self._dirty.add(pod.plan.name)

    def _images_ready(self, pod: PodRun) -> bool:
        """Every container of the pod has its root filesystem (``pod_images``), or the pod waits as a kubelet's
        waits for its images: Pending, with the waiting reason (``ContainerCreating`` while pulling,
        ``ErrImagePull``, ``ImagePullBackOff``, ``ErrImageNeverPull``) and message, tried again shortly."""
        waiting = self.pod_images(pod)
        if waiting is None:
            return True
        message = f"{waiting.reason}: {waiting.message}"
        if pod.message != message:
            pod.message = message
            self._dirty.add(pod.plan.name)
        pod.state, pod.ready = "Pending", False
        pod.init_left, pod.in_init = [], False
        pod.restart_at = time.monotonic() + IMAGE_RETRY
        return False

    def _exec_failed(self, job: JobRun, pod: PodRun, exc: pods.ExecError) -> None:
        # Retrying cannot help (the same command in the same environment), so the Job fails now instead of
        # crash-looping through its backoffLimit; the exit code is the shell's (127 not found, 126 not executable).
        terminate.stop([(c.proc, 0.0) for c in pod.containers if c.proc is not None])
        pod.state, pod.ready, pod.exit_code = "Failed", False, exc.code
        pod.message = f"StartError: {exc}"
        self._dirty.add(pod.plan.name)
        self._append_log_marker(pod, str(exc))
        self.event("Warning", "Failed", f"pod {pod.plan.short}: {exc}")
        self._release([pod])
        job.state = "Failed"
        self._stop_job(job)
        self.exec_failure = exc.code

    def _append_log_marker(self, pod: PodRun, text: str) -> None:
        try:
            log = self.log_path(pod.plan)
            log.parent.mkdir(parents=True, exist_ok=True)
            with open(log, "ab") as f:
                f.write(f"--- kubetrain: {pod.plan.short}: {text} ---\n".encode())
        except OSError:
            pass  # a full disk must not stop the supervisor; the event carries the same text

    def _launch_stage(self, pod: PodRun) -> bool:
        """Start the pod's next stage (one init container, or every container); False when the pod now waits for
        a ConfigMap or Secret (it is started again from its first stage once they exist)."""
        pod_dir, volumes = self._pod_dirs[pod.plan.name]
        spec = pod.plan.spec
        base = f"JobSet {self.plan.name} spec.replicatedJobs[{pod.plan.rjob}].template.spec.template.spec"
        if pod.init_left:
            specs, pod.in_init = [pod.init_left.pop(0)], True
            kind = "initContainers"
        else:
            specs, pod.in_init = list(spec.get("containers") or []), False
            kind = "containers"
        self._close_pidfds_of(pod.containers)
        pod.containers = []
        # The status endpoint's token: one per pod (the URL and CA are the same for all, in ctx.extra_env).
        status_env = self.status_server.pod_env(pod.plan.short) if self.status_server is not None else {}
        wheres = [f"{base}.{kind}[{c.get('name', i)}]" for i, c in enumerate(specs)]
        grant = self._grant(pod)
        try:
            # Every container of the stage is checked before any starts, as its configuration cannot change.
            prepared = [self._prepare(pod, c, w, pod_dir, grant) for c, w in zip(specs, wheres, strict=True)]
        except sc.ContainerConfigError as exc:
            self._config_error(pod, exc)
            raise pods.PodError(f"pod {pod.plan.short}: {exc.reason}: {exc}") from None
        except MissingReference as exc:
            self._wait_for_reference(pod, exc)
            return False
        for cont, where in zip(prepared, wheres, strict=True):
            self._report_groups(pod, cont)
            cont.env.update(status_env)
            pod.containers.append(cont)
            pods.start_container(
                pod.plan, cont, self.ctx, volumes=volumes, log=self.log_path(pod.plan, cont.name), where=where,
                sandbox=in_image.sandbox_argv if cont.image is not None else None,
            )
        return True

    def _grant(self, pod: PodRun) -> gpus.Grant | None:
        """The pod's GPUs, beside those of the TrainJob's other admitted pods (None: this machine has none)."""
        if pod.gpus is None:
            return None
        own = set(pod.gpus)
        others = {i for j in self.jobs for p in j.pods if p is not pod and p.gpus for i in p.gpus}
        return gpus.Grant(tuple(pod.gpus), tuple(sorted(others - own)), bool(others & own))

    def _prepare(
        self, pod: PodRun, c: dict[str, Any], where: str, pod_dir: Path, grant: gpus.Grant | None
    ) -> pods.Container:
        """The container set up on this machine's files, or in its image when it runs in one (``pod_images``)."""
        image = self.image_roots.get((pod.plan.name, c.get("name", "")))
        if image is not None:
            return in_image.prepare_container(
                pod.plan, c, self.ctx, image, restart_attempt=self.restarts, where=where, gpus=grant,
                scratch=pod_dir,
            )
        return pods.prepare_container(
            pod.plan, c, self.ctx, restart_attempt=self.restarts, where=where, gpus=grant, scratch=pod_dir
        )

    def _config_error(self, pod: PodRun, exc: sc.ContainerConfigError) -> None:
        # The kubelet leaves such a container waiting; locally nothing could change its configuration, so the
        # pod stays Pending with the kubelet's reason and the TrainJob fails (PodStartFailed) instead of hanging.
        pod.state, pod.ready = "Pending", False
        pod.message = f"{exc.reason}: {exc}"
        self._dirty.add(pod.plan.name)
        self.event("Warning", "Failed", f"pod {pod.plan.short}: Error: {exc}")

    def _report_groups(self, pod: PodRun, cont: pods.Container) -> None:
        sec = cont.security
        key = f"{pod.plan.rjob}/{cont.name}"
        if sec is None or not sec.unmapped_groups or key in self.ctx.reported:
            return
        self.ctx.reported.add(key)
        self.event(
            "Warning",
            "GroupsNotMapped",
            f"pod {pod.plan.short} container {cont.name}: fsGroup/supplementalGroups "
            f"{', '.join(map(str, sec.unmapped_groups))} are not among its groups: without root, a pod's user "
            f"namespace maps only your own gid (gid {sec.gid} inside), so only that group can be given. Its "
            "volumes are yours, so it can use them anyway; run kubetrain as root for the exact groups",
        )

    # Stopping.
    def _stop_pods(self, pods_: list[PodRun]) -> None:
        """SIGTERM, the pod's terminationGracePeriodSeconds, SIGKILL: all pods at once."""
        terminate.stop(
            [
                (c.proc, terminate.grace_of(p.plan.spec))
                for p in pods_
                for c in p.containers
                if c.proc is not None
            ],
            force=self.forced,
        )

    def _stop_job(self, job: JobRun) -> None:
        self._stop_pods(job.pods)
        for p in job.pods:
            if p.state == "Running":
                p.message = "stopped: its job failed"
                if p.containers and p.containers[0].proc is not None:
                    p.exit_code = pods.exit_code(p.containers[0].proc.returncode)
            elif p.state == "Pending" and p.restart_at is not None:
                p.message = f"{p.message}; not restarted: its job failed"
            else:
                continue
            p.state, p.ready, p.restart_at = "Failed", False, None
            self._dirty.add(p.plan.name)
        self._release(job.pods)

    def _stop_all(self, message: str = "stopped by kubetrain") -> None:
        all_pods = [p for j in self.jobs for p in j.pods]
        self._stop_pods(all_pods)
        for p in all_pods:
            if p.state == "Running":
                p.state, p.ready = "Failed", False
                p.message = p.message or message
                if p.containers and p.containers[0].proc is not None:
                    p.exit_code = pods.exit_code(p.containers[0].proc.returncode)
                self._dirty.add(p.plan.name)
            p.restart_at = None
        self._release_all()

    def _stop_all_running_as_succeeded(self) -> None:
        # Pods still running when the success policy is met (e.g. MPI nodes) are stopped, not failed.
        all_pods = [p for j in self.jobs for p in j.pods]
        self._stop_pods(all_pods)
        for p in all_pods:
            if p.state == "Running":
                p.state, p.ready, p.message = "Succeeded", False, "stopped: the JobSet success policy was met"
                self._dirty.add(p.plan.name)
        self._release_all()

