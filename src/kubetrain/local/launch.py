"""Starting and stopping a TrainJob's pods: GPUs, scratch and volume directories, init containers, stop grace."""

from __future__ import annotations

from kubetrain.local import gang, paths, pods
from kubetrain.local.jobstate import JobRun, JobState, PodRun
from kubetrain.local.volumes import claim_template_names, pod_volumes

STOP_GRACE = 5.0


class PodLauncher(JobState):
    """Starts pods (container stage by stage) and stops them, handing GPUs out and back."""

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

    def _release_gpus(self, pod: PodRun) -> None:
        if pod.gpus:
            self._gpu_free = sorted(self._gpu_free + pod.gpus)
        pod.gpus = None

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
