"""Failures a user can read, even after the pods are gone: the operator's pod watch against the fake API server.

The test plays the kubelet and the Job and JobSet controllers: it creates the pods a JobSet would get, writes
their statuses and logs, deletes them as the Job controller does past its backoffLimit, and fails the JobSet.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from kubetrain.k8s.client import resources as r
from kubetrain.k8s.pods import failures as pf
from tests.k8s.helpers import Env, fake_env, operator_env, run, running_operator, torch_runtime, trainjob, wait_for
from tests.k8s.kubelet import crash_loop, pod_manifest, running, terminated

JS = "jobset.x-k8s.io"


def stamp(seconds: int) -> str:
    base = dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=seconds)
    return base.strftime("%Y-%m-%dT%H:%M:%SZ")


def create_pod(env: Env, job: str, job_index: int = 0, suffix: str = "abcde", status: Any = None) -> str:
    manifest = pod_manifest(job, "node", job_index, 0, suffix=suffix)
    created = env.api.store.create("", "pods", "default", manifest, "test")
    name = str(created["metadata"]["name"])
    if status is not None:
        set_status(env, name, status)
    return name


def set_status(env: Env, pod: str, status: dict[str, Any]) -> None:
    live = env.api.store.get("", "pods", "default", pod)
    live["status"] = status
    env.api.store.replace("", "pods", "default", pod, live, "kubelet", "status")


def exited(code: int, at: str, reason: str = "Error") -> dict[str, Any]:
    status = terminated(code, reason=reason)
    status["containerStatuses"][0]["state"]["terminated"]["finishedAt"] = at
    return status


def status_of(env: Env, name: str = "job") -> dict[str, Any]:
    return env.get("trainjobs", name).get("status") or {}


def failures(env: Env, name: str = "job") -> list[dict[str, Any]]:
    return pf.recorded(status_of(env, name))


def pod_failed_events(env: Env, name: str = "job") -> list[dict[str, Any]]:
    about = ("TrainJob", name)
    return [
        e
        for e in env.items("events", group="")
        if e["reason"] == "PodFailed" and (e["involvedObject"]["kind"], e["involvedObject"]["name"]) == about
    ]


def condition(env: Env, type_: str, name: str = "job") -> dict[str, Any] | None:
    return next((x for x in status_of(env, name).get("conditions") or [] if x["type"] == type_), None)


async def fail_jobset(env: Env, name: str = "job", job: str | None = None, at: str = stamp(100)) -> None:
    first = f" (first failed job: {job})" if job else ""
    cond = {"type": "Failed", "status": "True", "reason": "FailedJobs", "lastTransitionTime": at,
            "message": f"jobset failed due to one or more job failures{first}"}  # fmt: skip
    await env.client.patch_status(r.JOBSET, name, "default", {"conditions": [cond]})


def failed_job(env: Env, trainjob_name: str, name: str, reason: str, message: str) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": name, "namespace": "default",
                        "labels": {"jobset.sigs.k8s.io/jobset-name": trainjob_name}},
           "spec": {"template": {"spec": {"containers": [{"name": "node", "image": "x"}]}}}}  # fmt: skip
    created = env.api.store.create("batch", "jobs", "default", job, "test")
    created["status"] = {"conditions": [{"type": "Failed", "status": "True", "reason": reason, "message": message,
                                         "lastTransitionTime": stamp(90)}]}  # fmt: skip
    env.api.store.replace("batch", "jobs", "default", name, created, "job-controller", "status")


async def started_job(env: Env, name: str = "job", **spec: Any) -> None:
    await env.client.create(trainjob(name, **spec))
    await wait_for(lambda: env.find("jobsets", name, group=JS), what="JobSet")


def test_an_exit_code_is_recorded_with_its_lines_and_survives_the_pod() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            await started_job(env)
            pod = create_pod(env, "job", status=running())
            lines = "epoch 1\nTraceback (most recent call last):\nValueError: boom"
            env.api.pod_logs.write("default", pod, lines + "\n")
            set_status(env, pod, exited(3, stamp(10)))
            [entry] = await wait_for(lambda: [e for e in failures(env) if e.get("logTail")], what="log lines")
            assert entry == {"step": "node-0-0", "pod": pod, "container": "node", "exitCode": 3,
                             "reason": "Error", "restarts": 0, "failures": 1, "lastFailureTime": stamp(10),
                             "logTail": lines}  # fmt: skip
            [event] = await wait_for(lambda: pod_failed_events(env), what="PodFailed event")
            assert event["type"] == "Warning"
            assert event["message"].startswith(f"node-0-0 exited with code 3 (Error) (pod {pod})")
            assert event["message"].endswith("ValueError: boom")
            # A running TrainJob gets no condition from this: the SDK would stop reporting Running.
            assert "conditions" not in status_of(env)

            # The Job controller gives up (BackoffLimitExceeded) and deletes the pod, then JobSet fails.
            backoff = "Job has reached the specified backoff limit"
            failed_job(env, "job", "job-node-0", "BackoffLimitExceeded", backoff)
            env.api.store.delete("", "pods", "default", pod)
            await fail_jobset(env, job="job-node-0")
            failed = await wait_for(lambda: condition(env, "Failed"), what="Failed")
            assert failed["reason"] == "FailedJobs"
            assert failed["message"] == (
                "node-0-0 exited with code 3 (Error); "
                "Job job-node-0: BackoffLimitExceeded: Job has reached the specified backoff limit; "
                "jobset failed due to one or more job failures (first failed job: job-node-0)\n"
                f"Last log lines of node-0-0 (pod {pod}, container node):\n"
                "epoch 1\nTraceback (most recent call last):\nValueError: boom"
            )
            # Finished: the record keeps the facts, the lines live in the Failed message only.
            await wait_for(lambda: not any("logTail" in e for e in failures(env)), what="lines dropped")
            assert failures(env)[0]["exitCode"] == 3
            # ... and the operator holds nothing more for it.
            await wait_for(lambda: not op.failures.records, what="record released")  # type: ignore[union-attr]
            # A pod torn down after the job failed is a consequence, not a cause.
            late = create_pod(env, "job", job_index=1, suffix="zzzzz", status=exited(1, stamp(200)))
            await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0)
            assert all(e["pod"] != late for e in failures(env))
            assert len(pod_failed_events(env)) == 1

    run(body)


def test_signals_and_oomkilled() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            await started_job(env, trainer={"numNodes": 2})
            segv = create_pod(env, "job", 0, status=exited(139, stamp(10)))
            oom = create_pod(env, "job", 1, status=exited(137, stamp(11), reason="OOMKilled"))
            entries = await wait_for(lambda: len(failures(env)) == 2 and failures(env), what="two failures")
            by_pod = {e["pod"]: e for e in entries}
            assert (by_pod[segv]["signal"], by_pod[segv]["exitCode"]) == ("SIGSEGV", 139)
            assert (by_pod[oom]["signal"], by_pod[oom]["reason"]) == ("SIGKILL", "OOMKilled")
            await fail_jobset(env, job="job-node-1")
            failed = await wait_for(lambda: condition(env, "Failed"), what="Failed")
            assert failed["message"].startswith("node-1-0 was OOMKilled (exit code 137); jobset failed")
            texts = sorted(e["message"].split(" (pod")[0] for e in await wait_for(
                lambda: len(pod_failed_events(env)) == 2 and pod_failed_events(env)))  # fmt: skip
            assert texts == [
                "node-0-0 was killed by SIGSEGV (exit code 139)",
                "node-1-0 was OOMKilled (exit code 137)",
            ]

    run(body)


def test_a_crash_loop_shows_its_restarts_and_exit_code_while_it_runs() -> None:
    async def body() -> None:
        async with fake_env() as env:
            env.api.record = True
            await env.client.create(torch_runtime())
            async with running_operator(env):
                await started_job(env)
                pod = create_pod(env, "job", status=running())
                for restart in (1, 2, 3):
                    env.api.pod_logs.write("default", pod, f"run {restart}\nRuntimeError: bad batch\n")
                    env.api.pod_logs.restart("default", pod)  # the kubelet starts it again
                    set_status(env, pod, crash_loop(restart, 3, stamp(10 * restart)))
                    entry = await wait_for(
                        lambda r=restart: [e for e in failures(env) if e["restarts"] == r and e.get("logTail") == f"run {r}\nRuntimeError: bad batch"],  # noqa: E501
                        what=f"restart {restart}",
                    )
                    assert entry[0]["failures"] == restart
                    assert entry[0]["exitCode"] == 3
                # The previous container's log was read (the current one has only just started).
                path = f"/api/v1/namespaces/default/pods/{pod}/log"
                reads = [p for m, p in env.api.requests if m == "GET" and p.startswith(path)]
                assert len(reads) == 3 and all("previous=true" in p for p in reads)
                # A restart count that moves without a new failure (the kubelet's own bookkeeping) shows too.
                again = crash_loop(4, 3, stamp(30))
                set_status(env, pod, again)
                await wait_for(lambda: failures(env)[0]["restarts"] == 4, what="restarts 4")
                assert failures(env)[0]["failures"] == 3
                assert len(pod_failed_events(env)) == 3
                assert "conditions" not in status_of(env)

    run(body)


def test_a_restarted_operator_neither_forgets_nor_repeats() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            async with running_operator(env):
                await started_job(env)
                pod = create_pod(env, "job", status=crash_loop(1, 3, stamp(10)))
                await wait_for(lambda: failures(env), what="failure")
                await wait_for(lambda: pod_failed_events(env), what="event")
            async with running_operator(env) as op:
                await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0)
                assert len(pod_failed_events(env)) == 1  # the same run, seen again by a new list: not new
                set_status(env, pod, crash_loop(2, 3, stamp(20)))
                await wait_for(lambda: failures(env)[0]["failures"] == 2, what="second failure")
                await wait_for(lambda: len(pod_failed_events(env)) == 2, what="second event")

    run(body)


def test_many_failing_pods_give_a_bounded_record() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            quick = {"failure_event_burst": 3, "failure_event_interval": 3600, "failure_log_wait": 0.0}
            async with running_operator(env, **quick) as op:
                recorder = op.failures
                assert recorder is not None
                await started_job(env, trainer={"numNodes": 20})
                pods = [create_pod(env, "job", i, status=running()) for i in range(20)]
                for i, pod in enumerate(pods):
                    env.api.pod_logs.write("default", pod, "x" * 5000 + "\n" + f"node {i} failed\n" * 50)
                    set_status(env, pod, exited(1, stamp(10 + i)))
                # One pod failing a hundred times: one entry, counted.
                for n in range(1, 101):
                    set_status(env, pods[0], crash_loop(n, 1, stamp(100 + n)))
                await wait_for(lambda: failures(env) and failures(env)[0]["failures"] == 101, what="101 failures")
                await wait_for(lambda: recorder.reports.empty() and not recorder.records[("default", "job")].pending)
                entries = failures(env)
                assert len(entries) == pf.MAX_ENTRIES
                assert [e["step"] for e in entries] == ["node-0-0", "node-1-0", "node-2-0", "node-3-0"]
                for e in entries:
                    assert len(e.get("logTail", "").splitlines()) <= pf.LOG_LINES
                    assert len(e.get("logTail", "").encode()) <= pf.LOG_BYTES
                rec = recorder.records[("default", "job")]
                assert len(rec.fingerprints) <= 64
                assert len(pod_failed_events(env)) == 3  # the burst, then one per hour
                assert rec.suppressed == 20 + 100 - 3
                # Deleting the TrainJob drops its record.
                await env.client.delete(r.TRAINJOB, "job", "default")
                await wait_for(lambda: not recorder.records, what="record dropped")

    run(body)


def test_log_reads_are_rate_limited() -> None:
    async def body() -> None:
        async with fake_env() as env:
            env.api.record = True
            await env.client.create(torch_runtime())
            settings = {"failure_log_qps": 0.001, "failure_log_burst": 2, "failure_log_wait": 0.0}
            async with running_operator(env, **settings) as op:
                recorder = op.failures
                assert recorder is not None
                await started_job(env, trainer={"numNodes": 6})
                for i in range(6):
                    pod = create_pod(env, "job", i, status=running())
                    env.api.pod_logs.write("default", pod, f"node {i}\n")
                    set_status(env, pod, exited(1, stamp(i)))
                await wait_for(lambda: recorder.log_reads + recorder.log_reads_skipped == 6, what="six reports")
                reads = [p for m, p in env.api.requests if m == "GET" and "/log?" in p]
                assert (recorder.log_reads, recorder.log_reads_skipped, len(reads)) == (2, 4, 2)
                sample = op.metrics.registry.get_sample_value
                assert sample("kubetrain_pod_failure_log_reads_total", {"result": "skipped"}) == 4
                assert sample("kubetrain_pod_failure_log_reads_total", {"result": "read"}) == 2
                assert sample("kubetrain_pod_failures_total") == 6
                # Every failure is recorded all the same (up to the record's bound), with or without lines.
                await wait_for(lambda: len(failures(env)) == pf.MAX_ENTRIES, what="entries")
                assert sum(1 for e in failures(env) if e.get("logTail")) <= 2

    run(body)


def test_no_pod_watch_when_switched_off() -> None:
    async def body() -> None:
        async with fake_env() as env:
            env.api.record = True
            await env.client.create(torch_runtime())
            async with running_operator(env, pod_failures=False) as op:
                assert op.failures is None
                await started_job(env)
                create_pod(env, "job", status=exited(3, stamp(1)))
                await fail_jobset(env)
                failed = await wait_for(lambda: condition(env, "Failed"), what="Failed")
                assert failed["message"] == "jobset failed due to one or more job failures"
                assert not [p for _, p in env.api.requests if re.search(r"/(pods|jobs)(\?|/|$)", p)]

    run(body)
