"""Errors surfaced as conditions, create-once objects, restarts, lost watches, throttling, leader election."""

from __future__ import annotations

import asyncio

import pytest

from kubetrain.k8s.client import resources as r
from kubetrain.k8s.operator import Operator, OperatorSettings
from kubetrain.k8s.operator.leader import LeaseNamespaceMissing
from tests.k8s.helpers import (
    client_for,
    fake_env,
    mpi_runtime,
    operator_env,
    run,
    running_operator,
    torch_runtime,
    trainjob,
    wait_for,
)

JS = "jobset.x-k8s.io"


def conditions(env, name: str) -> dict[str, dict]:
    st = env.get("trainjobs", name).get("status") or {}
    return {c["type"]: c for c in st.get("conditions") or []}


def test_missing_runtime_sets_a_condition_and_an_event_then_recovers() -> None:
    async def body() -> None:
        async with fake_env() as env, running_operator(env):
            await env.client.create(trainjob("job", runtime="late"))
            cond = await wait_for(lambda: conditions(env, "job").get("ResourcesCreationFailed"), what="condition")
            assert cond["status"] == "True" and cond["reason"] == "BuildFailed"
            assert "not found ClusterTrainingRuntime specified in TrainJob" in cond["message"]
            # The Event is written after the status: wait for it rather than race it.
            await wait_for(
                lambda: any(
                    e["reason"] == "TrainJobResourcesCreationFailed"
                    and e["type"] == "Warning"
                    and e["message"].startswith("TrainJob resources reconciliation failed: ")
                    for e in env.items("events", group="")
                ),
                what="the Warning Event",
            )
            await env.client.create(torch_runtime("late"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet after runtime appears")
            await wait_for(lambda: "ResourcesCreationFailed" not in conditions(env, "job"), what="cleared")

    run(body)


def test_unsupported_runtime_kind_fails_the_trainjob() -> None:
    async def body() -> None:
        async with fake_env() as env, running_operator(env):
            await env.client.create(trainjob("job", runtimeRef={"name": "x", "kind": "FancyRuntime"}))
            cond = await wait_for(lambda: conditions(env, "job").get("Failed"), what="Failed")
            assert cond["reason"] == "TrainingRuntimeNotSupported"
            assert cond["message"] == "unsupported runtime: FancyRuntime.trainer.kubeflow.org"
            assert env.find("jobsets", "job", group=JS) is None

    run(body)


def test_mpi_objects_secret_created_once_hostfile_and_podgroup() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(mpi_runtime())
            async with running_operator(env) as op:
                await env.client.create(trainjob("mpi-job", runtime="mpi"))
                await wait_for(lambda: env.find("jobsets", "mpi-job", group=JS), what="JobSet")
                secret = env.get("secrets", "mpi-job-mpi-ssh-auth", group="")
                assert secret["immutable"] is True
                hostfile = env.get("configmaps", "mpi-job-mpi-hostfile", group="")
                assert "mpi-job-node-0-0.mpi-job" in hostfile["data"]["hostfile"]
                pg = env.get("podgroups", "mpi-job", group="scheduling.x-k8s.io")
                assert pg["spec"]["minMember"] >= 2
                # Suspend/resume re-applies JobSet and PodGroup but never re-creates the Secret.
                secret_rv = secret["metadata"]["resourceVersion"]
                await env.client.merge_patch(r.TRAINJOB, "mpi-job", "default", {"spec": {"suspend": True}})
                await wait_for(lambda: env.get("jobsets", "mpi-job", group=JS)["spec"]["suspend"] is True)
                await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0)
                assert env.get("secrets", "mpi-job-mpi-ssh-auth", group="")["metadata"]["resourceVersion"] == secret_rv
                posts = [p for m, p in env.api.requests if m == "POST" and "/secrets" in p]
                assert len(posts) == 1

    run(body)


def test_flux_objects_from_the_operator_match_the_compiler_and_the_secret_is_created_once() -> None:
    """A Flux TrainJob on a cluster: the entrypoint ConfigMap and the CURVE Secret (derived from the TrainJob's uid,
    as Kubeflow Trainer derives it) before the JobSet whose node pods mount them."""
    from kubetrain.api.trainjob import TrainJob
    from kubetrain.compiler import compile_trainjob, fixed_keygen
    from kubetrain.runtimes import builtin_runtime

    flux = builtin_runtime("torch-distributed")
    assert flux is not None
    flux.metadata.name = "flux"
    flux.spec.ml_policy = type(flux.spec.ml_policy).model_validate({"numNodes": 1, "flux": {}})

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(flux.to_wire())
            async with running_operator(env) as op:
                await env.client.create(trainjob("hpc", runtime="flux", trainer={"numNodes": 2, "command": ["lmp"]}))
                js = await wait_for(lambda: env.find("jobsets", "hpc", group=JS), what="JobSet")
                live = TrainJob.model_validate(env.get("trainjobs", "hpc"))
                want = {f"{o['kind']}/{o['metadata']['name']}": o
                        for o in compile_trainjob(live, flux, keygen=fixed_keygen())}
                cm = env.get("configmaps", "hpc-flux-entrypoint", group="")
                secret = env.get("secrets", "hpc-flux-curve", group="")
                # the scripts' emoji survive server-side apply (sent as UTF-8: go-yaml refuses surrogate escapes)
                assert cm["data"] == want["ConfigMap/hpc-flux-entrypoint"]["data"]
                assert "🌀" in cm["data"]["entrypoint.sh"]
                assert secret["data"] == want["Secret/hpc-flux-curve"]["data"]
                node = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
                assert [x["name"] for x in node["initContainers"]] == ["flux-installer"]
                assert node["containers"][0]["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "lmp"]
                await env.client.merge_patch(r.TRAINJOB, "hpc", "default", {"spec": {"suspend": True}})
                await wait_for(lambda: env.get("jobsets", "hpc", group=JS)["spec"]["suspend"] is True)
                await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0)
                posts = [p for m, p in env.api.requests if m == "POST" and "/secrets" in p]
                assert len(posts) == 1

    run(body)


def test_restart_mid_burst_converges_without_duplicates_or_losses() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            async with running_operator(env):
                for i in range(30):
                    await env.client.create(trainjob(f"a{i}"))
                await wait_for(lambda: len(env.items("jobsets", JS)) >= 5, what="some JobSets")
            # Operator is down: more jobs arrive.
            for i in range(20):
                await env.client.create(trainjob(f"b{i}"))
            async with running_operator(env) as op:
                await wait_for(lambda: len(env.items("jobsets", JS)) == 50, what="all JobSets", timeout=30)
                await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0)
            names = sorted(j["metadata"]["name"] for j in env.items("jobsets", JS))
            assert names == sorted([f"a{i}" for i in range(30)] + [f"b{i}" for i in range(20)])
            snaps = [c for c in env.items("configmaps", "") if c["metadata"]["name"].endswith("-runtime-snapshot")]
            assert len(snaps) == 50
            # Every JobSet is owned by the TrainJob that exists now (same uid).
            for js in env.items("jobsets", JS):
                tj = env.get("trainjobs", js["metadata"]["name"])
                assert js["metadata"]["ownerReferences"][0]["uid"] == tj["metadata"]["uid"]

    run(body)


