"""The operator next to Kueue, against the fake API server. The test plays Kueue's part: its JobSet webhook and
admission (suspend/unsuspend the JobSet), its Workloads, and its TrainJob integration (suspend the TrainJob)."""

from __future__ import annotations

from typing import Any

from kubetrain.k8s.client import resources as r
from kubetrain.k8s.operator.queueing import ANNOTATION_SUSPEND_APPLIED
from tests.k8s.helpers import operator_env, run, trainjob, wait_for

JS = "jobset.x-k8s.io"
QUEUE = "kueue.x-k8s.io/queue-name"


def queued_trainjob(name: str, queue: str = "team-a", **spec: Any) -> dict[str, Any]:
    tj = trainjob(name, **spec)
    tj["metadata"]["labels"] = {QUEUE: queue, "kueue.x-k8s.io/priority-class": "high", "team": "a"}
    return tj


def suspended_condition(env, name: str) -> dict[str, Any] | None:
    conds = (env.get("trainjobs", name).get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Suspended"), None)


async def kueue_sets_suspend(env, name: str, suspend: bool) -> None:
    await env.client.merge_patch(r.JOBSET, name, "default", {"spec": {"suspend": suspend}})


def workload_for(jobset: dict[str, Any], active: bool = True) -> dict[str, Any]:
    meta = jobset["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"jobset-{meta['name']}-1a2b3",
            "namespace": meta["namespace"],
            "labels": {"kueue.x-k8s.io/job-uid": meta["uid"]},
        },
        "spec": {"active": active, "queueName": "team-a", "podSets": []},
    }


def test_kueue_labels_go_to_the_jobset_and_the_operator_never_resumes_what_kueue_holds() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            await env.client.create(queued_trainjob("job"))
            js = await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            labels = js["metadata"].get("labels") or {}
            assert labels[QUEUE] == "team-a" and labels["kueue.x-k8s.io/priority-class"] == "high"
            assert "team" not in labels  # only Kueue's labels go on
            assert js["spec"]["suspend"] is False
            assert js["metadata"]["annotations"][ANNOTATION_SUSPEND_APPLIED] == "false"
            # Kueue's webhook/controller suspends it: the TrainJob shows why, the JobSet stays suspended.
            await kueue_sets_suspend(env, "job", True)
            cond = await wait_for(lambda: suspended_condition(env, "job"), what="Suspended")
            assert (cond["status"], cond["reason"]) == ("True", "Queued")
            assert 'LocalQueue "team-a"' in cond["message"]
            # More reconciles (a label change) do not flip it back.
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"metadata": {"labels": {"poke": "1"}}})
            await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0, what="idle queue")
            assert env.get("jobsets", "job", group=JS)["spec"]["suspend"] is True
            # Admission: Kueue unsuspends; the TrainJob is Resumed. Preemption: suspended again, then readmitted.
            for suspend, status in ((False, "False"), (True, "True"), (False, "False")):
                await kueue_sets_suspend(env, "job", suspend)
                await wait_for(lambda s=status: (suspended_condition(env, "job") or {}).get("status") == s)
                assert env.get("jobsets", "job", group=JS)["spec"]["suspend"] is suspend
            assert suspended_condition(env, "job")["reason"] == "Resumed"

    run(body)


