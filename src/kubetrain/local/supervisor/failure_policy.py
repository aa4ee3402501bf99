"""Exits, restarts and the JobSet policies: backoffLimit per job, successPolicy, failurePolicy (restart or fail)."""

from __future__ import annotations

import time

from kubetrain.api import constants as C
from kubetrain.local.sandbox import known_images, pods
from kubetrain.local.store import status
from kubetrain.local.supervisor.jobstate import JobRun, PodRun
from kubetrain.local.supervisor.launch import PodLauncher


class FailurePolicy(PodLauncher):
    """Reacts to pod exits and decides, per the JobSet policies, whether the TrainJob goes on, restarts or ends."""

    def _poll(self) -> None:
        for job in self.jobs:
            if job.state != "Active":
                continue
            for pod in job.pods:
                if pod.state != "Running":
                    continue
                codes = [pods.exit_code(c.proc.poll()) if c.proc else 0 for c in pod.containers]
                failed = [(c, code) for c, code in zip(pod.containers, codes, strict=True) if code not in (None, 0)]
                if failed and known_images.retry_is_futile(failed[0][0].spec, int(failed[0][1] or 0)):
                    self._futile_failure(job, pod, failed[0][0].name, int(failed[0][1] or 0))
                elif failed:
                    self._pod_failed(job, pod, int(failed[0][1] or 0))
                elif all(c == 0 for c in codes):
                    if pod.in_init or pod.init_left:
                        self._launch_stage(pod)
                        continue
                    pod.state, pod.exit_code, pod.ready = "Succeeded", 0, False
                    self._release([pod])
                    self._dirty.add(pod.plan.name)

    def _pod_failed(self, job: JobRun, pod: PodRun, code: int) -> None:
        # The pod's other containers go the way the kubelet stops them, with the pod's grace period.
        self._stop_pods([pod])
        pod.exit_code, pod.ready = code, False
        job.failures += 1
        self._dirty.add(pod.plan.name)
        if job.failures > job.plan.backoff_limit:
            pod.state = "Failed"
            pod.message = (
                f"exit code {code}; job {job.plan.name} reached backoffLimit={job.plan.backoff_limit}"
            )
            self._release([pod])
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
        delay = pod.backoff.next_delay(time.monotonic())
        self._append_log_marker(pod, f"restart {pod.restarts} after exit code {code}")
        pod.state = "Pending"
        pod.init_left = []
        pod.restart_at = time.monotonic() + delay
        when = f"back-off {delay:g}s restarting failed container" if delay else "restarting it now"
        pod.message = f"exit code {code}; {when}"
        self.event(
            "Warning",
            "BackOff",
            f"pod {pod.plan.short} exited with code {code}; {when} (restartPolicy {job.plan.restart_policy}, "
            f"failure {job.failures} of backoffLimit {job.plan.backoff_limit})",
        )
        if not delay:
            self._restart_pod(job, pod)

    def _futile_failure(self, job: JobRun, pod: PodRun, container: str, code: int) -> None:
        # A known image's program said another try cannot succeed (known_images): the Job fails now, with what the
        # program said last as the step's message.
        self._stop_pods([pod])
        said = known_images.last_line(self.log_path(pod.plan, container))
        pod.state, pod.ready, pod.exit_code, pod.message = "Failed", False, code, said
        self._dirty.add(pod.plan.name)
        self._release([pod])
        self.event(
            "Warning", "Failed",
            f"pod {pod.plan.short} exited with code {code}: {said or 'see its log'} "
            "(retrying cannot help; not retried)",
        )
        job.state = "Failed"
        self._stop_job(job)

    def _restart_pod(self, job: JobRun, pod: PodRun) -> None:
        pod.restart_at = None
        self._start_pod(job, pod)

    def _restart_due_pods(self) -> None:
        now = time.monotonic()
        for job in self.jobs:
            if job.state != "Active":
                continue
            for pod in job.pods:
                if pod.state == "Pending" and pod.restart_at is not None and now >= pod.restart_at:
                    self._restart_pod(job, pod)

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

    def _fail(self, reason: str, message: str) -> None:
        self._stop_all()
        status.fail(self.status, reason, message)
        self.event("Warning", reason, message)

    def _restart_jobset(self, *, count: bool) -> None:
        self._stop_all("stopped: the JobSet restarts")
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