def test_watch_drop_and_compaction_relist_and_keep_working() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            await env.client.create(trainjob("one"))
            await wait_for(lambda: env.find("jobsets", "one", group=JS))
            relists = op.trainjobs.relists
            env.api.store.compact()
            env.api.store.drop_watches()
            await wait_for(lambda: op.trainjobs.relists > relists, what="relist after 410")
            await env.client.create(trainjob("two"))
            await wait_for(lambda: env.find("jobsets", "two", group=JS), what="JobSet after relist")

    run(body)


def test_throttled_api_server_is_retried_transparently() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            env.api.inject("PATCH", "/jobsets/job", 429, times=3, retry_after="0")
            async with running_operator(env):
                await env.client.create(trainjob("job"))
                await wait_for(lambda: env.find("jobsets", "job", group=JS), what="JobSet despite 429s")
            assert "ResourcesCreationFailed" not in conditions(env, "job")

    run(body)


def test_podgroup_crd_missing_is_reported_on_the_trainjob() -> None:
    async def body() -> None:
        from kubetrain.testing.fakeapi import default_resources

        async with fake_env(resources=default_resources(podgroups=False)) as env:
            await env.client.create(mpi_runtime())
            async with running_operator(env):
                await env.client.create(trainjob("job", runtime="mpi"))
                cond = await wait_for(lambda: conditions(env, "job").get("ResourcesCreationFailed"))
                assert cond["reason"] == "ApplyFailed" and "404" in cond["message"]

    run(body)


