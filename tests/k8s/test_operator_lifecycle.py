"""The operator end to end against the fake API server: create, status, suspend/resume, finish, delete."""

from __future__ import annotations

import datetime as dt

import yaml

from kubetrain.k8s.client import resources as r
from tests.k8s.helpers import API, fake_env, operator_env, run, running_operator, torch_runtime, trainjob, wait_for

JS = "jobset.x-k8s.io"


async def set_jobset_status(env, name: str, status: dict) -> None:
    await env.client.patch_status(r.JOBSET, name, "default", status)


def test_create_makes_one_jobset_and_snapshot_owned_by_the_trainjob() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            tj = await env.client.create(trainjob("job", trainer={"numNodes": 2}))
            js = await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            uid = tj["metadata"]["uid"]
            ref = js["metadata"]["ownerReferences"][0]
            assert ref == {
                "apiVersion": API,
                "kind": "TrainJob",
                "name": "job",
                "uid": uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }
            assert js["spec"]["suspend"] is False
            snap = env.get("configmaps", "job-runtime-snapshot", group="")
            assert yaml.safe_load(snap["data"]["runtime"])["metadata"]["name"] == "torch-distributed"
            assert snap["metadata"]["ownerReferences"][0]["uid"] == uid
            managers = {m["manager"] for m in js["metadata"]["managedFields"]}
            assert managers == {"kubetrain"}
            assert len(env.items("jobsets", JS)) == 1
            # Never suspended, not finished: upstream writes no condition at all.
            assert "conditions" not in (env.get("trainjobs", "job").get("status") or {})

    run(body)


def test_the_runtime_snapshot_is_not_on_the_way_to_the_pods() -> None:
    """The JobSet is applied beside the snapshot, not after it: a snapshot create that keeps failing does not hold
    the JobSet back, and is retried until it is there."""

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            env.api.inject("POST", r"/namespaces/default/configmaps(\?|$)", 500, times=10**6)
            async with running_operator(env):
                await env.client.create(trainjob("job", trainer={"numNodes": 2}))
                await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
                assert env.find("configmaps", "job-runtime-snapshot", group="") is None
                env.api.faults.clear()
                snap = await wait_for(
                    lambda: env.find("configmaps", "job-runtime-snapshot", group=""), what="the snapshot, retried"
                )
                assert yaml.safe_load(snap["data"]["runtime"])["metadata"]["name"] == "torch-distributed"
                assert len(env.items("jobsets", JS)) == 1

    run(body)


def test_jobset_completed_and_failed_become_trainjob_conditions() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            for name in ("ok", "bad"):
                await env.client.create(trainjob(name))
            await wait_for(lambda: len(env.items("jobsets", JS)) == 2, what="JobSets")
            await set_jobset_status(
                env,
                "ok",
                {
                    "conditions": [
                        {
                            "type": "Completed",
                            "status": "True",
                            "reason": "AllJobsCompleted",
                            "message": "jobset completed successfully",
                            "lastTransitionTime": "2026-01-01T00:00:00Z",
                        }
                    ],
                    "replicatedJobsStatus": [{"name": "node", "succeeded": 1}],
                },
            )
            failed = {
                "type": "Failed",
                "status": "True",
                "reason": "FailedJobs",
                "message": "jobset failed due to one or more job failures",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
            await set_jobset_status(env, "bad", {"conditions": [failed]})

            def cond(name: str, type_: str):
                st = env.get("trainjobs", name).get("status") or {}
                return next((c for c in st.get("conditions") or [] if c["type"] == type_), None)

            done = await wait_for(lambda: cond("ok", "Complete"), what="Complete")
            assert (done["status"], done["reason"], done["message"]) == (
                "True",
                "AllJobsCompleted",
                "jobset completed successfully",
            )
            assert env.get("trainjobs", "ok")["status"]["jobsStatus"] == [
                {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
            ]
            bad = await wait_for(lambda: cond("bad", "Failed"), what="Failed")
            assert (bad["reason"], bad["message"]) == (
                "FailedJobs",
                "jobset failed due to one or more job failures",
            )

    run(body)


def test_finished_trainjob_is_never_recreated_after_its_jobset_is_gone() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "m"}
            await set_jobset_status(env, "job", {"conditions": [done]})
            await wait_for(lambda: env.get("trainjobs", "job").get("status", {}).get("conditions"), what="Complete")
            await env.client.delete(r.JOBSET, "job", "default")  # e.g. JobSet's own TTL
            # Trigger more reconciles, then wait until the queue is idle.
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"metadata": {"labels": {"poke": "1"}}})
            await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0, what="idle queue")
            await wait_for(lambda: op.metrics.reconcile_total.labels("trainjob", "success")._value.get() >= 3)
            assert env.find("jobsets", "job", group=JS) is None
            conds = env.get("trainjobs", "job")["status"]["conditions"]
            assert [c["type"] for c in conds] == ["Complete"]

    run(body)


