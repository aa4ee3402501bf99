"""Admission warnings survive the API server: at most 120 characters, key words first, the complete text in an
Event (and never an Event for a dry run)."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from aiohttp.test_utils import TestClient, TestServer
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api.errors import Finding
from kubetrain.api.validation import deprecation_warning
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.webhook import names
from kubetrain.k8s.webhook.admission import Request
from kubetrain.k8s.webhook.server import make_app
from kubetrain.k8s.webhook.warnings import MAX_LENGTH, SEE_EVENTS, admission_warnings, brief
from kubetrain.k8s.webhook.wiring import ClientAdapter
from tests.k8s.helpers import fake_env, run
from tests.k8s.webhook.conftest import _runtime, trainjob

DEPRECATED = {"trainer.kubeflow.org/support": "deprecated"}


def warning(message: str, path: str = "spec.runtimeRef", fix: str | None = None) -> Finding:
    return Finding(path, message, fix, "warning")


def test_short_messages_pass_unchanged() -> None:
    assert brief(warning("minMember 9 exceeds the 4 pods this TrainJob creates")) == (
        "minMember 9 exceeds the 4 pods this TrainJob creates"
    )


def test_the_deprecation_notice_leads_with_deprecated() -> None:
    rt = _runtime("old-torch", **DEPRECATED)
    full = deprecation_warning(rt, referenced=True)
    assert full is not None and len(full) > 2 * MAX_LENGTH - 40
    assert brief(warning(full)) == (
        'deprecated runtime: ClusterTrainingRuntime "old-torch" will be removed in a future release'
    )


def test_a_long_runtime_name_is_shortened_not_the_key_words() -> None:
    rt = _runtime("r" * 200, **DEPRECATED)
    text = brief(warning(deprecation_warning(rt, referenced=True) or ""))
    assert len(text) == MAX_LENGTH
    assert text.startswith('deprecated runtime: ClusterTrainingRuntime "rrrr')
    assert text.endswith('…" will be removed in a future release')


def test_generic_long_messages_keep_their_first_clause_or_whole_words() -> None:
    clause = "no replicated job is labelled trainer.kubeflow.org/trainjob-ancestor-step: trainer, so a TrainJob's"
    text = brief(warning(clause + " trainer settings (image, command, numNodes, env) have nowhere to go"))
    assert len(text) <= MAX_LENGTH and text.endswith("…") and " " in text
    assert brief(warning("x" * 50 + ". " + "y" * 200)) == "x" * 50


@given(st.text(min_size=0, max_size=600), st.text(max_size=300))
def test_every_warning_fits(message: str, name: str) -> None:
    for msg in (message, f'Referenced ClusterTrainingRuntime "{name}" is deprecated and {message}'):
        for events in (False, True):
            (w,) = admission_warnings([warning(msg)], events=events)
            assert len(w.text) <= MAX_LENGTH
            assert w.detail.startswith("spec.runtimeRef: ")


def test_events_mode_points_at_the_event_only_for_shortened_warnings() -> None:
    long = warning("a" * 40 + ". " + "b" * 200, fix="do this")
    short = warning("fine as it is")
    got = admission_warnings([long, short, long], events=True)
    assert [w.text for w in got] == ["a" * 40 + SEE_EVENTS, "fine as it is"]
    assert got[0].detail == f"spec.runtimeRef: {'a' * 40}. {'b' * 200} (fix: do this)"


def _review(obj: dict[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "trainer.kubeflow.org", "version": "v1alpha1", "kind": obj["kind"]},
            "operation": "CREATE",
            "namespace": obj["metadata"].get("namespace"),
            "name": obj["metadata"]["name"],
            "object": obj,
            "dryRun": dry_run,
        },
    }


def test_the_server_records_the_complete_text_except_on_dry_runs() -> None:
    recorded: list[tuple[str, list[str]]] = []
    old = _runtime("old-torch", **DEPRECATED)

    async def lookup(kind: str, name: str, namespace: str | None) -> Any:
        return old if name == "old-torch" else None

    async def sink(req: Request, details: list[str]) -> None:
        recorded.append((req.name or "", details))

    async def body() -> None:
        app = make_app(lookup, warning_events=sink)
        async with TestClient(TestServer(app)) as http:
            job = trainjob(runtime="old-torch")
            for dry in (True, False):
                resp = await http.post(names.VALIDATE_TRAINJOB, data=json.dumps(_review(job, dry_run=dry)))
                answer = (await resp.json())["response"]
                assert answer["allowed"] is True
                (text,) = answer["warnings"]
                assert len(text) <= MAX_LENGTH
                assert text.endswith(SEE_EVENTS) is (not dry)
                await asyncio.sleep(0)  # the Event is written after the answer
        assert recorded == [("job", [f"spec.runtimeRef: {deprecation_warning(old, referenced=True)}"])]

    run(body)


def test_the_event_names_the_object_and_carries_the_complete_text() -> None:
    async def body() -> None:
        async with fake_env() as env:
            job = trainjob()
            job["metadata"]["uid"] = "u-1"
            req = Request.parse(_review(job))
            await ClientAdapter(env.client).warning_event(req, ["spec.runtimeRef: the whole story"])
            (event,) = (await env.client.list(r.EVENT, "default"))[0]
            assert event["involvedObject"] == {
                "apiVersion": "trainer.kubeflow.org/v1alpha1",
                "kind": "TrainJob",
                "name": "job",
                "namespace": "default",
                "uid": "u-1",
            }
            assert (event["type"], event["reason"], event["message"]) == (
                "Warning",
                "AdmissionWarning",
                "spec.runtimeRef: the whole story",
            )

    run(body)


def test_pod_security_warnings_stay_next_to_a_shortened_one() -> None:
    """Pod Security findings are brief already; pointing the shortened warning at its Event must keep them."""
    old = _runtime("old-torch", **DEPRECATED)
    pod = old.spec.template.spec.replicated_jobs[0].template.spec.template.spec
    pod["containers"][0]["securityContext"] = {"privileged": True}

    async def lookup(kind: str, name: str, namespace: str | None) -> Any:
        return old

    async def sink(req: Request, details: list[str]) -> None:
        return None

    async def body() -> None:
        app = make_app(lookup, warning_events=sink)
        async with TestClient(TestServer(app)) as http:
            resp = await http.post(names.VALIDATE_TRAINJOB, data=json.dumps(_review(trainjob(runtime="old-torch"))))
            warnings = (await resp.json())["response"]["warnings"]
        assert warnings[0].startswith("deprecated runtime: ") and warnings[0].endswith(SEE_EVENTS)
        assert any(w.startswith("PodSecurity baseline: ") and "privileged" in w for w in warnings[1:]), warnings
        # Each within 120 characters, but PodSecurity's own line listing what restricted refuses (as long as
        # kube-apiserver's, which the API server keeps whole while all warnings stay under 4 KiB).
        assert all(len(w) <= MAX_LENGTH for w in warnings if "would violate PodSecurity" not in w)
        assert warnings[-1].startswith('job node: would violate PodSecurity "restricted:latest": privileged (')

    run(body)
