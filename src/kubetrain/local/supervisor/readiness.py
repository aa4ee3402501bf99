"""Readiness probes and start gating: dependsOn, startupPolicyOrder InOrder and each pod's readinessProbe."""

from __future__ import annotations

import time

from kubetrain.local.sandbox import pods
from kubetrain.local.store import status
from kubetrain.local.supervisor.launch import PodLauncher

PROBE_RETRY = 0.2


class ReadinessGate(PodLauncher):
    """Starts a replicated job's pods only once the jobs it depends on are Ready or Complete."""

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
            if not self._admit_stage(rj.name):
                continue  # waits (queued) or can never run (the TrainJob failed)
            for j in self.jobs:
                if j.plan.rjob != rj.name or j.state not in ("Pending", "Active"):
                    continue
                j.state = "Active"
                running = sum(1 for p in j.pods if p.state == "Running")
                for p in j.pods:
                    if running >= j.plan.parallelism:
                        break
                    if p.state == "Pending" and p.restart_at is None:
                        self._start_pod(j, p)
                        if p.state == "Running":
                            running += 1
                    if status.finished(self.status):
                        return  # e.g. a pod that can never be scheduled failed the TrainJob

    def _probe(self) -> None:
        assert self.netns is not None
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
                        if "exec" in probe:
                            if self._exec_probes is None:
                                from concurrent.futures import ThreadPoolExecutor

                                self._exec_probes = ThreadPoolExecutor(max_workers=2, thread_name_prefix="probe")
                            self._probes[key] = self._exec_probes.submit(
                                pods.run_exec_probe, probe, c, self.ctx
                            )
                        elif "tcpSocket" in probe or "httpGet" in probe:
                            kind, host, port, path, timeout = pods.probe_target(probe, c, pod.plan.address)
                            self._probes[key] = self.netns.probe(kind, host, port, path=path, timeout=timeout)
                        else:
                            c.ready = True  # grpc probes are not run locally: counted as ready
                if all_ready or all(c.ready for c in pod.containers):
                    pod.ready = True
                    self._dirty.add(pod.plan.name)
