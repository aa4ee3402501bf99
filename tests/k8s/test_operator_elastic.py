"""The operator and elastic TrainJobs: one HPA per TrainJob from elasticPolicy.metrics, a new numNodes reaching the
running JobSet (in place, or by re-creating it with the restart budget carried over), and the scale subresource's
status side (status.numNodes, status.selector)."""

from __future__ import annotations

import copy
from typing import Any

from kubetrain.k8s.client import resources as r
from tests.k8s.helpers import Env, fake_env, operator_env, run, running_operator, torch_runtime, trainjob, wait_for

CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
JOBSET = "jobset.x-k8s.io"


def elastic_runtime(name: str = "elastic", metrics: list[dict[str, Any]] | None = None, **policy: Any) -> dict:
    rt = torch_runtime(name)
    ep: dict[str, Any] = {"minNodes": 1, "maxNodes": 4, "maxRestarts": 3, **policy}
    if metrics:
        ep["metrics"] = metrics
    rt["spec"]["mlPolicy"] = {"torch": {"elasticPolicy": ep}}
    return rt


def node_job(env: Env, name: str) -> dict[str, Any]:
    js = env.get("jobsets", name, group=JOBSET)
    return next(rj for rj in js["spec"]["replicatedJobs"] if rj["name"] == "node")["template"]["spec"]


def test_hpa_per_trainjob_from_metrics_owned_by_it() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(elastic_runtime(metrics=[CPU]))
            await env.client.create(elastic_runtime("no-metrics"))
            async with running_operator(env):
                tj = await env.client.create(trainjob("auto", runtime="elastic", trainer={"numNodes": 2}))
                await env.client.create(trainjob("plain", runtime="no-metrics", trainer={"numNodes": 2}))
                hpa = await wait_for(lambda: env.find("horizontalpodautoscalers", "auto", group="autoscaling"),
                                     what="HPA")
                assert hpa["spec"] == {
                    "scaleTargetRef": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                                       "name": "auto"},
                    "minReplicas": 1,
                    "maxReplicas": 4,
                    "metrics": [CPU],
                }
                owner = hpa["metadata"]["ownerReferences"][0]
                assert (owner["kind"], owner["uid"], owner["controller"]) == ("TrainJob", tj["metadata"]["uid"], True)
                await wait_for(lambda: env.find("jobsets", "plain", group=JOBSET), what="plain JobSet")
                assert env.find("horizontalpodautoscalers", "plain", group="autoscaling") is None
                st = await wait_for(lambda: env.get("trainjobs", "auto").get("status", {}).get("numNodes") and
                                    env.get("trainjobs", "auto")["status"], what="status.numNodes")
                assert (st["numNodes"], st["selector"]) == (
                    2, "jobset.sigs.k8s.io/jobset-name=auto,jobset.sigs.k8s.io/replicatedjob-name=node"
                )
                # Deleting the TrainJob takes the HPA with it (ownerReference garbage collection).
                await env.client.delete(r.TRAINJOB, "auto", "default")
                await wait_for(lambda: env.find("horizontalpodautoscalers", "auto", group="autoscaling") is None,
                               what="HPA collected")

    run(body)


def test_num_nodes_change_resizes_the_running_jobset_in_place() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(elastic_runtime())
            async with running_operator(env):
                await env.client.create(trainjob("el", runtime="elastic", trainer={"numNodes": 2}))
                await wait_for(lambda: env.find("jobsets", "el", group=JOBSET), what="JobSet")
                uid = env.get("jobsets", "el", group=JOBSET)["metadata"]["uid"]
                template = node_job(env, "el")["template"]
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 3}}})
                await wait_for(lambda: node_job(env, "el").get("parallelism") == 3, what="parallelism 3")
                job = node_job(env, "el")
                assert (job["parallelism"], job["completions"]) == (3, 3)
                js = env.get("jobsets", "el", group=JOBSET)
                assert js["metadata"]["uid"] == uid  # the same JobSet: its pods keep running
                # The operator caches JobSets without pod templates; the PUT carried the whole JobSet anyway.
                assert job["template"] == template and template["spec"]["containers"]
                await wait_for(lambda: env.get("trainjobs", "el").get("status", {}).get("numNodes") == 3,
                               what="status.numNodes 3")
                assert "scaling" not in env.get("trainjobs", "el")["status"]
                reasons = [e["message"] for e in env.items("events", group="") if e["reason"] == "Scaled"]
                assert reasons == ["trainer nodes 2 -> 3: JobSet resized in place"]

    run(body)


