"""The TrainJob defaulter: runtimePatches[].time stamping, as a JSONPatch in the admission response."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from kubetrain.k8s.webhook import names
from kubetrain.k8s.webhook.defaulting import format_time, runtime_patch_times
from tests.k8s.webhook.conftest import NOW, STAMP, Served, trainjob

M = names.MUTATE_TRAINJOB
EARLIER = "2026-01-01T00:00:00Z"


def job(*patches: dict[str, Any]) -> dict[str, Any]:
    return trainjob(suspend=True, runtimePatches=list(patches))


def patch(manager: str, selector: str = "a", time: str | None = None) -> dict[str, Any]:
    p: dict[str, Any] = {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"metadata": {"labels": {"pool": selector}}}},
    }
    if time:
        p["time"] = time
    return p


def decoded(resp: dict[str, Any]) -> list[dict[str, Any]]:
    assert resp["patchType"] == "JSONPatch"
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(resp["patch"]))
    return ops


def test_create_stamps_every_patch_without_a_time_over_tls(served: Served) -> None:
    resp = served.review(M, job(patch("acme.io/a"), patch("acme.io/b", time=EARLIER)))
    assert resp["allowed"] is True
    assert decoded(resp) == [{"op": "add", "path": "/spec/runtimePatches/0/time", "value": STAMP}]


def test_nothing_to_stamp_means_no_patch(served: Served) -> None:
    resp = served.review(M, trainjob())
    assert resp == {"uid": resp["uid"], "allowed": True}


def test_update_unchanged_patch_keeps_its_old_time(served: Served) -> None:
    old = job(patch("acme.io/a", time=EARLIER))
    new = job(patch("acme.io/a"))  # client dropped the time, content the same
    resp = served.review(M, new, old=old, operation="UPDATE")
    assert decoded(resp) == [{"op": "add", "path": "/spec/runtimePatches/0/time", "value": EARLIER}]


def test_update_changed_patch_gets_now_even_over_a_client_time(served: Served) -> None:
    old = job(patch("acme.io/a", "x", time=EARLIER))
    new = job(patch("acme.io/a", "y", time=EARLIER))
    resp = served.review(M, new, old=old, operation="UPDATE")
    assert decoded(resp) == [{"op": "replace", "path": "/spec/runtimePatches/0/time", "value": STAMP}]


def test_update_new_manager_keeps_a_given_time_and_stamps_a_missing_one() -> None:
    old = job(patch("acme.io/a", time=EARLIER))
    new = job(
        patch("acme.io/a", time=EARLIER), patch("acme.io/b"), patch("acme.io/c", time="2026-05-05T00:00:00Z")
    )
    assert runtime_patch_times(new, old, "UPDATE", NOW) == [
        {"op": "add", "path": "/spec/runtimePatches/1/time", "value": STAMP}
    ]


def test_unchanged_patch_without_an_old_time_stays_without_one() -> None:
    """Objects created before the defaulter existed: restoring 'no time' keeps the update a patch no-op."""
    old = job(patch("acme.io/a"))
    new = job(patch("acme.io/a", time=EARLIER))
    assert runtime_patch_times(new, old, "UPDATE", NOW) == [
        {"op": "remove", "path": "/spec/runtimePatches/0/time"}
    ]


def test_manager_names_with_slashes_do_not_break_the_pointer() -> None:
    ops = runtime_patch_times(job(patch("kueue.x-k8s.io/manager")), None, "CREATE", NOW)
    assert ops[0]["path"] == "/spec/runtimePatches/0/time"


def test_time_format_is_metav1_time() -> None:
    assert format_time(NOW.replace(microsecond=123456)) == STAMP


def test_mutation_does_not_touch_the_request_object() -> None:
    obj = job(patch("acme.io/a"))
    before = copy.deepcopy(obj)
    runtime_patch_times(obj, None, "CREATE", NOW)
    assert obj == before


@pytest.mark.parametrize(("path", "operation", "obj", "old"), [
    # The defaulter sees a request before the API server checks the schema: each of these was an
    # AttributeError, answered as a 500 "internal error" that blocked the create.
    (M, "CREATE", {**trainjob(), "spec": ["runtimeRef"]}, None),
    (M, "UPDATE", {**trainjob(), "metadata": ["job"]}, trainjob()),
    (M, "UPDATE", job(patch("acme.io/a")), {**trainjob(), "spec": "x"}),
    (M, "UPDATE", job({**patch("a"), "manager": ["acme.io/a"]}), job(patch("acme.io/a"))),
    (M, "CREATE", {**trainjob(), "spec": {"runtimeRef": {"name": "torch-distributed", "kind": "TrainingRuntime"}},
                   "metadata": {"name": "job", "namespace": ["team"]}}, None),
    (names.VALIDATE_TRAINJOB, "UPDATE", {**trainjob(), "metadata": ["job"]}, trainjob()),
])  # fmt: skip
def test_requests_of_any_shape_are_answered_not_crashed(
    served: Served, path: str, operation: str, obj: dict[str, Any], old: dict[str, Any] | None
) -> None:
    resp = served.review(path, obj, old=old, operation=operation)
    assert resp.get("status", {}).get("code") != 500, resp
    assert "internal error" not in json.dumps(resp)
