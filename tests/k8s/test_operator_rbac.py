"""The operator's RBAC is what it calls, no more and no less: every request the operator and its webhook make
during a full run (leader election, self-signed webhook certificates, torch/MPI/Volcano jobs, suspend and
resume, deadline, a legacy runtime finalizer, admission reviews) is checked against the rules shipped in
manifests/base/rbac, and every rule must have been needed by some request (or be on the short, explained list of
rules the API server checks on its own)."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from kubetrain.api import constants as c
from kubetrain.api.progress import status_path
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.session import ApiSession
from kubetrain.testing.fakeapi.server import default_resources
from tests.builders import optimizationjob
from tests.k8s.helpers import (
    add_pod,
    fake_env,
    mpi_runtime,
    run,
    running_operator,
    token_for,
    torch_runtime,
    trainjob,
    wait_for,
)
from tests.k8s.manifests.conftest import BASE

pytest.importorskip("kubetrain.k8s.webhook.server", reason="the webhook package is not installed")

OPERATOR_NS = "kubeflow-system"
VWC = r.Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False
)
MWC = r.Resource(
    "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False
)

# Rules no client call exercises, and why they are still needed.
NOT_CALLED = {
    # OwnerReferencesPermissionEnforcement: setting blockOwnerDeletion on an owned object requires update on
    # the owner's finalizers subresource; the API server checks it, the operator never calls it.
    ("trainer.kubeflow.org", "trainjobs/finalizers", "update"),
    # The same for the trials an OptimizationJob owns.
    ("trainer.kubeflow.org", "optimizationjobs/finalizers", "update"),
    # The runtime snapshot is re-read only after losing a create race (a previous incarnation wrote it).
    ("", "configmaps", "get"),
    # The webhook certificate Secret is updated only when the certificate is renewed (weeks later).
    ("", "secrets", "update"),
}


@dataclass(frozen=True)
class Call:
    verb: str
    group: str
    resource: str  # "trainjobs" or "trainjobs/status"
    namespace: str | None
    name: str | None


def to_call(method: str, path: str, params: Any, content_type: str | None) -> list[Call]:
    parts = [p for p in path.split("/") if p]
    group, rest = ("", parts[2:]) if parts[0] == "api" else (parts[1], parts[3:])
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    name = rest[1] if len(rest) > 1 else None
    if method == "GET":
        verb = "get" if name else ("watch" if (params or {}).get("watch") else "list")
    else:
        verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[method]
    calls = [Call(verb, group, resource, namespace, name)]
    if content_type == "application/apply-patch+yaml":
        calls.append(Call("create", group, resource, namespace, name))  # an apply that creates needs create
    return calls


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[list[Call], set[int]]]:
    """Calls made by every ApiSession except the ones listed in the returned id set (the test's own)."""
    calls: list[Call] = []
    ignore: set[int] = set()
    request, stream = ApiSession.request, ApiSession.stream

    async def recording_request(self: ApiSession, method: str, path: str, **kw: Any) -> Any:
        if id(self) not in ignore:
            calls.extend(to_call(method, path, kw.get("params"), kw.get("content_type")))
        return await request(self, method, path, **kw)

    def recording_stream(self: ApiSession, path: str, **kw: Any) -> Any:
        if id(self) not in ignore:
            calls.extend(to_call("GET", path, kw.get("params"), None))
        return stream(self, path, **kw)

    monkeypatch.setattr(ApiSession, "request", recording_request)
    monkeypatch.setattr(ApiSession, "stream", recording_stream)
    yield calls, ignore


def shipped_rules() -> list[tuple[str | None, dict[str, Any]]]:
    """(namespace or None for cluster-wide, rule) of everything bound to the operator's ServiceAccount."""
    docs = [d for p in (BASE / "rbac").glob("*.yaml") if p.name != "kustomization.yaml"
            for d in yaml.safe_load_all(p.read_text()) if d]  # fmt: skip
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("Role", "ClusterRole")}
    out = []
    for b in docs:
        if b["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        if {"kind": "ServiceAccount", "name": "kubetrain-operator", "namespace": OPERATOR_NS} not in b["subjects"]:
            continue
        role = roles[(b["roleRef"]["kind"], b["roleRef"]["name"])]
        scope = b["metadata"].get("namespace") if b["kind"] == "RoleBinding" else None
        out += [(scope, rule) for rule in role["rules"]]
    return out


def allows(scope: str | None, rule: dict[str, Any], call: Call) -> bool:
    return (
        (scope is None or scope == call.namespace)
        and call.group in rule["apiGroups"]
        and call.resource in rule["resources"]
        and call.verb in rule["verbs"]
        and ("resourceNames" not in rule or call.name in rule["resourceNames"])
    )


def review(obj: dict[str, Any], kind: str, operation: str = "CREATE", old: dict[str, Any] | None = None) -> Any:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "kind": {"group": c.GROUP, "version": c.VERSION, "kind": kind},
            "resource": {"group": c.GROUP, "version": c.VERSION, "resource": kind.lower() + "s"},
            "operation": operation,
            "namespace": obj["metadata"].get("namespace"),
            "name": obj["metadata"]["name"],
            "object": obj,
            "oldObject": old,
        },
    }