def test_refused_resize_recreates_the_jobset_with_the_restart_budget_left() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(elastic_runtime(maxRestarts=5))
            async with running_operator(env):
                await env.client.create(trainjob("el", runtime="elastic", trainer={"numNodes": 2}))
                await wait_for(lambda: env.find("jobsets", "el", group=JOBSET), what="JobSet")
                first = env.get("jobsets", "el", group=JOBSET)
                assert node_job(env, "el")["backoffLimit"] == 5
                # The job ran a while: a Failed condition never came, the status has conditions to keep, two of its
                # trainer pods restarted containers and one failed outright.
                await env.client.patch_status(r.TRAINJOB, "el", "default", {
                    "conditions": [{"type": "Suspended", "status": "False", "reason": "Resumed",
                                    "message": "TrainJob is resumed", "lastTransitionTime": "2026-01-01T00:00:00Z"}]
                })
                for i, (phase, restarts) in enumerate([("Running", 1), ("Running", 1), ("Failed", 0)]):
                    pod = {
                        "apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"el-node-0-{i}", "namespace": "default", "labels": {
                            "jobset.sigs.k8s.io/jobset-name": "el", "jobset.sigs.k8s.io/replicatedjob-name": "node"}},
                        "spec": {"containers": [{"name": "node", "image": "x"}]},
                    }
                    await env.client.create(pod)
                    await env.client.patch_status(r.POD, pod["metadata"]["name"], "default", {
                        "phase": phase, "containerStatuses": [{"name": "node", "restartCount": restarts}]})
                # JobSet without its ElasticJobSet gate refuses a new parallelism (its webhook answers 422).
                env.api.inject("PUT", r"/jobsets/el(\?|$)", 422)
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 4}}})
                await wait_for(lambda: (env.find("jobsets", "el", group=JOBSET) or first)["metadata"]["uid"]
                               != first["metadata"]["uid"], what="a new JobSet")
                job = node_job(env, "el")
                assert (job["parallelism"], job["completions"]) == (4, 4)
                assert job["backoffLimit"] == 5 - 3  # two container restarts and one failed pod used
                st = env.get("trainjobs", "el")["status"]
                assert st["scaling"] == {"recreations": 1, "nodeFailures": 3, "jobSetRestarts": 0}
                assert [c["type"] for c in st["conditions"]] == ["Suspended"]  # kept
                await wait_for(lambda: env.get("trainjobs", "el")["status"].get("numNodes") == 4, what="numNodes 4")
                messages = [e["message"] for e in env.items("events", group="") if e["reason"] == "Scaled"]
                assert len(messages) == 1 and messages[0].startswith(
                    "trainer nodes 2 -> 4: re-creating the JobSet, which refused to resize in place (")
                assert messages[0].endswith("restart budget used so far: 3 node failures, 0 JobSet restarts")

    run(body)


def test_a_static_runtime_is_never_resized() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            await env.client.create(trainjob("st", trainer={"numNodes": 2}))
            await wait_for(lambda: env.find("jobsets", "st", group=JOBSET), what="JobSet")
            before = copy.deepcopy(env.get("jobsets", "st", group=JOBSET))
            # Without the webhook nothing stops the edit; the operator still leaves a static job alone.
            await env.client.merge_patch(r.TRAINJOB, "st", "default", {"spec": {"trainer": {"numNodes": 3}}})
            await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0, what="idle")
            after = env.get("jobsets", "st", group=JOBSET)
            assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
            assert "numNodes" not in env.get("trainjobs", "st").get("status", {})

    run(body)