def test_only_one_replica_leads_and_a_standby_takes_over() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            settings = dict(
                leader_election=True,
                health_port=None,
                lease_namespace="default",
                lease_duration=2.0,
                renew_deadline=1.5,
                retry_period=0.1,
            )
            c1, c2 = client_for(env.api, qps=0), client_for(env.api, qps=0)
            op1 = Operator(c1, OperatorSettings(identity="one", **settings))
            op2 = Operator(c2, OperatorSettings(identity="two", **settings))
            stop1, stop2 = asyncio.Event(), asyncio.Event()
            t1 = asyncio.create_task(op1.run(stop1))
            await wait_for(lambda: op1.started.is_set(), what="first leader")
            t2 = asyncio.create_task(op2.run(stop2))
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS))
            assert not op2.started.is_set() and op2.ready()  # standby: ready, not reconciling
            lease = env.get("leases", "kubetrain-operator", group="coordination.k8s.io")
            assert lease["spec"]["holderIdentity"] == "one"
            stop1.set()
            assert await t1 == 0
            await wait_for(lambda: op2.started.is_set(), what="standby takes over")
            lease = env.get("leases", "kubetrain-operator", group="coordination.k8s.io")
            assert lease["spec"]["holderIdentity"] == "two" and lease["spec"]["leaseTransitions"] == 1
            await env.client.create(trainjob("job2"))
            await wait_for(lambda: env.find("jobsets", "job2", group=JS))
            stop2.set()
            await t2
            await c1.close()
            await c2.close()

    run(body)


def test_health_ready_and_metrics_endpoints() -> None:
    async def body() -> None:
        import aiohttp

        async with operator_env(health_port=0, health_host="127.0.0.1") as (env, op):
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS))
            await wait_for(lambda: op.metrics.trainjobs_created._value.get() == 1)
            base = f"http://127.0.0.1:{op.health.port}"
            async with aiohttp.ClientSession() as http:
                for path in ("/healthz", "/readyz"):
                    async with http.get(base + path) as resp:
                        assert resp.status == 200
                async with http.get(base + "/metrics") as resp:
                    text = await resp.text()
            for name in (
                "kubetrain_trainjobs_created_total 1.0",
                "kubetrain_reconcile_total{",
                "kubetrain_workqueue_depth",
                "kubetrain_trainjob_jobset_latency_seconds_count 1.0",
                "kubetrain_reconcile_duration_seconds_bucket",
            ):
                assert name in text, name

    run(body)


def test_jobset_status_changed_during_a_watch_gap_is_picked_up_by_the_relist() -> None:
    async def body() -> None:
        async with operator_env() as (env, op):
            await env.client.create(trainjob("job"))
            await wait_for(lambda: env.find("jobsets", "job", group=JS))
            jobsets = op.caches.owned[("jobset.x-k8s.io/v1alpha2", "JobSet")]
            relists = jobsets.relists
            # No await in between: the watches end before they can deliver the change, and the history
            # that would let them resume past it is compacted away, so only a relist can see it.
            env.api.store.drop_watches("jobsets")
            done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "m"}
            env.api.store.merge_patch(
                JS, "jobsets", "default", "job", {"status": {"conditions": [done]}}, "jobset", "status"
            )
            env.api.store.compact("jobsets")
            await wait_for(lambda: jobsets.relists > relists, what="JobSet relist")
            await wait_for(lambda: conditions(env, "job").get("Complete"), what="Complete after relist")

    run(body)


def test_a_new_trainjob_is_not_queued_behind_a_restart_relist() -> None:
    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            for i in range(40):
                await env.client.create(trainjob(f"old{i}"))
            # A slow operator (5 requests/s once start-up has used its burst) makes the relist backlog last.
            async with running_operator(env, qps=5, burst=20, concurrency=1):
                await env.client.create(trainjob("fresh"))
                await wait_for(lambda: env.find("jobsets", "fresh", group=JS), timeout=30, what="fresh JobSet")
                done_before = [j["metadata"]["name"] for j in env.items("jobsets", JS)]
            # The fresh job overtook almost all of the 40 queued by the relist.
            assert len(done_before) <= 6, done_before

    run(body)