def test_failed_trainjob_stays_failed_and_its_jobset_is_never_recreated() -> None:
    """Upstream #3891: a TrainJob whose JobSet failed after spending its restarts stays Failed; with that JobSet
    gone, no new one (with a fresh restart budget) is made, however often the TrainJob is reconciled."""

    async def body() -> None:
        async with operator_env() as (env, op):
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            failed = {"type": "Failed", "status": "True", "reason": "ReachedMaxRestarts",
                      "message": "jobset failed due to reaching max number of restarts",
                      "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip
            await set_jobset_status(env, "job", {"restarts": 3, "conditions": [failed]})

            def failed_cond() -> dict | None:
                conds = (env.get("trainjobs", "job").get("status") or {}).get("conditions") or []
                return next((c for c in conds if c["type"] == "Failed"), None)

            first = await wait_for(failed_cond, what="Failed")
            await env.client.delete(r.JOBSET, "job", "default")  # e.g. JobSet's own TTL, or a person
            for i in range(3):  # any change to the TrainJob reconciles it again
                await env.client.merge_patch(r.TRAINJOB, "job", "default", {"metadata": {"labels": {"poke": str(i)}}})
            await wait_for(lambda: ((op.trainjobs.get("default", "job") or {}).get("metadata", {}).get("labels") or {})
                           .get("poke") == "2" and len(op.queue) == 0 and op.queue.processing == 0,
                           what="the last change reconciled")  # fmt: skip
            assert env.find("jobsets", "job", group=JS) is None
            assert failed_cond() == first
            assert (first["status"], first["reason"]) == ("True", "ReachedMaxRestarts")

    run(body)


def test_suspend_and_resume_reapply_the_jobset_with_conditions() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": True}})
            await wait_for(lambda: env.get("jobsets", "job", group=JS)["spec"]["suspend"] is True, what="suspend")

            def suspended():
                conds = (env.get("trainjobs", "job").get("status") or {}).get("conditions") or []
                return next((c for c in conds if c["type"] == "Suspended"), None)

            c1 = await wait_for(suspended, what="Suspended condition")
            assert (c1["status"], c1["reason"], c1["message"]) == (
                "True",
                "Suspended",
                "TrainJob is suspended",
            )
            await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": False}})
            await wait_for(lambda: env.get("jobsets", "job", group=JS)["spec"]["suspend"] is False, what="resume")
            c2 = await wait_for(lambda: (c := suspended()) and c["status"] == "False" and c, what="Resumed")
            assert (c2["reason"], c2["message"]) == ("Resumed", "TrainJob is resumed")

    run(body)


def test_runtime_edit_does_not_touch_a_running_or_resumed_job() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime(image="old:1"))
            async with running_operator(env):
                await env.client.create(trainjob("job"))
                js = await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
                rv = js["metadata"]["resourceVersion"]
                await env.client.apply(torch_runtime(image="new:2"))
                await env.client.merge_patch(r.TRAINJOB, "job", "default", {"metadata": {"labels": {"x": "y"}}})
                await env.client.create(trainjob("later"))
                later = await wait_for(lambda: env.find("jobsets", "later", group=JS), what="later JobSet")
                assert _image(later) == "new:2"
                # The running JobSet was not re-applied.
                assert env.get("jobsets", "job", group=JS)["metadata"]["resourceVersion"] == rv
                # Suspend + resume re-apply it, still from the snapshot.
                await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": True}})
                await wait_for(lambda: env.get("jobsets", "job", group=JS)["spec"]["suspend"] is True)
                await env.client.merge_patch(r.TRAINJOB, "job", "default", {"spec": {"suspend": False}})
                await wait_for(lambda: env.get("jobsets", "job", group=JS)["spec"]["suspend"] is False)
                assert _image(env.get("jobsets", "job", group=JS)) == "old:1"

    run(body)


def _image(js: dict) -> str:
    rjob = js["spec"]["replicatedJobs"][0]
    return rjob["template"]["spec"]["template"]["spec"]["containers"][0]["image"]


def test_delete_trainjob_collects_children() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet")
            await env.client.delete(r.TRAINJOB, "job", "default")
            await wait_for(lambda: env.find("jobsets", "job", group=JS) is None, what="JobSet collected")
            assert env.find("configmaps", "job-runtime-snapshot", group="") is None

    run(body)


def test_managed_by_another_controller_is_left_alone() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            await env.client.create(trainjob("mk", managedBy="kueue.x-k8s.io/multikueue"))
            await env.client.create(trainjob("ours"))
            await wait_for(lambda: env.find("jobsets", "ours", group=JS), what="our JobSet")
            await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0)
            assert env.find("jobsets", "mk", group=JS) is None
            assert "status" not in env.get("trainjobs", "mk")

    run(body)


def test_active_deadline_fails_the_job_and_deletes_the_jobset() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
            async with running_operator(env, clock=lambda: later):
                await env.client.create(trainjob("job", activeDeadlineSeconds=60))

                def failed():
                    conds = (env.get("trainjobs", "job").get("status") or {}).get("conditions") or []
                    return next((c for c in conds if c["type"] == "Failed"), None)

                cond = await wait_for(failed, what="DeadlineExceeded")
                assert (cond["reason"], cond["message"]) == (
                    "DeadlineExceeded",
                    "TrainJob exceeded its active deadline",
                )
                await wait_for(lambda: env.find("jobsets", "job", group=JS) is None, what="JobSet deleted")

    run(body)


def test_tensorflow_trainjob_gets_a_jobset_with_tf_config() -> None:
    from kubetrain.runtimes import builtin_runtime

    async def body() -> None:
        async with fake_env() as env:
            runtime = builtin_runtime("tensorflow-distributed")
            assert runtime is not None
            await env.client.create(runtime.to_wire())
            async with running_operator(env):
                await env.client.create(trainjob("tf", runtime="tensorflow-distributed", trainer={"numNodes": 2}))
                js = await wait_for(lambda: env.find("jobsets", "tf", group=JS), what="JobSet")
                pod = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
                env_vars = {e["name"]: e for e in pod["containers"][0]["env"]}
                assert env_vars["TF_CONFIG"]["value"] == (
                    '{"cluster":{"worker":["tf-node-0-0.tf:29500","tf-node-0-1.tf:29500"]},'
                    '"task":{"type":"worker","index":$(TF_TASK_INDEX)}}'
                )
                assert js["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2

    run(body)
