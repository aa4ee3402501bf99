"""``kubetrain run`` / ``logs -f`` on a cluster: waiting with reasons, streaming pods as they start, restarts,
the end; and ``logs`` with kubectl's flags. The fake API server plays the cluster; the test plays the kubelet."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import KubetrainError
from kubetrain.api.logtext import lines_of
from kubetrain.api.views import LogChunk, LogItem, LogOptions, Notice, StateChange, StepChange
from kubetrain.k8s.backend.cluster import ClusterBackend
from kubetrain.k8s.backend.log_stamps import Stamps
from tests.k8s.helpers import trainjob
from tests.k8s.kubelet import Kubelet, pod_manifest, running, terminated, unschedulable, waiting
from tests.k8s.threaded import background_api


class Collector:
    """Iterates a stream on its own thread (the backend's loop lives there) and keeps every item."""

    def __init__(self, items: Iterator[LogItem]) -> None:
        self.items: list[LogItem] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        self._it = items
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            for item in self._it:
                self.items.append(item)
        except BaseException as exc:
            self.error = exc
        finally:
            self.done.set()

    def states(self) -> list[tuple[str, str, str]]:
        return [(i.state.state, i.state.reason, i.state.message) for i in self.items if isinstance(i, StateChange)]

    def text(self) -> str:
        return "".join(i.text for i in self.items if isinstance(i, LogChunk))

    def wait(self, pred: Callable[[], Any], what: str, timeout: float = 20) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if value := pred():
                return value
            if self.error is not None:
                raise AssertionError(f"stream failed while waiting for {what}: {self.error!r}")
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}; items: {self.items[-10:]}")


