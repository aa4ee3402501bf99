"""Operator scenarios on a real API server (reference §9.2 where they apply without nodes)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    OperatorProcess,
    call,
    complete_jobset,
    conditions,
    get,
    setup_runtime,
    trainjob,
    uniq,
    wait_until,
)

pytestmark = pytest.mark.e2e


def test_create_makes_one_jobset_owned_by_the_trainjob(namespace: str, operator: OperatorProcess) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    created = call(lambda c: c.create(trainjob(name, namespace, rt)))
    js = wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    (ref,) = js["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["name"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
        "TrainJob",
        name,
        created["metadata"]["uid"],
        True,
        True,
    )
    assert {m["manager"] for m in js["metadata"]["managedFields"]} == {"kubetrain"}
    assert get(r.CONFIGMAP, f"{name}-runtime-snapshot", namespace) is not None


@pytest.mark.parametrize(
    ("js_type", "tj_type", "reason", "message"),
    [
        ("Completed", "Complete", "AllJobsCompleted", "jobset completed successfully"),
        ("Failed", "Failed", "FailedJobs", "jobset failed due to one or more job failures"),
    ],
)
def test_jobset_terminal_status_becomes_trainjob_condition(
    namespace: str, operator: OperatorProcess, js_type: str, tj_type: str, reason: str, message: str
) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt)))
    wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    cond = {
        "type": js_type,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    call(lambda c: c.patch_status(r.JOBSET, name, namespace, {"conditions": [cond]}))
    got = wait_until(lambda: conditions(name, namespace).get(tj_type), what=tj_type)
    assert (got["status"], got["reason"], got["message"]) == ("True", reason, message)


def test_suspend_and_resume(namespace: str, operator: OperatorProcess) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt)))
    wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"suspend": True}}))
    wait_until(lambda: (get(r.JOBSET, name, namespace) or {}).get("spec", {}).get("suspend") is True)
    wait_until(lambda: conditions(name, namespace).get("Suspended", {}).get("reason") == "Suspended")
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"suspend": False}}))
    wait_until(lambda: (get(r.JOBSET, name, namespace) or {}).get("spec", {}).get("suspend") is False)
    resumed = wait_until(lambda: conditions(name, namespace).get("Suspended", {}).get("reason") == "Resumed")
    assert resumed


def _image(js: dict[str, Any]) -> str:
    return str(js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"])


def test_runtime_edit_does_not_touch_an_existing_job(namespace: str, operator: OperatorProcess) -> None:
    from tests.e2e.conftest import torch_runtime

    rt = setup_runtime(namespace, image="busybox:1.36")
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt)))
    js = wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    call(lambda c: c.apply(torch_runtime(rt, "busybox:9.99", namespace=namespace)))
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"suspend": True}}))
    wait_until(lambda: (get(r.JOBSET, name, namespace) or {}).get("spec", {}).get("suspend") is True)
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"spec": {"suspend": False}}))
    after = wait_until(
        lambda: (j := get(r.JOBSET, name, namespace)) and j["spec"].get("suspend") is False and j, what="resume"
    )
    assert _image(js) == _image(after) == "busybox:1.36"


def test_delete_collects_children(namespace: str, operator: OperatorProcess, garbage_collector: bool) -> None:
    if not garbage_collector:
        pytest.skip(
            "no garbage collector: a dependent outlived its deleted owner by 30 s (run kube-controller-manager)"
        )
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt)))
    wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    call(lambda c: c.delete(r.TRAINJOB, name, namespace))
    wait_until(lambda: get(r.JOBSET, name, namespace) is None, what="JobSet collected")
    wait_until(lambda: get(r.CONFIGMAP, f"{name}-runtime-snapshot", namespace) is None, what="snapshot collected")


def test_active_deadline_fails_and_deletes_the_jobset(namespace: str, operator: OperatorProcess) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt, activeDeadlineSeconds=3)))
    failed = wait_until(lambda: conditions(name, namespace).get("Failed"), 60, "DeadlineExceeded")
    assert (failed["reason"], failed["message"]) == ("DeadlineExceeded", "TrainJob exceeded its active deadline")
    wait_until(lambda: get(r.JOBSET, name, namespace) is None, what="JobSet deleted")


def test_managed_by_multikueue_is_left_alone(namespace: str, operator: OperatorProcess) -> None:
    rt = setup_runtime(namespace)
    mk, ours = uniq("mk"), uniq("tj")
    call(lambda c: c.create(trainjob(mk, namespace, rt, managedBy="kueue.x-k8s.io/multikueue")))
    call(lambda c: c.create(trainjob(ours, namespace, rt)))
    wait_until(lambda: get(r.JOBSET, ours, namespace), what="our JobSet")
    assert get(r.JOBSET, mk, namespace) is None
    assert not (get(r.TRAINJOB, mk, namespace) or {}).get("status")


def test_a_jobset_deleted_by_hand_is_recreated(namespace: str, operator: OperatorProcess) -> None:
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt)))
    first = wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    call(lambda c: c.delete(r.JOBSET, name, namespace))
    again = wait_until(
        lambda: (j := get(r.JOBSET, name, namespace)) and j["metadata"]["uid"] != first["metadata"]["uid"] and j,
        what="a new JobSet",
    )
    assert again["metadata"]["ownerReferences"] == first["metadata"]["ownerReferences"]
    assert again["spec"]["replicatedJobs"] == first["spec"]["replicatedJobs"]  # from the same snapshot


def test_a_finished_trainjob_does_not_get_its_jobset_back(namespace: str, operator: OperatorProcess) -> None:
    """The other side of re-creation: a JobSet removed after the job finished (its TTL) stays gone."""
    rt = setup_runtime(namespace)
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt)))
    wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet")
    complete_jobset(name, namespace)
    wait_until(lambda: conditions(name, namespace).get("Complete"), what="Complete")
    call(lambda c: c.delete(r.JOBSET, name, namespace))
    wait_until(lambda: get(r.JOBSET, name, namespace) is None, what="JobSet gone")
    call(lambda c: c.merge_patch(r.TRAINJOB, name, namespace, {"metadata": {"labels": {"poke": "1"}}}))
    time.sleep(3)  # give a wrong re-creation time to happen; the assertion is on absence, not on timing
    assert get(r.JOBSET, name, namespace) is None


def test_a_trainjob_created_while_the_operator_is_down_is_reconciled(kubeconfig: str, namespace: str) -> None:
    rt = setup_runtime(namespace)
    op = OperatorProcess(kubeconfig, namespace, "--namespace", namespace).start()
    op.stop()
    name = uniq("tj")
    call(lambda c: c.create(trainjob(name, namespace, rt)))
    time.sleep(1)
    assert get(r.JOBSET, name, namespace) is None  # nobody is reconciling
    op.start()
    try:
        js = wait_until(lambda: get(r.JOBSET, name, namespace), what="JobSet after the operator came back")
        assert js["metadata"]["ownerReferences"][0]["name"] == name
    finally:
        op.stop()


def test_operator_restart_mid_burst_converges(kubeconfig: str, namespace: str) -> None:
    rt = setup_runtime(namespace)
    prefix = uniq("burst")
    names = [f"{prefix}-{i}" for i in range(60)]
    op = OperatorProcess(kubeconfig, namespace, "--namespace", namespace, "--qps", "20", "--burst", "20").start()

    async def create_all(client: Client) -> None:
        for n in names:
            await client.create(trainjob(n, namespace, rt))

    call(create_all)

    def jobsets() -> list[str]:
        async def go(client: Client) -> list[str]:
            items, _ = await client.list(r.JOBSET, namespace)
            return [i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith(prefix)]

        result: list[str] = call(go)
        return result

    wait_until(lambda: len(jobsets()) >= 5, what="some JobSets")
    op.kill()  # no graceful shutdown: the harshest restart
    op.start()
    try:
        wait_until(lambda: len(jobsets()) == len(names), 180, "all JobSets after restart")
        assert sorted(jobsets()) == sorted(names)
        for n in names:
            tj = get(r.TRAINJOB, n, namespace)
            js = get(r.JOBSET, n, namespace)
            assert tj and js and js["metadata"]["ownerReferences"][0]["uid"] == tj["metadata"]["uid"]
            assert "ResourcesCreationFailed" not in conditions(n, namespace)
    finally:
        op.stop()