KUBELET = "test.kubetrain.dev/kubelet"
"""A finalizer standing for the kubelet: the fake has none, so a deleted pod stays (``deletionTimestamp`` set)
until the test has written how its container ended and lets it go."""


async def node_pod(env: Env, job: str, index: int, restarts: int = 0, *, kubelet: bool = False) -> dict[str, Any]:
    """A running trainer pod of JobSet ``job`` (owned by it, so a foreground delete waits for it) whose container
    has restarted ``restarts`` times: failures the Job controller counts against backoffLimit."""
    js = env.get("jobsets", job, group=JOBSET)
    meta: dict[str, Any] = {
        "name": f"{job}-node-0-{index}-{js['metadata']['uid'][:5]}",
        "namespace": "default",
        "labels": {"jobset.sigs.k8s.io/jobset-name": job, "jobset.sigs.k8s.io/replicatedjob-name": "node"},
        "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": job,
                             "uid": js["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}],
    }  # fmt: skip
    if kubelet:
        meta["finalizers"] = [KUBELET]
    await env.client.create({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                            "spec": {"containers": [{"name": "node", "image": "x"}]}})  # fmt: skip
    return await env.client.patch_status(r.POD, meta["name"], "default", {
        "phase": "Running",
        "containerStatuses": [{"name": "node", "restartCount": restarts, "state": {"running": {}}}],
    })  # fmt: skip


def parallelism(env: Env, name: str) -> int | None:
    """The trainer job's parallelism, None while there is no JobSet (between a re-creation's delete and create)."""
    return node_job(env, name).get("parallelism") if env.find("jobsets", name, group=JOBSET) else None


def settled(op: Any, env: Env, name: str) -> bool:
    """The operator's TrainJob cache has the stored version and nothing is queued or running: every reconcile
    a change of the TrainJob (its own status writes included) asked for has been done."""
    cached = op.trainjobs.get("default", name) or {}
    stored = env.get("trainjobs", name)
    idle = len(op.queue) == 0 and op.queue.processing == 0
    return idle and cached.get("metadata", {}).get("resourceVersion") == stored["metadata"]["resourceVersion"]


def scaled_messages(env: Env) -> list[str]:
    return [e["message"] for e in env.items("events", group="") if e["reason"] == "Scaled"]


def test_pods_that_fail_because_a_scale_deleted_them_leave_the_budget_alone() -> None:
    """The old JobSet's pods exit 1 (torchrun on SIGTERM) and 143 while it is deleted, and the operator's JobSet
    cache lags (it still shows the old JobSet, running, when its own status write wakes the next reconcile): the
    budget is counted once, from the failure before the scale only."""

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(elastic_runtime(maxRestarts=3))
            async with running_operator(env) as op:
                await env.client.create(trainjob("el", runtime="elastic", trainer={"numNodes": 2}))
                await wait_for(lambda: env.find("jobsets", "el", group=JOBSET), what="JobSet")
                first = env.get("jobsets", "el", group=JOBSET)
                pods = [await node_pod(env, "el", 0, restarts=1, kubelet=True),  # one genuine failure
                        await node_pod(env, "el", 1, kubelet=True)]  # fmt: skip
                env.api.store.hold_watches("jobsets")
                env.api.inject("PUT", r"/jobsets/el(\?|$)", 422, times=1000)  # no ElasticJobSet gate
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 3}}})
                await wait_for(lambda: env.get("jobsets", "el", group=JOBSET)["metadata"].get("deletionTimestamp"),
                               what="the old JobSet deleted")  # fmt: skip
                # Its pods are stopped: the kubelet reports the exit codes and the pods Failed.
                for pod, code in zip(pods, (1, 143), strict=True):
                    restarts = pod["status"]["containerStatuses"][0]["restartCount"]
                    deleted = env.get("pods", pod["metadata"]["name"], group="")["metadata"]["deletionTimestamp"]
                    terminated = {"exitCode": code, "reason": "Error", "finishedAt": deleted}
                    await env.client.patch_status(r.POD, pod["metadata"]["name"], "default", {
                        "phase": "Failed",
                        "containerStatuses": [{"name": "node", "restartCount": restarts,
                                               "state": {"terminated": terminated}}],
                    })  # fmt: skip
                # Something else wakes the TrainJob while the operator still sees the old JobSet running.
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"metadata": {"labels": {"touch": "1"}}})
                await wait_for(lambda: settled(op, env, "el"), what="the operator settled on the deletion")
                assert env.get("trainjobs", "el")["status"]["scaling"] == {
                    "recreations": 1, "nodeFailures": 1, "jobSetRestarts": 0}  # fmt: skip
                # The kubelet is done with them: the pods go, then the JobSet (foreground), then a new one comes.
                env.api.store.release_watches("jobsets")
                for pod in pods:
                    await env.client.merge_patch(r.POD, pod["metadata"]["name"], "default",
                                                 {"metadata": {"finalizers": None}})  # fmt: skip
                new = await wait_for(lambda: (js := env.find("jobsets", "el", group=JOBSET)) and
                                     js["metadata"]["uid"] != first["metadata"]["uid"] and js, what="a new JobSet")
                job = node_job(env, "el")
                assert (job["parallelism"], job["backoffLimit"]) == (3, 3 - 1)
                assert new["metadata"]["annotations"]["kubetrain.dev/recreation"] == "1"
                assert env.get("trainjobs", "el")["status"]["scaling"] == {
                    "recreations": 1, "nodeFailures": 1, "jobSetRestarts": 0}  # fmt: skip
                messages = scaled_messages(env)
                assert len(messages) == 1, messages
                assert messages[0].endswith("restart budget used so far: 1 node failures, 0 JobSet restarts")

    run(body)


