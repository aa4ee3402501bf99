"""The operator in its pod, with real pods and the real JobSet controller (reference §9.2): a TrainJob's life from
create to Complete or Failed, suspend and resume, runtime edits, garbage collection, the deadline, managedBy, a JobSet
deleted by hand, and the operator pod force-killed while it works through 20 TrainJobs."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    IMAGE,
    SLEEP,
    DeployedOperator,
    call,
    conditions,
    get,
    handled_since,
    list_of,
    pod_log,
    pod_spec,
    pods_of,
    reconciles,
    running_pods,
    setup_runtime,
    sh,
    status,
    torch_runtime,
    trainjob,
    uniq,
    wait_finished,
    wait_until,
)

pytestmark = pytest.mark.e2e


def suspended(name: str, ns: str) -> dict[str, Any]:
    return conditions(name, ns).get("Suspended") or {}


def test_a_trainjob_runs_its_pods_to_complete(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    script = 'echo "node $PET_NODE_RANK of $PET_NNODES, master $PET_MASTER_ADDR"'
    created = call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh(script, numNodes=2))))
    js = wait_until(lambda: get(r.JOBSET, name, namespace), 120, "JobSet")
    (ref,) = js["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
        "TrainJob",
        name,
        created["metadata"]["uid"],
        True,
        True,
    )
    spec_managers = {m["manager"] for m in js["metadata"]["managedFields"] if not m.get("subresource")}
    assert "kubetrain" in spec_managers
    assert get(r.CONFIGMAP, f"{name}-runtime-snapshot", namespace) is not None

    done = wait_finished(name, namespace)
    assert (done["type"], done["reason"], done["message"]) == (
        "Complete",
        "AllJobsCompleted",
        "jobset completed successfully",
    )
    logs = sorted(pod_log(p["metadata"]["name"], namespace).strip() for p in pods_of(name, namespace))
    master = f"{name}-node-0-0.{name}"
    assert logs == [f"node 0 of 2, master {master}", f"node 1 of 2, master {master}"]
    jobs = {j["name"]: j for j in status(name, namespace)["jobsStatus"]}
    assert jobs["node"]["succeeded"] == 1 and jobs["node"]["failed"] == 0  # Jobs: one, with a pod per node


def test_a_failing_command_fails_the_trainjob(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace, job={"backoffLimit": 0}, spec=pod_spec(restartPolicy="Never"))
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh("echo about to fail; exit 4"))))
    failed = wait_finished(name, namespace)
    assert (failed["type"], failed["reason"]) == ("Failed", "FailedJobs")
    assert failed["message"].startswith("node-0-0 exited with code 4 (Error)"), failed["message"]
    assert "jobset failed due to one or more job failures" in failed["message"]
    assert failed["message"].rstrip().endswith("about to fail")


def test_suspend_stops_the_pods_and_resume_starts_them_again(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh(SLEEP))))
    first = wait_until(lambda: running_pods(name, namespace), 180, "a running pod")
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"suspend": True}}))
    wait_until(lambda: suspended(name, namespace).get("reason") == "Suspended", 120, "Suspended")
    assert (get(r.JOBSET, name, namespace) or {})["spec"]["suspend"] is True
    wait_until(lambda: not pods_of(name, namespace), 120, "the Job controller to delete the pods of a suspended job")

    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"suspend": False}}))
    again = wait_until(lambda: running_pods(name, namespace), 180, "a running pod after resume")
    assert again[0]["metadata"]["uid"] != first[0]["metadata"]["uid"]
    cond = suspended(name, namespace)
    assert (cond["status"], cond["reason"]) == ("False", "Resumed")
    assert (get(r.JOBSET, name, namespace) or {})["spec"]["suspend"] is False
    call(lambda c: c.delete(r.TRAINJOB, name, namespace))


def test_a_runtime_edit_does_not_reach_an_existing_job(namespace: str, operator: DeployedOperator) -> None:
    """The job keeps its runtime snapshot: an image changed in the runtime (to one that does not exist) does not
    reach its pods, even when its JobSet is rebuilt on resume."""
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh(SLEEP), suspend=True)))
    wait_until(lambda: suspended(name, namespace).get("reason") == "Suspended", 120, "Suspended")
    broken = pod_spec()
    broken["containers"][0]["image"] = "localhost/kt-e2e-no-such-image:1"
    call(lambda c: c.apply(torch_runtime(rt, namespace, spec=broken)))
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"suspend": False}}))
    (pod,) = wait_until(lambda: running_pods(name, namespace), 180, "the pod running on the snapshot's image")
    assert pod["spec"]["containers"][0]["image"] == IMAGE
    call(lambda c: c.delete(r.TRAINJOB, name, namespace))


def test_delete_collects_the_jobset_its_pods_and_the_snapshot(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh(SLEEP, numNodes=2))))
    wait_until(lambda: len(running_pods(name, namespace)) == 2, 180, "2 running pods")
    call(lambda c: c.delete(r.TRAINJOB, name, namespace))
    wait_until(lambda: get(r.JOBSET, name, namespace) is None, 120, "JobSet collected")
    wait_until(lambda: get(r.CONFIGMAP, f"{name}-runtime-snapshot", namespace) is None, 120, "snapshot collected")
    wait_until(lambda: not pods_of(name, namespace), 120, "pods collected")


def test_active_deadline_fails_the_job_and_stops_its_pods(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh(SLEEP), activeDeadlineSeconds=60)))
    wait_until(lambda: running_pods(name, namespace), 120, "a running pod")  # it really ran
    failed = wait_finished(name, namespace, 180)
    assert (failed["type"], failed["reason"], failed["message"]) == (
        "Failed",
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    wait_until(lambda: get(r.JOBSET, name, namespace) is None, 120, "JobSet deleted")
    wait_until(lambda: not pods_of(name, namespace), 120, "pods stopped")
    assert conditions(name, namespace)["Failed"]["reason"] == "DeadlineExceeded"  # it stays


def test_managed_by_multikueue_is_left_alone(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace)
    mk, ours = uniq("mk"), uniq("tj")
    call(lambda c: c.create(trainjob(mk, namespace, rt, trainer=sh("true"), managedBy="kueue.x-k8s.io/multikueue")))
    call(lambda c: c.create(trainjob(ours, namespace, rt, trainer=sh("true"))))
    wait_finished(ours, namespace)
    before = reconciles(operator)
    call(lambda c: c.merge_patch(r.TRAINJOB, mk, namespace, {"metadata": {"labels": {"poke": "1"}}}))
    wait_until(lambda: handled_since(operator, before), 120, "the operator to handle the poke")
    assert get(r.JOBSET, mk, namespace) is None
    assert not (get(r.TRAINJOB, mk, namespace) or {}).get("status")


def test_a_jobset_deleted_by_hand_is_recreated(namespace: str, operator: DeployedOperator) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh(SLEEP))))
    first = wait_until(lambda: get(r.JOBSET, name, namespace), 120, "JobSet")
    wait_until(lambda: running_pods(name, namespace), 180, "a running pod")
    call(lambda c: c.delete(r.JOBSET, name, namespace))
    again = wait_until(
        lambda: (j := get(r.JOBSET, name, namespace)) and j["metadata"]["uid"] != first["metadata"]["uid"] and j,
        120,
        "a new JobSet",
    )
    assert again["metadata"]["ownerReferences"] == first["metadata"]["ownerReferences"]
    assert again["spec"]["replicatedJobs"] == first["spec"]["replicatedJobs"]  # from the same snapshot
    (pod,) = wait_until(lambda: running_pods(name, namespace), 180, "the new JobSet's pod running")
    assert pod["metadata"]["ownerReferences"][0]["name"] == f"{name}-node-0"
    call(lambda c: c.delete(r.TRAINJOB, name, namespace))


def test_a_finished_trainjob_does_not_get_its_jobset_back(namespace: str, operator: DeployedOperator) -> None:
    """The other side of re-creation: a JobSet removed after the job finished (its TTL) stays gone."""
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, trainer=sh("true"))))
    assert wait_finished(name, namespace)["type"] == "Complete"
    call(lambda c: c.delete(r.JOBSET, name, namespace))
    wait_until(lambda: get(r.JOBSET, name, namespace) is None, 120, "JobSet gone")
    before = reconciles(operator)
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"metadata": {"labels": {"poke": "1"}}}))
    wait_until(lambda: handled_since(operator, before), 120, "the operator to handle the poke")
    assert get(r.JOBSET, name, namespace) is None


def test_operator_pod_force_killed_under_load_loses_no_trainjob(
    fresh_namespace: str, operator: DeployedOperator
) -> None:
    """20 TrainJobs created at once; the leader's pod is force-deleted while it works through them. The
    replacement (or a standby) takes over from the TrainJobs' state on the server: every job gets exactly one
    JobSet, owned by it, and completes."""
    ns = fresh_namespace
    rt = setup_runtime(ns)
    prefix = uniq("load")
    names = [f"{prefix}-{i}" for i in range(20)]

    async def create_all(client: Client) -> None:
        for n in names:
            await client.create(trainjob(n, ns, rt, trainer=sh("echo done")))

    call(create_all)

    def jobsets() -> list[dict[str, Any]]:
        return [j for j in list_of(r.JOBSET, ns) if j["metadata"]["name"].startswith(prefix)]

    wait_until(lambda: len(jobsets()) >= 3, 120, "the operator to start on the burst")
    leader = operator.leader()
    assert leader is not None
    killed_at = operator.kill(leader)
    print(f"force-deleted the leader {leader} with {len(jobsets())}/{len(names)} JobSets made")
    wait_until(lambda: operator.leader() not in (None, leader), 180, "a new leader")
    print(f"new leader {operator.leader()} after {time.monotonic() - killed_at:.1f}s")

    def all_done() -> bool:
        return all(
            any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conds)
            for conds in (
                (tj.get("status") or {}).get("conditions") or []
                for tj in list_of(r.TRAINJOB, ns)
                if tj["metadata"]["name"].startswith(prefix)
            )
        ) and len([tj for tj in list_of(r.TRAINJOB, ns) if tj["metadata"]["name"].startswith(prefix)]) == len(names)

    wait_until(all_done, 600, "all 20 TrainJobs to finish")
    print(f"all {len(names)} finished {time.monotonic() - killed_at:.1f}s after the kill")
    tjs = {tj["metadata"]["name"]: tj for tj in list_of(r.TRAINJOB, ns)}
    by_owner = {j["metadata"]["ownerReferences"][0]["uid"]: j["metadata"]["name"] for j in jobsets()}
    for n in names:
        conds = {c["type"]: c for c in tjs[n]["status"]["conditions"]}
        assert conds["Complete"]["status"] == "True", (n, conds)
        assert "ResourcesCreationFailed" not in conds, (n, conds)
        assert by_owner[tjs[n]["metadata"]["uid"]] == n
    assert len(jobsets()) == len(names)