def test_run_waits_explains_streams_follows_restarts_and_ends(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        c = Collector(backend.log_stream("job", "default", LogOptions(follow=True, progress=True)))

        c.wait(lambda: ("Created", "NoPods", "no JobSet yet") in c.states(), "no JobSet yet")
        kubelet.create_jobset("job", replicas=2)
        c.wait(
            lambda: any(m.startswith("JobSet created; waiting for its Jobs") for _, _, m in c.states()),
            "JobSet created",
        )
        p0 = kubelet.create_pod(
            pod_manifest("job", "node", 0), unschedulable("0/3 nodes are available: 3 Insufficient cpu.")
        )
        c.wait(lambda: ("Pending", "Unschedulable") in [s[:2] for s in c.states()], "unschedulable")
        assert any("0/3 nodes are available: 3 Insufficient cpu." in m for _, _, m in c.states())
        kubelet.set_status(p0, waiting("ImagePullBackOff", 'Back-off pulling image "busybox"'))
        c.wait(lambda: ("Pending", "ImagePullBackOff") in [s[:2] for s in c.states()], "image pull")
        p1 = kubelet.create_pod(pod_manifest("job", "node", 1, suffix="fghij"), running())
        kubelet.log(p1, "rank 1 hello\n")
        # One of two trainer pods runs: still Pending, and the running one streams already.
        c.wait(lambda: "rank 1 hello" in c.text(), "pod 1 log")
        assert c.states()[-1][0] == "Pending"
        kubelet.set_status(p0, running())
        kubelet.log(p0, "rank 0 step 1\n")
        c.wait(lambda: c.states()[-1][0] == "Running", "Running")
        c.wait(lambda: "rank 0 step 1" in c.text(), "pod 0 log")
        steps = {i.step: i for i in c.items if isinstance(i, StepChange)}
        assert steps["node-0-0"].state == "Running" and steps["node-1-0"].state == "Running"

        # A container restart: the new run's log is streamed too, without repeating the first one.
        kubelet.restart(p0)
        kubelet.set_status(p0, running(restarts=1))
        kubelet.log(p0, "rank 0 after restart\n")
        c.wait(lambda: "rank 0 after restart" in c.text(), "log after restart")
        assert c.text().count("rank 0 step 1") == 1

        kubelet.set_status(p0, terminated(0, restarts=1))  # a kubelet never counts restarts down
        kubelet.set_status(p1, terminated(0))
        kubelet.trainjob_condition("job", "Complete", "JobSetCompleted", "jobset completed successfully")
        c.wait(lambda: c.done.is_set(), "end of stream")
        assert c.error is None
        assert c.states()[-1] == ("Complete", "JobSetCompleted", "jobset completed successfully")
        by_step: dict[str, str] = {}
        for i in c.items:
            if isinstance(i, LogChunk):
                by_step[i.step] = by_step.get(i.step, "") + i.text
        assert by_step == {"node-0-0": "rank 0 step 1\nrank 0 after restart\n", "node-1-0": "rank 1 hello\n"}
        backend.close()


def test_logs_follow_before_any_pod_exists_and_unreadable_logs_are_reported(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        c = Collector(backend.log_stream("job", "default", LogOptions(follow=True)))
        time.sleep(0.3)
        assert not c.done.is_set()  # waits for pods instead of failing
        pod = kubelet.create_pod(pod_manifest("job", "node", 0), running())
        kubelet.log(pod, "epoch 1\n")
        c.wait(lambda: "epoch 1" in c.text(), "log")
        kubelet.set_status(pod, terminated(1))
        kubelet.trainjob_condition("job", "Failed", "JobSetFailed", "jobset failed")
        c.wait(lambda: c.done.is_set(), "end")
        assert c.error is None
        assert not [i for i in c.items if isinstance(i, StateChange | StepChange)]  # progress not asked for
        backend.close()


def test_a_log_that_cannot_be_read_is_a_notice_not_the_end_of_run(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        pod = kubelet.create_pod(pod_manifest("job", "node", 0), running())
        bg.api.inject("GET", r"/pods/job-node-0-0-abcde/log", 400, times=1)
        c = Collector(backend.log_stream("job", "default", LogOptions(follow=True, progress=True)))
        c.wait(lambda: any(isinstance(i, Notice) for i in c.items), "notice")
        notice = next(i for i in c.items if isinstance(i, Notice))
        assert notice.text.startswith("log of step node-0-0 (job-node-0-0-abcde) unavailable: injected")
        kubelet.set_status(pod, terminated(0))
        kubelet.trainjob_condition("job", "Complete", "JobSetCompleted", "done")
        c.wait(lambda: c.done.is_set(), "end")
        assert c.error is None and c.states()[-1][0] == "Complete"
        backend.close()


def test_logs_tail_since_timestamps_and_container(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        status = running()
        status["containerStatuses"].append(
            {"name": "sidecar", "restartCount": 0, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
        )
        pod = kubelet.create_pod(pod_manifest("job", "node", 0, containers=("node", "sidecar")), status)
        t0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
        for i in range(5):
            kubelet.log(pod, f"line {i}\n", container="node", at=t0 + i)
        kubelet.log(pod, "from the sidecar\n", container="sidecar", at=t0)

        def text(**kw: Any) -> str:
            return "\n".join(lines_of(backend.log_stream("job", "default", LogOptions(**kw))))

        assert text() == "line 0\nline 1\nline 2\nline 3\nline 4"
        assert text(tail=2) == "line 3\nline 4"
        assert text(since_time="2026-01-01T00:00:03Z") == "line 3\nline 4"
        assert text(tail=1, timestamps=True) == "2026-01-01T00:00:04Z line 4"
        assert text(container="sidecar") == "from the sidecar"
        with pytest.raises(
            KubetrainError, match=r"container 'nope' is not in step node-0-0 \(containers: node, sidecar\)"
        ):
            text(container="nope")
        with pytest.raises(KubetrainError, match=r"no step 'launcher' in TrainJob job"):
            kubelet.create_jobset("job")
            text(step="launcher", follow=True)
        backend.close()


def test_reopened_stream_skips_what_was_shown() -> None:
    s = Stamps(keep=False)
    first = "2026-01-01T00:00:01.5Z a\n2026-01-01T00:00:02Z b\n2026-01-01T00:00:02Z c\n2026-01-01T00:00:02.25Z d"
    assert s.feed(first[:30]) + s.feed(first[30:]) == "a\nb\nc\nd"
    assert s.resume() == "2026-01-01T00:00:02Z"
    # The server resends from the second: b, c and d are skipped; e is new.
    again = "2026-01-01T00:00:02Z b\n2026-01-01T00:00:02Z c\n2026-01-01T00:00:02.25Z d\n2026-01-01T00:00:03Z e\n"
    assert s.feed(again) == "\ne\n"


def test_an_unscheduled_podgroup_is_the_reason_to_wait(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        kubelet.create_jobset("job", replicas=2)
        pg = {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": "job", "namespace": "default"},
            "spec": {"minMember": 2},
        }

        def create_pg() -> None:
            store = bg.api.store
            created = store.create("scheduling.volcano.sh", "podgroups", "default", pg, "test")
            created["status"] = {
                "phase": "Pending",
                "conditions": [
                    {"type": "Unschedulable", "status": "True", "message": "2/2 tasks in gang unschedulable"}
                ],
            }
            store.replace("scheduling.volcano.sh", "podgroups", "default", "job", created, "volcano", "status")

        kubelet._run(create_pg)
        c = Collector(backend.log_stream("job", "default", LogOptions(follow=True, progress=True)))
        c.wait(
            lambda: (
                ("Created", "NoPods", "PodGroup job Pending (minMember 2): 2/2 tasks in gang unschedulable")
                in c.states()
            ),
            "PodGroup reason",
        )
        other = ClusterBackend(kubeconfig, None)  # the first one's loop is busy streaming on the collector's thread
        d = other.describe_trainjob("job", "default")
        other.close()
        assert d.extra["PodGroup"].startswith("scheduling.volcano.sh/job phase=Pending minMember=2")
        kubelet.trainjob_condition("job", "Failed", "Unschedulable", "gang never fit")
        c.wait(lambda: c.done.is_set(), "end")
        backend.close()


def test_lines_written_after_a_followed_stream_ended_are_not_lost(tmp_path: Path) -> None:
    """A busy kubelet can close a followed log when the container exits, before its last lines were read: the
    stream then ends early, and the last lines must still be shown, once."""
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        kubelet.create_jobset("job")
        pod = kubelet.create_pod(pod_manifest("job", "node", 0), running())
        kubelet.log(pod, "step 1\n")
        c = Collector(backend.log_stream("job", "default", LogOptions(follow=True, progress=True)))
        c.wait(lambda: "step 1" in c.text(), "the first line")

        def following() -> int:
            return sum(n for (_, p, _), n in bg.api.pod_logs.following.items() if p == pod)

        kubelet.set_status(pod, terminated(0))
        c.wait(lambda: following() == 0, "the followed stream closed with the container")
        kubelet.log(pod, "node 0 done\n")  # what the kubelet had not read yet
        c.wait(lambda: "node 0 done" in c.text(), "the last line, read after the stream ended")
        kubelet.trainjob_condition("job", "Complete", "JobSetCompleted", "jobset completed successfully")
        c.wait(lambda: c.done.is_set(), "end of stream")
        assert c.error is None
        assert c.text() == "step 1\nnode 0 done\n"
        backend.close()
