"""What a pod's status says about a failed run, and the texts made of it (pure functions)."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.views import StateView
from kubetrain.k8s.pods import failures as pf

T0, T1, T2 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z", "2026-01-01T00:00:20Z"


def pod(*statuses: dict[str, Any], phase: str = "Running", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "job-node-0-0-abcde",
            "uid": "u1",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": "job",
                "jobset.sigs.k8s.io/replicatedjob-name": "node",
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-completion-index": "0",
            },
            **meta,
        },
        "status": {"phase": phase, "containerStatuses": list(statuses)},
    }


def container(name: str = "node", restarts: int = 0, state: Any = None, last: Any = None) -> dict[str, Any]:
    s: dict[str, Any] = {"name": name, "restartCount": restarts, "state": state or {"running": {"startedAt": T0}}}
    if last:
        s["lastState"] = {"terminated": last}
    return s


def term(code: int, reason: str = "Error", at: str = T1, **extra: Any) -> dict[str, Any]:
    return {"exitCode": code, "reason": reason, "finishedAt": at, **extra}


def test_an_exit_code_is_a_failure_of_its_step() -> None:
    [f] = pf.pod_failures(pod(container(state={"terminated": term(3)}), phase="Failed"))
    seen = (f.step, f.container, f.exit_code, f.signal, f.reason, f.previous)
    assert seen == ("node-0-0", "node", 3, None, "Error", False)
    assert pf.summary(f.entry()) == "node-0-0 exited with code 3 (Error)"


def test_a_clean_exit_is_no_failure() -> None:
    assert pf.pod_failures(pod(container(state={"terminated": term(0, "Completed")}), phase="Succeeded")) == []
    assert pf.pod_failures(pod(container())) == []


@pytest.mark.parametrize(
    ("termination", "signal", "text"),
    [
        (term(139), "SIGSEGV", "node-0-0 was killed by SIGSEGV (exit code 139)"),
        (term(137, "OOMKilled"), "SIGKILL", "node-0-0 was OOMKilled (exit code 137)"),
        (term(1, signal=6), "SIGABRT", "node-0-0 was killed by SIGABRT (exit code 1)"),
        (term(255), None, "node-0-0 exited with code 255 (Error)"),
    ],
)
def test_signals_and_oomkilled(termination: dict[str, Any], signal: str | None, text: str) -> None:
    [f] = pf.pod_failures(pod(container(state={"terminated": termination}), phase="Failed"))
    assert f.signal == signal
    assert pf.summary(f.entry()) == text


def test_a_crash_loop_shows_the_last_run_and_the_restarts() -> None:
    waiting = {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 20s"}}
    [f] = pf.pod_failures(pod(container(restarts=2, state=waiting, last=term(3, at=T2))))
    assert (f.exit_code, f.restarts, f.previous, f.time) == (3, 2, True, T2)
    assert pf.summary(f.entry()) == "node-0-0 exited with code 3 (Error) after 2 restarts"


def test_one_run_seen_twice_is_one_failure() -> None:
    # The kubelet first reports the run as terminated, then (restarted) as its last state.
    now = pf.pod_failures(pod(container(restarts=0, state={"terminated": term(3)})))
    later = pf.pod_failures(pod(container(restarts=1, state={"waiting": {"reason": "CrashLoopBackOff"}}, last=term(3))))
    assert now[0].fingerprint == later[0].fingerprint
    # Without finishedAt or a container ID (an incomplete status), the restart count tells the runs apart.
    bare = {"exitCode": 3, "reason": "Error"}
    a = pf.pod_failures(pod(container(restarts=0, state={"terminated": bare})))
    b = pf.pod_failures(pod(container(restarts=1, state={"waiting": {"reason": "CrashLoopBackOff"}}, last=bare)))
    assert a[0].fingerprint == b[0].fingerprint


def test_runs_ended_by_the_pods_deletion_are_not_causes() -> None:
    deleting = {"deletionTimestamp": "2026-01-01T00:00:40Z", "deletionGracePeriodSeconds": 30}  # asked at 00:10
    killed = pod(container(state={"terminated": term(143, at="2026-01-01T00:00:12Z")}), **deleting)
    assert pf.pod_failures(killed) == []
    # ... but a failure before the delete request still counts (the Job controller deletes crash-looping pods).
    earlier = pod(
        container(restarts=3, state={"waiting": {"reason": "CrashLoopBackOff"}}, last=term(3, at=T0)),
        **deleting,
    )
    assert [f.exit_code for f in pf.pod_failures(earlier)] == [3]
    # A disruption (preemption, eviction) is why the pod went: that is the reason shown.
    preempted = pod(container(state={"terminated": term(137, at="2026-01-01T00:00:12Z")}), **deleting)
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}
    preempted["status"]["conditions"] = [disruption]
    [f] = pf.pod_failures(preempted)
    assert pf.summary(f.entry()) == "node-0-0 was killed by SIGKILL (exit code 137, PreemptionByScheduler)"


def test_a_pod_failed_by_its_deletion_is_not_a_failed_pod() -> None:
    """What the elastic re-creation counts: the kubelet marks a deleted pod Failed after a non-zero exit (torchrun
    1 and a shell 143 on SIGTERM); only a pod that failed on its own, or was evicted or preempted, is a failure."""
    deleting = {"deletionTimestamp": "2026-01-01T00:00:40Z", "deletionGracePeriodSeconds": 30}  # asked at 00:10
    for code in (1, 143):
        stopped = pod(container(state={"terminated": term(code, at="2026-01-01T00:00:12Z")}), phase="Failed",
                      **deleting)  # fmt: skip
        assert pf.failed_by_deletion(stopped)
    before = pod(container(state={"terminated": term(1, at=T0)}), phase="Failed", **deleting)
    assert not pf.failed_by_deletion(before)  # it had failed before anyone deleted it
    evicted = pod(container(state={"terminated": term(137, at="2026-01-01T00:00:12Z")}), phase="Failed", **deleting)
    disruption = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI"}
    evicted["status"]["conditions"] = [disruption]
    assert not pf.failed_by_deletion(evicted)
    assert not pf.failed_by_deletion(pod(container(state={"terminated": term(1)}), phase="Failed"))  # not deleted


def test_a_pod_that_failed_as_a_whole() -> None:
    evicted = pod(phase="Failed")
    evicted["status"].update(reason="Evicted", message="The node was low on resource: memory.")
    [f] = pf.pod_failures(evicted)
    assert (f.container, f.exit_code, f.reason) == ("", None, "Evicted")
    assert pf.summary(f.entry()) == "node-0-0 failed: Evicted: The node was low on resource: memory."


def test_init_containers_and_sidecars_are_named() -> None:
    p = pod(container("sidecar", state={"terminated": term(2)}))
    p["status"]["initContainerStatuses"] = [container("fetch", state={"terminated": term(1)})]
    texts = [pf.summary(f.entry()) for f in pf.pod_failures(p)]
    assert texts == [
        "node-0-0 (container fetch) exited with code 1 (Error)",
        "node-0-0 (container sidecar) exited with code 2 (Error)",
    ]


def test_a_termination_message_is_kept_short() -> None:
    [f] = pf.pod_failures(pod(container(state={"terminated": term(1, message="x" * 5000)})))
    assert len(f.message) == pf.MESSAGE_CHARS and f.message.endswith("...")


def test_log_tail_keeps_the_last_lines_and_bytes() -> None:
    text = "".join(f"line {i}\n" for i in range(100))
    assert pf.log_tail(text).splitlines() == [f"line {i}" for i in range(90, 100)]
    runaway = "start" + "y" * 10_000
    cut = pf.log_tail(runaway)
    assert len(cut.encode()) <= pf.LOG_BYTES and cut.startswith("...") and cut.endswith("y")
    assert pf.log_tail("") == ""


def _entry(step: str, code: int, **extra: Any) -> dict[str, Any]:
    return {"step": step, "pod": f"job-{step}-x", "container": "node", "exitCode": code, "reason": "Error",
            "restarts": 0, "failures": 1, "lastFailureTime": T1, **extra}  # fmt: skip


def test_the_failed_message_names_the_step_the_job_and_the_lines() -> None:
    entries = [_entry("node-0-0", 1), _entry("node-1-0", 3, restarts=6, logTail="Traceback\nValueError: boom")]
    job = pf.JobFailure("job-node-1", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
    js = "jobset failed due to one or more job failures (first failed job: job-node-1)"
    msg = pf.failed_message(js, entries, "job", job)
    assert msg == (
        "node-1-0 exited with code 3 (Error) after 6 restarts; "
        "Job job-node-1: BackoffLimitExceeded: Job has reached the specified backoff limit; " + js + "\n"
        "Last log lines of node-1-0 (pod job-node-1-0-x, container node):\nTraceback\nValueError: boom"
    )
    head, header, lines = pf.split_message(msg)
    assert head.startswith("node-1-0 exited with code 3") and "\n" not in head
    assert header == {"step": "node-1-0", "pod": "job-node-1-0-x", "container": "node"}
    assert lines == ["Traceback", "ValueError: boom"]
    # Without a Job or JobSet hint, the first step to fail is named; with nothing recorded, JobSet's message.
    assert pf.failed_message("jobset failed", entries, "job", None).startswith("node-0-0 exited with code 1")
    assert pf.failed_message("jobset failed", [], "job", None) == "jobset failed"


def test_a_recomposed_message_keeps_lines_the_record_no_longer_has() -> None:
    with_lines = pf.failed_message("js", [_entry("node-0-0", 3, logTail="boom")], "job", None)
    again = pf.failed_message("js", [_entry("node-0-0", 3)], "job", None, previous_message=with_lines)
    assert again == with_lines


def test_failed_job_prefers_the_one_jobset_names() -> None:
    def job(name: str, at: str, reason: str) -> dict[str, Any]:
        cond = {"type": "Failed", "status": "True", "reason": reason, "message": "m", "lastTransitionTime": at}
        return {"metadata": {"name": name}, "status": {"conditions": [cond]}}

    jobs = [job("job-node-1", T2, "DeadlineExceeded"), job("job-node-0", T1, "BackoffLimitExceeded"),
            {"metadata": {"name": "job-node-2"}, "status": {}}]  # fmt: skip
    assert pf.failed_job(jobs, "x (first failed job: job-node-1)") == pf.JobFailure(
        "job-node-1", "DeadlineExceeded", "m"
    )
    assert pf.failed_job(jobs, "x").name == "job-node-0"  # type: ignore[union-attr]
    assert pf.failed_job([], "x") is None


def test_event_messages_fit_an_event() -> None:
    entry = _entry("node-0-0", 3, logTail="\n".join("z" * 200 for _ in range(10)))
    text = pf.event_message(entry, suppressed=2)
    assert len(text) <= 950
    assert text.startswith("node-0-0 exited with code 3 (Error) (pod job-node-0-0-x); 2 more pod failures not reported")
    assert text.endswith("z")


def test_states_on_a_cluster_say_what_failed() -> None:
    message = "node-0-0 exited with code 3\nLast log lines of node-0-0 (pod p, container node):\nboom"
    failed = StateView("Failed", "FailedJobs", message)
    assert pf.with_failures(failed, None) == StateView("Failed", "FailedJobs", "node-0-0 exited with code 3")
    running = StateView("Running", "", "1/1 trainer pods running")
    status = {"podFailures": [_entry("node-0-0", 3, restarts=4), _entry("node-1-0", 1, lastFailureTime=T0)]}
    assert pf.with_failures(running, status) == StateView(
        "Running", "PodFailures", "node-0-0 exited with code 3 (Error) after 4 restarts (and 1 more step with failures)"
    )
    assert pf.with_failures(running, {}) == running
    assert pf.recorded({"podFailures": "garbage"}) == []