def scale_review(name: str, replicas: int) -> Any:
    scale = {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": "default"},
             "spec": {"replicas": replicas}}
    body = review(scale, "Scale", "UPDATE", scale)
    body["request"]["kind"] = {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    body["request"]["subResource"] = "scale"
    return body


def test_operator_calls_match_its_rbac_exactly(
    recorded: tuple[list[Call], set[int]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubetrain.k8s.webhook import names, webhook_configurations

    calls, ignore = recorded
    monkeypatch.setenv("POD_NAMESPACE", OPERATOR_NS)
    monkeypatch.setenv("KUBETRAIN_WEBHOOK_CERT_MODE", "self-signed")
    volcano = torch_runtime("volcano") | {}
    volcano["spec"] = dict(volcano["spec"], podGroupPolicy={"volcano": {}})
    legacy = torch_runtime("legacy")
    legacy["metadata"]["finalizers"] = ["trainer.kubeflow.org/resource-in-use"]
    team = torch_runtime("team") | {"kind": "TrainingRuntime"}
    team["metadata"] = dict(team["metadata"], namespace="default", finalizers=["trainer.kubeflow.org/resource-in-use"])
    team_job = trainjob("team-job", runtime="team")
    team_job["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
    cpu = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}
    elastic = torch_runtime("elastic")
    elastic["spec"]["mlPolicy"] = {"torch": {"elasticPolicy": {"minNodes": 1, "maxNodes": 4, "metrics": [cpu]}}}

    async def body() -> None:
        async with fake_env(resources=[*default_resources(), (VWC, False), (MWC, False)]) as env:
            ignore.add(id(env.client.session))
            for obj in (torch_runtime(), mpi_runtime(), volcano, legacy, team, elastic):
                await env.client.create(obj)
            for config in webhook_configurations():
                await env.client.create(config, resource=VWC if config["kind"] == VWC.kind else MWC)
            await env.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
            async with running_operator(
                env,
                leader_election=True,
                lease_namespace=OPERATOR_NS,
                webhook_port=0,
                webhook_cert_dir=str(tmp_path / "certs"),
                status_port=0,
            ) as op:
                await env.client.create(trainjob("torch", activeDeadlineSeconds=1))
                await env.client.create(trainjob("mpi", runtime="mpi"))
                await env.client.create(trainjob("vc", runtime="volcano"))
                await env.client.create(trainjob("lost", runtime="missing"))
                # A failing pod: watched (pods list/watch), its last lines read (pods/log get); then its JobSet
                # fails and the failed Job's reason is looked up (jobs list).
                await env.client.create(trainjob("crash"))
                await wait_for(lambda: env.find("jobsets", "crash", group="jobset.x-k8s.io"), what="JobSet")
                crash = await add_pod(env, "crash")
                env.api.pod_logs.write("default", crash["metadata"]["name"], "ValueError: boom\n")
                terminated = {"exitCode": 3, "reason": "Error", "finishedAt": "2026-01-01T00:00:00Z"}
                await env.client.patch_status(r.POD, crash["metadata"]["name"], "default", {
                    "phase": "Failed", "containerStatuses": [{"name": "node", "restartCount": 0,
                                                              "state": {"terminated": terminated}}]})  # fmt: skip
                await wait_for(lambda: (env.get("trainjobs", "crash").get("status") or {}).get("podFailures"))
                await env.client.patch_status(r.JOBSET, "crash", "default", {"conditions": [
                    {"type": "Failed", "status": "True", "reason": "FailedJobs", "message": "jobset failed",
                     "lastTransitionTime": "2026-01-01T00:00:01Z"}]})  # fmt: skip
                # Elastic: an HPA; a new node count resized in place (update), then refused and re-created
                # (the trainer pods' failures are listed, the JobSet deleted).
                await env.client.create(trainjob("el", runtime="elastic", trainer={"numNodes": 2}))
                await wait_for(lambda: env.find("horizontalpodautoscalers", "el", group="autoscaling"), what="HPA")
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 3}}})
                await wait_for(lambda: env.get("trainjobs", "el").get("status", {}).get("numNodes") == 3)
                env.api.inject("PUT", r"/jobsets/el(\?|$)", 422)
                await env.client.merge_patch(r.TRAINJOB, "el", "default", {"spec": {"trainer": {"numNodes": 4}}})
                await wait_for(lambda: env.get("trainjobs", "el").get("status", {}).get("numNodes") == 4)
                # An OptimizationJob: its trial applied (patch, create), its status patched.
                await env.client.create(optimizationjob(numTrials=1, parallelTrials=1))
                await wait_for(lambda: env.find("trainjobs", "tune-0"), what="a trial")
                await wait_for(lambda: (env.get("optimizationjobs", "tune").get("status") or {}).get("conditions"),
                               what="the OptimizationJob's status")
                await wait_for(lambda: env.find("podgroups", "vc", group="scheduling.volcano.sh"), what="Volcano")
                await wait_for(lambda: env.find("podgroups", "mpi", group="scheduling.x-k8s.io"), what="PodGroup")
                await env.client.merge_patch(r.TRAINJOB, "vc", "default", {"spec": {"suspend": True}})
                await wait_for(lambda: env.get("jobsets", "vc", group="jobset.x-k8s.io")["spec"]["suspend"])
                failed = lambda: any(  # noqa: E731
                    x["type"] == "Failed"
                    for x in (env.get("trainjobs", "torch").get("status") or {}).get("conditions", [])
                )
                await wait_for(failed, what="deadline")
                await wait_for(lambda: not env.find("jobsets", "torch", group="jobset.x-k8s.io"), what="JobSet gone")
                await wait_for(
                    lambda: not env.get("clustertrainingruntimes", "legacy", None)["metadata"].get("finalizers")
                )
                await wait_for(lambda: not env.get("trainingruntimes", "team")["metadata"].get("finalizers"))
                # A JobSet Kueue queues itself: suspending its TrainJob deactivates its Workload (list, patch).
                queued = trainjob("q")
                queued["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "lq"}
                await env.client.create(queued)
                qjs = await wait_for(lambda: env.find("jobsets", "q", group="jobset.x-k8s.io"), what="queued JobSet")
                workload = {
                    "apiVersion": "kueue.x-k8s.io/v1beta1",
                    "kind": "Workload",
                    "metadata": {"name": "wl-q", "namespace": "default",
                                 "labels": {"kueue.x-k8s.io/job-uid": qjs["metadata"]["uid"]}},
                    "spec": {"active": True},
                }  # fmt: skip
                await env.client.create(workload)
                await env.client.merge_patch(r.TRAINJOB, "q", "default", {"spec": {"suspend": True}})
                await wait_for(lambda: env.get("workloads", "wl-q", group="kueue.x-k8s.io")["spec"]["active"] is False)
                # Admission: TrainJobs (runtime and namespace lookups), a runtime-patch change of a
                # suspended job (JobSet lookup), a TrainingRuntime (namespace lookup).
                old = env.get("trainjobs", "vc")
                new = yaml.safe_load(yaml.safe_dump(old))
                new["spec"]["runtimePatches"] = [{"manager": "kueue.x-k8s.io/manager"}]
                ctx = ssl.create_default_context()
                ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
                base = f"https://127.0.0.1:{op.webhook.port}"
                async with aiohttp.ClientSession() as http:
                    for path, body in (
                        (names.VALIDATE_TRAINJOB, review(trainjob("new", runtime="mpi"), "TrainJob")),
                        (names.VALIDATE_TRAINJOB, review(team_job, "TrainJob")),
                        (names.VALIDATE_TRAINJOB, review(new, "TrainJob", "UPDATE", old)),
                        (names.VALIDATE_TRAINING_RUNTIME, review(team, "TrainingRuntime")),
                        (names.VALIDATE_TRAINJOB, scale_review("el", 2)),  # reads the TrainJob
                        (names.VALIDATE_OPTIMIZATIONJOB, review(optimizationjob("other"), "OptimizationJob")),
                    ):
                        async with http.post(base + path, json=body, ssl=ctx) as resp:
                            assert (await resp.json())["response"]["uid"] == "u"
                    # A progress report from a pod of the MPI job: TokenReview, the job's pods, a status patch.
                    assert op.status_endpoint is not None
                    pod = await add_pod(env, "mpi")
                    token = await token_for(env, pod)
                    url = f"https://127.0.0.1:{op.status_endpoint.port}{status_path('default', 'mpi')}"
                    report = {"trainerStatus": {"lastUpdatedTime": "2026-01-01T00:00:00Z", "progressPercentage": 5}}
                    headers = {"Authorization": f"Bearer {token}"}
                    async with http.post(url, json=report, headers=headers, ssl=ctx) as resp:
                        assert resp.status == 200, await resp.text()
                await wait_for(lambda: any(
                    x["type"] == "Failed" for x in env.get("trainjobs", "crash")["status"].get("conditions", [])))
                await wait_for(lambda: len(op.queue) == 0 and op.queue.processing == 0)

    run(body)
    rules = shipped_rules()
    denied = sorted(
        {(x.verb, x.group, x.resource, x.namespace) for x in calls if not any(allows(s, rule, x) for s, rule in rules)}
    )
    assert denied == [], "the operator makes calls its RBAC does not grant"
    granted = {
        (g, res, v) for _, rule in rules for g in rule["apiGroups"] for res in rule["resources"] for v in rule["verbs"]
    }
    used = {(x.group, x.resource, x.verb) for x in calls}
    assert sorted(granted - used - NOT_CALLED) == [], "RBAC grants what the operator never uses"
    assert granted >= NOT_CALLED
