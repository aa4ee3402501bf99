"""Standing in for the cluster's controllers and kubelet in tests: pods of a JobSet created by hand with JobSet's
labels, their status written through the status subresource, their logs written as a container runtime would.

Works on the fake API server on a background thread (``tests.k8s.threaded``): every call is run on its loop.
"""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from tests.k8s.threaded import Background

JS_GROUP = "jobset.x-k8s.io"


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_manifest(
    trainjob: str,
    rjob: str,
    job_index: int = 0,
    completion: int = 0,
    *,
    namespace: str = "default",
    containers: tuple[str, ...] = ("node",),
    init_containers: tuple[str, ...] = (),
    suffix: str = "abcde",
) -> dict[str, Any]:
    """A pod as JobSet + the Job controller name and label it: ``<jobset>-<rjob>-<job>-<completion>-<rand>``."""
    name = f"{trainjob}-{rjob}-{job_index}-{completion}-{suffix}"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": trainjob,
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/job-index": str(job_index),
                "batch.kubernetes.io/job-completion-index": str(completion),
            },
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": f"{trainjob}-{rjob}-{job_index}", "uid": "job-uid"}
            ],
        },
        "spec": {
            "containers": [{"name": c, "image": "busybox"} for c in containers],
            **(
                {"initContainers": [{"name": c, "image": "busybox"} for c in init_containers]}
                if init_containers
                else {}
            ),
        },
    }


def running(container: str = "node", restarts: int = 0) -> dict[str, Any]:
    return {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
        "containerStatuses": [
            {
                "name": container,
                "image": "busybox",
                "imageID": "",
                "restartCount": restarts,
                "ready": True,
                "state": {"running": {"startedAt": _now()}},
            }
        ],
    }


def terminated(
    exit_code: int, container: str = "node", reason: str | None = None, restarts: int = 0
) -> dict[str, Any]:
    return {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "containerStatuses": [
            {
                "name": container,
                "image": "busybox",
                "imageID": "",
                "ready": False,
                "restartCount": restarts,
                "state": {
                    "terminated": {
                        "exitCode": exit_code,
                        "reason": reason or ("Completed" if exit_code == 0 else "Error"),
                        "finishedAt": _now(),
                    }
                },
            }
        ],
    }


def crash_loop(
    restarts: int, exit_code: int, finished_at: str | None = None, container: str = "node"
) -> dict[str, Any]:
    """restartPolicy OnFailure: the pod stays Running while its container waits to be started again."""
    last = {"exitCode": exit_code, "reason": "Error", "finishedAt": finished_at or _now()}
    return {
        "phase": "Running",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {
                "name": container,
                "image": "busybox",
                "imageID": "",
                "restartCount": restarts,
                "ready": False,
                "state": {
                    "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s restarting failed container"}
                },
                "lastState": {"terminated": last},
            }
        ],
    }


def unschedulable(message: str) -> dict[str, Any]:
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}],
    }


def waiting(reason: str, message: str = "", container: str = "node") -> dict[str, Any]:
    return {
        "phase": "Pending",
        "conditions": [{"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [
            {
                "name": container,
                "image": "busybox",
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
        ],
    }


class Kubelet:
    """Pods, statuses, logs and events on the fake server, from the test's thread."""

    def __init__(self, bg: Background) -> None:
        self.bg = bg

    def _run(self, fn: Any) -> Any:
        async def go() -> Any:
            return fn()

        return self.bg.call(go())

    def create_pod(self, manifest: dict[str, Any], status: dict[str, Any] | None = None) -> str:
        store = self.bg.api.store
        ns = manifest["metadata"]["namespace"]

        def go() -> str:
            created = store.create("", "pods", ns, copy.deepcopy(manifest), "test")
            if status is not None:
                created["status"] = status
                store.replace("", "pods", ns, created["metadata"]["name"], created, "kubelet", "status")
            return str(created["metadata"]["name"])

        return str(self._run(go))

    def create_node(self, name: str, ready: dict[str, Any]) -> None:
        """A Node whose ``Ready`` condition is ``ready`` (as its kubelet or the node lifecycle controller wrote it)."""
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"conditions": [ready]}}
        self._run(lambda: self.bg.api.store.create("", "nodes", None, node, "test"))

    def set_status(self, pod: str, status: dict[str, Any], namespace: str = "default") -> None:
        store = self.bg.api.store

        def go() -> None:
            live = store.get("", "pods", namespace, pod)
            live["status"] = status
            store.replace("", "pods", namespace, pod, live, "kubelet", "status")

        self._run(go)

    def delete_pod(self, pod: str, namespace: str = "default") -> None:
        self._run(lambda: self.bg.api.store.delete("", "pods", namespace, pod))

    def log(
        self, pod: str, text: str, container: str | None = None, namespace: str = "default", at: float | None = None
    ) -> None:
        self._run(lambda: self.bg.api.pod_logs.write(namespace, pod, text, container=container, at=at))

    def restart(self, pod: str, container: str | None = None, namespace: str = "default") -> None:
        self._run(lambda: self.bg.api.pod_logs.restart(namespace, pod, container=container))

    def jobset_status(self, name: str, status: dict[str, Any], namespace: str = "default") -> None:
        store = self.bg.api.store

        def go() -> None:
            live = store.get(JS_GROUP, "jobsets", namespace, name)
            live["status"] = status
            store.replace(JS_GROUP, "jobsets", namespace, name, live, "jobset-controller", "status")

        self._run(go)

    def complete_jobset(self, name: str, namespace: str = "default", failed: bool = False) -> None:
        cond = {
            "type": "Failed" if failed else "Completed",
            "status": "True",
            "reason": "FailedJobs" if failed else "AllJobsCompleted",
            "message": "jobset failed due to one or more job failures" if failed else "jobset completed successfully",
            "lastTransitionTime": _now(),
        }
        self.jobset_status(name, {"conditions": [cond]}, namespace)

    def event(self, obj_kind: str, obj_name: str, reason: str, message: str, type_: str = "Normal") -> None:
        ev = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{obj_name}.", "namespace": "default"},
            "involvedObject": {"kind": obj_kind, "name": obj_name, "namespace": "default"},
            "reason": reason,
            "message": message,
            "type": type_,
            "firstTimestamp": _now(),
            "lastTimestamp": _now(),
            "count": 1,
        }
        self._run(lambda: self.bg.api.store.create("", "events", "default", ev, "test"))

    def create_jobset(self, name: str, replicas: int = 1, namespace: str = "default") -> None:
        js = {
            "apiVersion": f"{JS_GROUP}/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicatedJobs": [
                    {"name": "node", "replicas": replicas, "template": {"spec": {"parallelism": 1, "template": {}}}}
                ]
            },
        }
        self._run(lambda: self.bg.api.store.create(JS_GROUP, "jobsets", namespace, js, "test"))

    def trainjob_condition(self, name: str, type_: str, reason: str, message: str, namespace: str = "default") -> None:
        store = self.bg.api.store

        def go() -> None:
            live = store.get("trainer.kubeflow.org", "trainjobs", namespace, name)
            cond = {"type": type_, "status": "True", "reason": reason, "message": message, "lastTransitionTime": _now()}
            live["status"] = {"conditions": [cond]}
            store.replace("trainer.kubeflow.org", "trainjobs", namespace, name, live, "operator", "status")

        self._run(go)

    def has_jobset(self, name: str, namespace: str = "default") -> bool:
        items = self._run(lambda: self.bg.api.store.list(JS_GROUP, "jobsets", namespace)[0])
        return any(i["metadata"]["name"] == name for i in items)
