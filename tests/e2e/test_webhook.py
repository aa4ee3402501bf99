"""The admission webhook as installed: served by the operator pods behind Service ``kubetrain-operator`` and called by
the API server through the webhook configurations of manifests/base/webhook."""

from __future__ import annotations

import pytest

from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import CTR, DeployedOperator, call, sh, torch_runtime, trainjob, uniq, wait_until

pytestmark = pytest.mark.e2e


KUEUE_TRAINJOB_WEBHOOK = "vtrainjob.kb.io"


def _refusal(trainjob_body: dict[str, object]) -> ApiError:
    async def go(client: Client) -> ApiError:
        try:
            await client.create(trainjob_body)
        except ApiError as exc:
            return exc
        raise AssertionError(f"the API server accepted {trainjob_body}")

    return call(go)


def test_bad_trainjob_is_rejected_with_the_field_error(namespace: str, operator: DeployedOperator) -> None:
    err = _refusal(trainjob("bad", namespace, "does-not-exist"))
    assert err.status == 403
    if f'admission webhook "{KUEUE_TRAINJOB_WEBHOOK}"' in err.message:
        # Kueue's TrainJob integration validates every TrainJob too (its pod sets need the runtime) and, being
        # quicker, answers first: the API server reports the first refusal of webhooks that run side by side.
        assert "'does-not-exist' not found" in err.message
    else:
        assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in err.message
        assert 'TrainingRuntime "does-not-exist" not found' in err.message
    # A mistake only kubetrain's webhook judges, so its answer shows whichever webhooks the cluster has.
    rt = torch_runtime(uniq("rt"), namespace)
    call(lambda c: c.apply(rt))
    body = trainjob(uniq("bad"), namespace, rt["metadata"]["name"], suspend=True, runtimePatches=[
        {"manager": "example.com/tuner",
         "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"name": "ghost"}]}}}},
    ])
    err = _refusal(body)
    assert err.status == 403, err.message
    assert 'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request' in err.message
    assert "spec.runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[0]" in err.message
    assert "doesn't exist in the runtime job template" in err.message


def test_a_long_warning_arrives_whole_and_brief_with_the_details_in_an_event(
    namespace: str, operator: DeployedOperator
) -> None:
    """The deprecation notice is 200 characters upstream; the client gets at most 120, unmangled, and
    `kubectl describe trainjob` shows the complete text."""
    rt_name = uniq("kt-old")
    rt = torch_runtime(rt_name)
    rt["metadata"]["labels"]["trainer.kubeflow.org/support"] = "deprecated"
    job = uniq("uses-old")

    async def go(client: Client) -> tuple[list[str], str]:
        await client.apply(rt)
        try:
            client.session.warnings.clear()
            tj = trainjob(job, namespace, rt_name, kind="ClusterTrainingRuntime", trainer=sh("true"))
            created = await client.create(tj)
            return list(client.session.warnings), created["metadata"]["uid"]
        finally:
            await client.delete(CTR, rt_name, missing_ok=True)

    warnings, uid = call(go)
    brief = f'deprecated runtime: ClusterTrainingRuntime "{rt_name}" will be removed in a future release'
    assert warnings == [brief + "; see Events"]
    assert all(len(w) <= 120 for w in warnings)

    def event() -> dict | None:
        async def go(client: Client) -> list[dict]:
            items, _ = await client.list(r.EVENT, namespace)
            return items

        for e in call(go):
            if e["involvedObject"].get("name") == job and e["reason"] == "AdmissionWarning":
                return e
        return None

    ev = wait_until(event, 30, "the admission warning Event")
    assert ev["involvedObject"]["uid"] == uid  # so `kubectl describe trainjob` lists it
    full = f'spec.runtimeRef: Referenced ClusterTrainingRuntime "{rt_name}" is deprecated'
    assert ev["message"].startswith(full)
    assert "runtime-deprecation-policy" in ev["message"]


def test_a_dry_run_gets_the_warning_but_records_no_event(namespace: str, operator: DeployedOperator) -> None:
    rt_name = uniq("kt-old")
    rt = torch_runtime(rt_name)
    rt["metadata"]["labels"]["trainer.kubeflow.org/support"] = "deprecated"
    job = uniq("dry")

    async def go(client: Client) -> list[str]:
        await client.apply(rt)
        try:
            client.session.warnings.clear()
            obj = trainjob(job, namespace, rt_name, kind="ClusterTrainingRuntime", trainer=sh("true"))
            await client.session.request("POST", r.TRAINJOB.path(namespace), params={"dryRun": "All"}, body=obj)
            return list(client.session.warnings)
        finally:
            await client.delete(CTR, rt_name, missing_ok=True)

    (warning,) = call(go)
    assert warning.startswith("deprecated runtime: ") and not warning.endswith("; see Events")

    async def events(client: Client) -> list[dict]:
        items, _ = await client.list(r.EVENT, namespace)
        return [e for e in items if e["involvedObject"].get("name") == job]

    assert call(events) == []
