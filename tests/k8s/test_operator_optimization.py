"""The operator's OptimizationJob controller against the in-memory API server: trials applied at most
parallelTrials at a time, owned by the OptimizationJob (deleting it deletes them), the objective read from each
trial's status.trainerStatus.metrics, status.result following the best trial, and the ends of a search (complete,
every trial failed, an objective nobody reports, an invalid spec). Trials finish the way they do on a cluster:
their JobSet's status says so and the TrainJob reconciler copies it."""

from __future__ import annotations

from typing import Any

from kubetrain.k8s.client import resources as r
from tests.builders import optimizationjob
from tests.k8s.helpers import Env, fake_env, operator_env, run, running_operator, torch_runtime, wait_for

JS = "jobset.x-k8s.io"
OJ = "optimizationjobs"


def trials(env: Env) -> list[dict[str, Any]]:
    return sorted(
        (t for t in env.items("trainjobs") if "kubetrain.dev/optimizationjob" in (t["metadata"].get("labels") or {})),
        key=lambda t: t["metadata"]["name"],
    )


def conditions(env: Env, name: str = "tune") -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (env.get(OJ, name).get("status") or {}).get("conditions") or []}


async def finish(env: Env, name: str, *, loss: str | None, ok: bool = True) -> None:
    """The trial reports (as the SDK's update_trainjob_status does through the status endpoint) and its JobSet
    ends."""
    await wait_for(lambda: env.find("jobsets", name, group=JS), what=f"JobSet {name}")
    if loss is not None:
        report = {"metrics": [{"name": "loss", "value": loss}, {"name": "epoch", "value": "5"}],
                  "progressPercentage": 100, "lastUpdatedTime": "2026-08-01T00:00:00Z"}
        await env.client.patch_status(r.TRAINJOB, name, "default", {"trainerStatus": report})
    cond = {"type": "Completed" if ok else "Failed", "status": "True",
            "reason": "AllJobsCompleted" if ok else "FailedJobs", "message": "m"}
    await env.client.patch_status(r.JOBSET, name, "default", {"conditions": [cond]})


def finished(env: Env, name: str) -> bool:
    conds = (env.get("trainjobs", name).get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds)


