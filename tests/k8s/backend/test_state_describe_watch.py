"""The cluster backend's view of TrainJobs: states with reasons for ``get``, ``describe`` with every owned object's
events and failed steps' logs, watches for ``get -w`` / ``wait``, not-found suggestions, deleting runtimes."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.api import KubetrainError
from kubetrain.k8s.backend.cluster import ClusterBackend
from tests.k8s.helpers import torch_runtime, trainjob
from tests.k8s.kubelet import Kubelet, pod_manifest, running, terminated, unschedulable
from tests.k8s.threaded import background_api


def test_states_follow_the_sdk_and_say_why(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply(
            [trainjob(n) for n in ("nojs", "nopods", "pending", "half", "running", "done")], namespace="default"
        )
        for n in ("nopods", "pending", "half", "running"):
            kubelet.create_jobset(n, replicas=2)
        kubelet.create_pod(pod_manifest("pending", "node", 0), unschedulable("0/2 nodes are available"))
        kubelet.create_pod(pod_manifest("half", "node", 0), running())
        for i in range(2):
            kubelet.create_pod(pod_manifest("running", "node", i), running())
        kubelet.trainjob_condition("done", "Complete", "JobSetCompleted", "jobset completed successfully")
        jobs = {j.name: j for j in backend.list_trainjobs("default")}
        names = ["nojs", "nopods", "pending", "half", "running", "done"]
        states = dict(zip(names, backend.states([jobs[n] for n in names]), strict=True))
        assert (states["nojs"].state, states["nojs"].message) == ("Created", "no JobSet yet")
        assert (states["nopods"].state, states["nopods"].reason) == ("Created", "NoPods")
        assert (states["pending"].state, states["pending"].reason) == ("Pending", "Unschedulable")
        assert states["pending"].message == "node-0-0 Pending: 0/2 nodes are available"
        # One of the two trainer pods the JobSet makes runs: not Running yet (the SDK counts numNodes pods).
        assert states["half"].state == "Pending"
        assert states["running"].explain() == "Running (2/2 trainer pods running)"
        assert states["done"].state == "Complete"
        backend.close()


def test_describe_lists_owned_objects_events_and_the_failed_steps_last_lines(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        kubelet.create_jobset("job", replicas=2)
        ok = kubelet.create_pod(pod_manifest("job", "node", 0), running())
        bad = kubelet.create_pod(pod_manifest("job", "node", 1, suffix="zzzzz"), running())
        kubelet.log(bad, "".join(f"step {i}\n" for i in range(30)) + "Traceback: boom\n")
        kubelet.set_status(bad, terminated(3))
        kubelet.event("TrainJob", "job", "Created", "trainjob created")
        kubelet.event("JobSet", "job", "SuccessfulCreate", "created job job-node-0")
        kubelet.event("Job", "job-node-1", "SuccessfulCreate", "created pod")
        kubelet.event("PodGroup", "job", "Unschedulable", "not enough resources", type_="Warning")
        kubelet.event("Pod", bad, "BackOff", "Back-off restarting failed container", type_="Warning")
        kubelet.event("Pod", "someone-else", "Pulled", "not ours")
        d = backend.describe_trainjob("job", "default")
        steps = {s.name: s for s in d.steps}
        assert steps["node-1-0"].state == "Failed" and steps["node-1-0"].exit_code == 3
        assert steps["node-1-0"].reason == "Error"
        assert {e.object for e in d.events} == {
            "TrainJob/job",
            "JobSet/job",
            "Job/job-node-1",
            "PodGroup/job",
            "Pod/" + bad,
        }
        assert d.failure_logs["node-1-0"][-1] == "Traceback: boom"
        assert len(d.failure_logs["node-1-0"]) == 20
        assert "node-0-0" not in d.failure_logs
        assert d.state is not None and d.state.state == "Pending"
        assert "node-1-0 Failed" in d.state.message and "exit code 3" in d.state.message
        assert ok in d.extra["Pods"]
        backend.close()


def test_watch_reports_added_state_changes_and_deletion(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("a"), trainjob("b")], namespace="default")
        seen: list[tuple[str, str, str]] = []
        stream = backend.watch_trainjobs("default", names=["a"])
        acted = deleted = False
        for item in stream:
            if item is None:
                if not acted:
                    acted = True
                    kubelet.create_pod(pod_manifest("a", "node", 0), running())
                continue
            seen.append((item.type, item.trainjob.name, item.state.state))
            if item.state.state == "Running" and not deleted:
                deleted = True
                backend.delete_trainjob("a", "default")
            if item.type == "DELETED":
                break
        assert seen[0] == ("ADDED", "a", "Created")
        assert ("MODIFIED", "a", "Running") in seen
        assert seen[-1][::2] == ("DELETED", "Running")
        assert all(name == "a" for _, name, _ in seen)
        backend.close()


def test_not_found_suggests_close_names_not_everything(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob(f"job-{i}") for i in range(30)] + [trainjob("mnist-ddp")], namespace="default")
        with pytest.raises(KubetrainError) as err:
            backend.get_trainjob("mnist-dpp", "default")
        assert str(err.value) == (
            "trainjobs.trainer.kubeflow.org \"mnist-dpp\" not found in namespace default (did you mean 'mnist-ddp'?)"
        )
        with pytest.raises(KubetrainError, match=r"31 exist, none with a similar name"):
            backend.get_trainjob("zzz", "default")
        backend.close()


def test_delete_runtime_and_selector(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        labelled = trainjob("labelled")
        labelled["metadata"]["labels"] = {"team": "vision"}
        backend.apply([torch_runtime(), labelled, trainjob("plain")], namespace="default")
        assert [j.name for j in backend.list_trainjobs("default", "team=vision")] == ["labelled"]
        assert [j.name for j in backend.list_trainjobs("default", "team notin (vision)")] == ["plain"]
        with pytest.raises(KubetrainError, match="invalid label selector"):
            backend.list_trainjobs("default", "=vision")
        backend.delete_runtime("ClusterTrainingRuntime", "torch-distributed", "default")
        assert backend.list_runtimes("default") == []
        with pytest.raises(
            KubetrainError, match=r'clustertrainingruntimes\.trainer\.kubeflow\.org "torch-distributed" not found'
        ):
            backend.delete_runtime("ClusterTrainingRuntime", "torch-distributed", "default")
        backend.close()


def test_describe_says_which_node_a_step_is_on_and_when_that_node_is_not_ready(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        kubelet.create_jobset("job", replicas=3)
        gone = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message":
                "Kubelet stopped posting node status.", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
        kubelet.create_node("n1", {"type": "Ready", "status": "True"})
        kubelet.create_node("n2", gone)
        for i, node in enumerate(("n1", "n2", "n3")):  # n3: deleted from the cluster
            pod = pod_manifest("job", "node", 0, i, suffix=f"p{i}xyz")
            pod["spec"]["nodeName"] = node
            kubelet.create_pod(pod, running())
        d = backend.describe_trainjob("job", "default")
        steps = {s.name: s for s in d.steps}
        assert steps["node-0-0"].reason is None
        assert steps["node-0-1"].reason == "NodeNotReady"
        assert steps["node-0-1"].message == (
            "node n2 Ready=Unknown since 2026-01-01T00:00:00Z: Kubelet stopped posting node status."
        )
        assert (steps["node-0-2"].reason, steps["node-0-2"].message) == (
            "NodeNotReady",
            "node n3 is gone (deleted from the cluster)",
        )
        assert d.extra["Nodes"] == "n1 (node-0-0); n2 (node-0-1, NotReady); n3 (node-0-2, NotReady)"
        backend.close()