def test_an_operator_restart_mid_scale_counts_the_budget_once_and_genuine_failures_still_count() -> None:
    """The operator writes the budget, then cannot delete the JobSet and is restarted; the next one finishes the
    re-creation without counting that JobSet again. Failures of the new JobSet count at the next scale."""

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(elastic_runtime(maxRestarts=6))
            await env.client.create(trainjob("el", runtime="elastic", trainer={"numNodes": 2}))
            async with running_operator(env):
                await wait_for(lambda: env.find("jobsets", "el", group=JOBSET), what="JobSet")
                first = env.get("jobsets", "el", group=JOBSET)
                await node_pod(env, "el", 0, restarts=1)
                await node_pod(env, "el", 1, restarts=1)
                env.api.inject("PUT", r"/jobsets/el(\?|$)", 422, times=1000)
                env.api.inject("DELETE", r"/jobsets/el(\?|$)", 503, times=1000)
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 3}}})
                await wait_for(lambda: env.get("trainjobs", "el").get("status", {}).get("scaling"),
                               what="the budget written before the delete")  # fmt: skip
            env.api.faults.clear()
            assert env.get("jobsets", "el", group=JOBSET)["metadata"]["uid"] == first["metadata"]["uid"]
            env.api.inject("PUT", r"/jobsets/el(\?|$)", 422, times=1000)
            async with running_operator(env):
                await wait_for(lambda: parallelism(env, "el") == 3, what="the new JobSet")
                assert node_job(env, "el")["backoffLimit"] == 6 - 2
                assert env.get("trainjobs", "el")["status"]["scaling"] == {
                    "recreations": 1, "nodeFailures": 2, "jobSetRestarts": 0}  # fmt: skip
                # The new JobSet's pods fail for real (3 restarts), and the job is scaled again: they count.
                await node_pod(env, "el", 0, restarts=3)
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 2}}})
                await wait_for(lambda: parallelism(env, "el") == 2, what="the third JobSet")
                assert node_job(env, "el")["backoffLimit"] == 6 - 2 - 3
                assert env.get("trainjobs", "el")["status"]["scaling"] == {
                    "recreations": 2, "nodeFailures": 5, "jobSetRestarts": 0}  # fmt: skip
                js = env.get("jobsets", "el", group=JOBSET)
                assert js["metadata"]["annotations"]["kubetrain.dev/recreation"] == "2"

    run(body)