def test_trials_run_at_most_parallel_at_once_and_the_best_wins() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            oj = await env.client.create(optimizationjob(numTrials=4, parallelTrials=2))
            await wait_for(lambda: len(trials(env)) == 2, what="two trials")
            first = trials(env)[0]
            assert first["metadata"]["ownerReferences"] == [{
                "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "OptimizationJob", "name": "tune",
                "uid": oj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
            assert {m["manager"] for m in first["metadata"]["managedFields"]} >= {"kubetrain"}
            await wait_for(lambda: conditions(env).get("Running", {}).get("status") == "True", what="Running")
            assert len(trials(env)) == 2  # parallelTrials
            await finish(env, "tune-0", loss="0.5")
            await wait_for(lambda: finished(env, "tune-0") and len(trials(env)) == 3, what="a third trial")
            await wait_for(lambda: (env.get(OJ, "tune").get("status") or {}).get("result"), what="a result")
            assert env.get(OJ, "tune")["status"]["result"]["trainJobName"] == "tune-0"
            await finish(env, "tune-1", loss="0.25")
            await wait_for(lambda: len(trials(env)) == 4, what="the fourth trial")
            await wait_for(lambda: env.get(OJ, "tune")["status"]["result"]["trainJobName"] == "tune-1",
                           what="the better trial as the result")
            await finish(env, "tune-2", loss="0.9", ok=False)  # failed: never best, whatever it reported
            await finish(env, "tune-3", loss="0.75")
            await wait_for(lambda: "Complete" in conditions(env), what="Complete")
            done = conditions(env)
            assert (done["Complete"]["status"], done["Complete"]["reason"]) == ("True", "MaxTrialsReached")
            assert "1 failed; best: tune-1 with loss=0.25" in done["Complete"]["message"]
            assert (done["Running"]["status"], done["Running"]["reason"]) == ("False", "TrialsFinished")
            result = env.get(OJ, "tune")["status"]["result"]
            values = dict(x.split("=") for x in first["spec"]["trainer"]["command"][2:])
            assert result["trainJobName"] == "tune-1" and {p["name"] for p in result["parameters"]} == {"lr", "bs"}
            assert values  # the first trial's values were in its command
            assert len(trials(env)) == 4

    run(body)


def test_every_trial_failing_fails_the_search_with_no_result() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            await env.client.create(optimizationjob(numTrials=2, parallelTrials=2))
            await wait_for(lambda: len(trials(env)) == 2, what="trials")
            for t in ("tune-0", "tune-1"):
                await finish(env, t, loss=None, ok=False)
            await wait_for(lambda: "Failed" in conditions(env), what="Failed")
            failed = conditions(env)["Failed"]
            assert failed["reason"] == "AllTrialsFailed"
            assert failed["message"].startswith("all 2 trials failed; no result. First failure: tune-0: FailedJobs")
            assert "result" not in env.get(OJ, "tune")["status"]

    run(body)


def test_an_objective_no_trial_reports_stops_the_search_after_three() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            doc = optimizationjob(numTrials=6, parallelTrials=3)
            doc["spec"]["objectives"] = [{"metric": "val_loss"}]
            await env.client.create(doc)
            await wait_for(lambda: len(trials(env)) == 3, what="trials")
            for t in ("tune-0", "tune-1", "tune-2"):
                await finish(env, t, loss="0.1")  # reports loss and epoch, not val_loss
            await wait_for(lambda: "Failed" in conditions(env), what="Failed")
            failed = conditions(env)["Failed"]
            assert failed["reason"] == "ObjectiveNotReported"
            assert "no trial reported the objective metric 'val_loss': 3 completed without it (they reported epoch, " \
                   "loss); no more trials are started" in failed["message"]
            started = [t["metadata"]["name"] for t in trials(env)]
            assert len(started) < 6  # replacements started while the first three ran; none after the decision
            for t in started[3:]:
                await finish(env, t, loss="0.1")
            await wait_for(lambda: all(finished(env, t) for t in started), what="the rest finished")
            await wait_for(lambda: op.optimization.queue.processing == 0 and len(op.optimization.queue) == 0,
                           what="an idle controller")
            assert [t["metadata"]["name"] for t in trials(env)] == started

    run(body)


def test_deleting_the_optimizationjob_deletes_its_trials() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            await env.client.create(optimizationjob())
            await wait_for(lambda: len(trials(env)) == 2, what="trials")
            await env.client.delete(r.OPTIMIZATIONJOB, "tune", "default")
            await wait_for(lambda: not trials(env), what="the trials garbage-collected")
            # Their JobSets go the same way (the fake collects at the owner's deletion only, so a JobSet a reconcile
            # already under way applies just after is left; a real garbage collector removes it: tests/e2e).

    run(body)


def test_an_invalid_spec_fails_without_trials() -> None:
    """The fake runs no admission, like a cluster whose webhook is down: the controller checks by itself."""

    async def body() -> None:
        async with operator_env() as (env, _):
            doc = optimizationjob(trainer={"command": ["python", "t.py", "--lr={{.lrr}}", "{{.bs}}"]})
            await env.client.create(doc)
            await wait_for(lambda: "Failed" in conditions(env), what="Failed")
            failed = conditions(env)["Failed"]
            assert failed["reason"] == "InvalidSpec"
            assert "placeholder {{.lrr}} names no parameter" in failed["message"]
            assert trials(env) == []

    run(body)


def test_a_restarted_operator_picks_up_where_it_was_without_duplicates() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            async with running_operator(env):
                await env.client.create(optimizationjob(numTrials=3, parallelTrials=1))
                await wait_for(lambda: len(trials(env)) == 1, what="a trial")
                await finish(env, "tune-0", loss="0.3")
                await wait_for(lambda: finished(env, "tune-0"), what="tune-0 done")
            # Stopped between two steps: the next trial may or may not exist yet.
            async with running_operator(env):
                await wait_for(lambda: len(trials(env)) == 2, what="the second trial")
                await finish(env, "tune-1", loss="0.2")
                await wait_for(lambda: len(trials(env)) == 3, what="the third trial")
                await finish(env, "tune-2", loss="0.4")
                await wait_for(lambda: "Complete" in conditions(env), what="Complete")
            assert [t["metadata"]["name"] for t in trials(env)] == ["tune-0", "tune-1", "tune-2"]
            assert env.get(OJ, "tune")["status"]["result"]["trainJobName"] == "tune-1"

    run(body)


def test_a_trial_that_cannot_be_created_says_why_and_is_retried() -> None:
    async def body() -> None:
        async with operator_env() as (env, _):
            env.api.inject("PATCH", r"/namespaces/default/trainjobs/tune-0(\?|$)", 403, times=2,
                           message='trainjobs "tune-0" is forbidden: quota exceeded')
            await env.client.create(optimizationjob(numTrials=1, parallelTrials=1))
            created = await wait_for(lambda: conditions(env).get("Created", {}).get("status") == "False"
                                     and conditions(env)["Created"], what="Created=False")
            assert created["reason"] == "TrainJobsCreationFailed"
            assert "trial 0 (tune-0) could not be created: " in created["message"]
            await wait_for(lambda: len(trials(env)) == 1, what="the trial, on a retry")
            await wait_for(lambda: conditions(env)["Created"]["status"] == "True", what="Created=True again")

    run(body)


def test_early_stopping_suspends_a_trial_that_falls_behind() -> None:
    """Opt-in (an annotation): the operator keeps each trial's reports as they arrive (the API keeps only the
    latest) and stops, by suspending, a trial whose best loss is worse than the completed trials' median."""

    async def body() -> None:
        async with operator_env() as (env, _):
            doc = optimizationjob(numTrials=5, parallelTrials=1)
            doc["metadata"]["annotations"] = {"kubetrain.dev/early-stopping": "median"}
            await env.client.create(doc)

            async def report(name: str, progress: int, loss: str) -> None:
                await wait_for(lambda: env.find("trainjobs", name), what=name)
                ts = {"progressPercentage": progress, "metrics": [{"name": "loss", "value": loss}],
                      "lastUpdatedTime": "2026-08-01T00:00:00Z"}
                await env.client.patch_status(r.TRAINJOB, name, "default", {"trainerStatus": ts})

            for i, loss in enumerate(("0.5", "0.4", "0.6")):
                await report(f"tune-{i}", 50, loss)
                await finish(env, f"tune-{i}", loss=str(float(loss) - 0.1))
                await wait_for(lambda i=i: finished(env, f"tune-{i}"), what=f"tune-{i} done")
            await report("tune-3", 50, "3.0")  # far behind the median (0.5 at 50 %)
            stopped = await wait_for(lambda: env.get("trainjobs", "tune-3")["spec"].get("suspend"), what="suspended")
            assert stopped is True
            note = env.get("trainjobs", "tune-3")["metadata"]["annotations"]["kubetrain.dev/early-stopped"]
            assert note.startswith("median stopping: best loss 3 by 50 is worse than the median 0.5 of 3")
            await wait_for(lambda: env.find("trainjobs", "tune-4"), what="the next trial in its place")

    run(body)


def test_a_namespace_being_deleted_is_not_a_creation_failure() -> None:
    """Deleting a namespace deletes its objects in any order: a trial gone before its OptimizationJob is not
    re-created into a namespace that refuses new objects, and nothing is reported as failing."""

    async def body() -> None:
        async with operator_env() as (env, op):
            env.api.inject("PATCH", r"/namespaces/default/trainjobs/tune-0(\?|$)", 403, times=10**6,
                           message='trainjobs "tune-0" is forbidden: unable to create new content in namespace '
                                   "default because it is being terminated")
            await env.client.create(optimizationjob(numTrials=1, parallelTrials=1))
            await wait_for(lambda: op.optimization.queue.processing == 0 and len(op.optimization.queue) == 0
                           and op.metrics.reconcile_total.labels("optimizationjob", "success")._value.get() >= 1,
                           what="the reconcile")
            assert "Created" not in conditions(env) and trials(env) == []

    run(body)