def test_suspending_a_kueue_queued_trainjob_deactivates_its_workload_and_resume_hands_it_back() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            await env.client.create(queued_trainjob("job"))
            js = await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            await env.client.create(workload_for(js))
            await kueue_sets_suspend(env, "job", False)  # admitted and running
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": True}})
            wl = await wait_for(
                lambda: (w := env.get("workloads", "jobset-job-1a2b3", group="kueue.x-k8s.io"))["spec"]["active"]
                is False
                and w,
                what="Workload deactivated",
            )
            assert wl["spec"]["active"] is False
            js = await wait_for(
                lambda: (j := env.get("jobsets", "job", group=JS))["spec"]["suspend"] is True and j,
                what="JobSet suspended",
            )
            assert js["metadata"]["annotations"][ANNOTATION_SUSPEND_APPLIED] == "true"
            cond = await wait_for(lambda: suspended_condition(env, "job"), what="Suspended")
            assert (cond["status"], cond["reason"]) == ("True", "Suspended")
            # Resume: the Workload is active again and Kueue, not the operator, decides when the JobSet runs.
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": False}})
            await wait_for(
                lambda: env.get("workloads", "jobset-job-1a2b3", group="kueue.x-k8s.io")["spec"]["active"],
                what="Workload reactivated",
            )
            await wait_for(
                lambda: env.get("jobsets", "job", group=JS)["metadata"]["annotations"][ANNOTATION_SUSPEND_APPLIED]
                == "false",
                what="suspend handed to Kueue",
            )
            assert env.get("jobsets", "job", group=JS)["spec"]["suspend"] is True
            cond = await wait_for(
                lambda: (c := suspended_condition(env, "job")) and c["reason"] == "Queued" and c, what="Queued"
            )
            await kueue_sets_suspend(env, "job", False)  # readmitted
            await wait_for(lambda: suspended_condition(env, "job")["reason"] == "Resumed", what="Resumed")

    run(body)


def test_with_kueues_trainjob_integration_the_operator_resumes_the_jobset_itself() -> None:
    """Kueue suspends the TrainJob and unsuspends it on admission; the JobSet (no Workload of its own) follows."""

    async def body() -> None:
        async with operator_env() as (env, _):
            await env.client.create(queued_trainjob("job", suspend=True))
            js = await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            assert js["spec"]["suspend"] is True
            assert js["metadata"]["annotations"][ANNOTATION_SUSPEND_APPLIED] == "true"
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": False}})
            await wait_for(lambda: env.get("jobsets", "job", group=JS)["spec"]["suspend"] is False, what="resume")
            await wait_for(lambda: suspended_condition(env, "job")["reason"] == "Resumed", what="Resumed")

    run(body)


def test_a_suspended_jobset_from_an_operator_that_did_not_record_its_intent_is_resumed_as_upstream() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            patch = {"metadata": {"annotations": {ANNOTATION_SUSPEND_APPLIED: None}}, "spec": {"suspend": True}}
            await env.client.merge_patch(r.JOBSET, "job", "default", patch)
            await wait_for(lambda: env.get("jobsets", "job", group=JS)["spec"]["suspend"] is False, what="resume")

    run(body)


def test_with_kueues_trainjob_integration_the_resume_looks_for_no_jobset_workload() -> None:
    """Kueue's TrainJob integration marks the TrainJob with its runtime patch; the JobSet then has no Workload, and
    looking for one (a list call) would sit between Kueue's admission and the pods (bench/kueue.py)."""

    async def body() -> None:
        async with operator_env() as (env, _):
            tj = queued_trainjob("job", suspend=True)
            tj["spec"]["runtimePatches"] = [{"manager": "kueue.x-k8s.io/manager"}]
            await env.client.create(tj)
            js = await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            assert js["metadata"]["labels"][QUEUE] == "team-a"
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": False}})
            await wait_for(lambda: env.get("jobsets", "job", group=JS)["spec"]["suspend"] is False, what="resume")
            assert not [p for _, p in env.api.requests if "/workloads" in p]
            # Without the integration's patch (Kueue's JobSet integration), the same resume looks for one.
            await env.client.create(queued_trainjob("other", suspend=True))
            await wait_for(lambda: env.find("jobsets", "other", group=JS), what="JobSet")
            await env.client.merge_patch(r.TRAINJOB, "other", "default", {"spec": {"suspend": False}})
            await wait_for(lambda: [p for _, p in env.api.requests if "/workloads" in p], what="workload list")

    run(body)