FAILED_JOBSET = {"type": "Failed", "status": "True", "reason": "FailedJobs",
                 "message": "jobset failed due to one or more job failures",
                 "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip


def test_a_jobset_that_failed_before_the_operator_saw_it_is_never_resized_or_recreated() -> None:
    """Upstream #3891 (a Failed TrainJob stays terminal: no new JobSet, no fresh restart budget) on kubetrain's own
    path to a new JobSet: a scale. The JobSet fails after its restarts while the operator's cache still shows it
    running, and a new numNodes arrives then: the operator must see that the JobSet ended (its fresh copy) and
    leave it, so the TrainJob ends Failed with that JobSet, its budget spent."""

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(elastic_runtime(maxRestarts=3))
            async with running_operator(env) as op:
                await env.client.create(trainjob("el", runtime="elastic", trainer={"numNodes": 2}))
                await wait_for(lambda: env.find("jobsets", "el", group=JOBSET), what="JobSet")
                first = env.get("jobsets", "el", group=JOBSET)
                env.api.store.hold_watches("jobsets")  # the operator's cache still shows it running
                await env.client.patch_status(r.JOBSET, "el", "default", {"restarts": 2, "conditions": [FAILED_JOBSET]})
                env.api.inject("PUT", r"/jobsets/el(\?|$)", 422, times=1000)  # JobSet refuses to resize it
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 3}}})
                # (Without the check, the operator deleted the failed JobSet to re-create it, counting its restarts
                # into status.scaling, and never settled while its cache still showed that JobSet.)
                await wait_for(lambda: settled(op, env, "el"), what="the operator settled on the new numNodes")
                env.api.store.release_watches("jobsets")

                def failed() -> dict[str, Any] | None:
                    conds = (env.get("trainjobs", "el").get("status") or {}).get("conditions") or []
                    return next((c for c in conds if c["type"] == "Failed"), None)

                cond = await wait_for(failed, what="Failed")
                assert (cond["status"], cond["reason"]) == ("True", "FailedJobs")
                # More reconciles (a label, as any client may add) change nothing.
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"metadata": {"labels": {"poke": "1"}}})
                await wait_for(lambda: settled(op, env, "el"), what="settled")
                js = env.get("jobsets", "el", group=JOBSET)
                assert js["metadata"]["uid"] == first["metadata"]["uid"]
                assert "deletionTimestamp" not in js["metadata"]
                assert (node_job(env, "el")["parallelism"], js["status"]["restarts"]) == (2, 2)
                assert "scaling" not in env.get("trainjobs", "el")["status"]
                assert scaled_messages(env) == []

    run(body)


def test_a_trainjob_whose_failed_jobset_the_operator_finds_at_start_is_not_scaled() -> None:
    """The same with the operator down while the JobSet fails and the scale is written: at start its cache
    already shows the JobSet Failed, next to the new numNodes."""

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(elastic_runtime(maxRestarts=3))
            await env.client.create(trainjob("el", runtime="elastic", trainer={"numNodes": 2}))
            async with running_operator(env):
                await wait_for(lambda: env.find("jobsets", "el", group=JOBSET), what="JobSet")
            await env.client.patch_status(r.JOBSET, "el", "default", {"restarts": 3, "conditions": [FAILED_JOBSET]})
            await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 3}}})
            failed_js = env.get("jobsets", "el", group=JOBSET)
            async with running_operator(env) as op:
                await wait_for(lambda: any(c["type"] == "Failed" for c in
                                           (env.get("trainjobs", "el").get("status") or {}).get("conditions") or []),
                               what="Failed")  # fmt: skip
                await wait_for(lambda: settled(op, env, "el"), what="settled")
                # Not resized in place either (the in-memory API server would take the PUT): untouched.
                js = env.get("jobsets", "el", group=JOBSET)
                assert js["metadata"]["resourceVersion"] == failed_js["metadata"]["resourceVersion"]
                assert node_job(env, "el")["parallelism"] == 2
                assert "scaling" not in env.get("trainjobs", "el")["status"]
                assert scaled_messages(env) == []

    run(body)