def test_a_missing_lease_namespace_stops_the_operator_at_once_with_the_fixes() -> None:
    """Outside a cluster the default Lease namespace (kubeflow-system) often does not exist: say so, no retries."""

    async def body() -> None:
        async with fake_env() as env:
            # What kube-apiserver answers when creating an object in a namespace that does not exist.
            env.api.inject(
                "POST",
                r"/namespaces/kubeflow-system/leases",
                404,
                reason="NotFound",
                message='namespaces "kubeflow-system" not found',
                details={"name": "kubeflow-system", "kind": "namespaces"},
            )
            op = Operator(
                client_for(env.api, qps=0),
                OperatorSettings(leader_election=True, health_port=None, lease_namespace="kubeflow-system"),
            )
            with pytest.raises(LeaseNamespaceMissing) as exc:
                await asyncio.wait_for(op.run(asyncio.Event()), 30)
            text = str(exc.value)
            for fix in ("--lease-namespace", "--no-leader-elect", "kubectl create namespace kubeflow-system"):
                assert fix in text
            posts = [p for m, p in env.api.requests if m == "POST" and "/leases" in p]
            assert len(posts) == 1  # failed on the first attempt, did not retry
            await op.client.close()

    run(body)


def test_a_restart_over_converged_trainjobs_writes_nothing() -> None:
    """Torch and MPI (hostfile, SSH Secret, PodGroup), one running and one finished: after a restart the slimmed
    caches still show every object as up to date, so not one write goes out."""

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            await env.client.create(mpi_runtime())
            await env.client.create(trainjob("torch-job"))
            await env.client.create(trainjob("mpi-job", runtime="mpi"))
            async with running_operator(env):
                await wait_for(lambda: env.find("jobsets", "torch-job", group=JS))
                await wait_for(lambda: env.find("jobsets", "mpi-job", group=JS))
                done = {"type": "Completed", "status": "True", "reason": "AllJobsCompleted", "message": "done"}
                await env.client.patch_status(r.JOBSET, "torch-job", "default", {"conditions": [done]})
                await wait_for(lambda: conditions(env, "torch-job").get("Complete"))
            async with running_operator(env) as op:
                await wait_for(lambda: op.reconciler.metrics.reconcile_total._metrics, what="reconciles")
                await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0, what="drained")
                await asyncio.sleep(0.5)
                writes = {k: v for k, v in op.client.session.writes.items() if k != "leases"}
                assert writes == {}

    run(body)


def test_lease_renewals_do_not_wait_behind_a_throttled_burst() -> None:
    """The reconcilers' token bucket can be minutes deep in a burst; renewals have their own, or the leader would
    lose its lease (and exit) exactly when it is busiest."""

    async def body() -> None:
        async with fake_env() as env:
            await env.client.create(torch_runtime())
            settings = OperatorSettings(
                leader_election=True,
                health_port=None,
                lease_namespace="default",
                lease_duration=2.0,
                renew_deadline=1.0,
                retry_period=0.2,
                qps=1,
                burst=1,
            )
            op = Operator(client_for(env.api, qps=1, burst=1), settings)
            stop = asyncio.Event()
            task = asyncio.create_task(op.run(stop))
            await wait_for(lambda: op.started.is_set(), what="leader")
            for i in range(30):
                await env.client.create(trainjob(f"job-{i}"))  # ~60 throttled requests queue up at 1/s
            await asyncio.sleep(4)  # four renew deadlines
            assert op.elector is not None and not op.elector.lost.is_set() and op.elector.is_leader
            stop.set()
            assert await asyncio.wait_for(task, 30) == 0
            await op.client.close()


def test_a_trainjob_admitted_without_the_webhook_is_validated_before_objects_are_built() -> None:
    """The operator runs the same validation entry point: a TrainJob that slipped past admission (no webhook
    installed) gets BuildFailed with every error instead of a JobSet whose pods the API server would refuse."""

    async def body() -> None:
        async with fake_env() as env, running_operator(env):
            await env.client.create(torch_runtime())
            bad = trainjob("job", trainer={"resourcesPerNode": {"requests": {"cpu": "lots"}},
                                           "env": [{"name": "PET_NNODES", "value": "9"}]})
            await env.client.create(bad)
            cond = await wait_for(lambda: conditions(env, "job").get("ResourcesCreationFailed"), what="condition")
            assert cond["reason"] == "BuildFailed"
            assert "spec.trainer.resourcesPerNode.requests[cpu]: invalid quantity 'lots': not a quantity" in (
                cond["message"])
            assert "spec.trainer.env: must not have reserved envs" in cond["message"]
            assert env.find("jobsets", "job", group=JS) is None

    run(body)
