"""A running elastic TrainJob whose node count changed (``kubetrain scale``, ``apply`` with a new numNodes, the
local autoscaler): node pods are added or removed in place, the others keep running.

What a cluster does with an elastic Indexed Job: new completion indexes get new pods; indexes at or above the new
count are stopped like a deleted pod (SIGTERM, grace period, SIGKILL), which is not a failure. torch's elastic
agents notice the change themselves (a new agent waits to join, a leaving one breaks its peers' collectives) and
re-form the rendezvous with the new world size.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api import elastic
from kubetrain.local.plan import build_plan, find_jobset
from kubetrain.local.store.db import StoreError
from kubetrain.local.supervisor.jobstate import JobRun, PodRun
from kubetrain.local.supervisor.launch import PodLauncher


class Rescaler(PodLauncher):
    """Applies a change of node count from the stored objects to the running pods."""

    def _maybe_rescale(self) -> None:
        latest = self._latest_objects
        if latest is self.objects or latest == self.objects:
            return
        if not elastic.count_changes_only(self.objects, latest):
            return  # e.g. runtimePatches changed while suspended: applied on resume (``_handle_suspend``)
        self._rescale(latest)

    def _rescale(self, objects: list[dict[str, Any]]) -> None:
        before = elastic.node_count(self.plan.jobset)
        runs = {p.plan.name: p for j in self.jobs for p in j.pods}
        jobs = {j.plan.name: j for j in self.jobs}
        kept = {p.name for p in build_plan(find_jobset(objects)).pods()}
        removed = [p for name, p in runs.items() if name not in kept]
        if removed:
            self._stop_pods(removed)
            self._release(removed)
            for p in removed:
                self._close_pidfds_of(p.containers)
                if self.netns is not None:
                    self.netns.release_pod(p.plan.name)
        self._load_objects(objects, addresses={p.name: p.address for p in self.plan.pods()})
        self.jobs = []
        added: list[str] = []
        for plan in self.plan.jobs():
            old = jobs.get(plan.name)
            pods: list[PodRun] = []
            for pod_plan in plan.pods:
                run = runs.get(pod_plan.name)
                if run is None:
                    run = PodRun(plan=pod_plan)
                    added.append(pod_plan.short)
                    self._dirty.add(pod_plan.name)
                else:
                    run.plan = pod_plan
                pods.append(run)
            job = JobRun(plan=plan, pods=pods)
            if old is not None:
                # A Job that had completed runs again when it gets new indexes (only elastic trainer jobs scale).
                job.state = "Active" if old.state == "Complete" and added else old.state
                job.failures = old.failures
            self.jobs.append(job)
        self._write_hosts()
        if removed:
            try:
                self.store.delete_pods(self.namespace, self.name, [p.plan.short for p in removed])
            except StoreError as exc:
                self._store_trouble(exc)
        after = elastic.node_count(self.plan.jobset)
        parts = []
        if added:
            parts.append(f"starting {', '.join(added)}")
        if removed:
            parts.append(f"stopping {', '.join(p.plan.short for p in removed)}")
        self.event("Normal", "Scaled", f"trainer nodes {before} -> {after}: {'; '.join(parts) or 'no pod changes'}")
