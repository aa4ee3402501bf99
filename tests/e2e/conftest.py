"""e2e against a real API server: runs only when ``KUBETRAIN_E2E_KUBECONFIG`` names a kubeconfig (CI skips it).

The cluster needs a kube-apiserver; kube-controller-manager is needed for garbage collection (detected by
behaviour). No nodes and no JobSet controller are needed: tests play the JobSet controller by patching status.

The session fixtures install (server-side apply) kubetrain's *current* CRDs, and the JobSet CRD from
``shared/reference`` when the cluster has none, then make one namespace for the session. Operators (and their
webhook) run as local processes; the API server calls the webhook on 127.0.0.1.

Reusable pieces for later suites: :func:`call`, :func:`get`, :func:`wait_until`, :class:`OperatorProcess`,
:func:`kubectl`, :func:`register_webhooks`, :func:`operator_service_account`, and the fixtures ``kubeconfig``,
``namespace``, ``fresh_namespace``, ``operator``, ``webhook``, ``garbage_collector``.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import ApiError, Client, NotFound, Resource
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.applying import apply as _apply
from kubetrain.k8s.client.config import from_kubeconfig
from tests.conftest import SHARED

KUBECONFIG = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")
KUBECTL = os.environ.get("KUBETRAIN_E2E_KUBECTL") or shutil.which("kubectl")
SKIP_REASON = "e2e needs a real API server: set KUBETRAIN_E2E_KUBECONFIG to a kubeconfig (cluster-admin)"
JOBSET_CRD = SHARED / "reference" / "upstream" / "jobset" / "jobset.x-k8s.io_jobsets.yaml"
REPO = Path(__file__).resolve().parents[2]

CRD = r.CRD
VWC = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "", namespaced=False)
CTR = r.CLUSTER_TRAINING_RUNTIME
SA = Resource("", "v1", "serviceaccounts", "ServiceAccount")
RBAC = {
    kind: Resource("rbac.authorization.k8s.io", "v1", plural, kind, namespaced=kind in ("Role", "RoleBinding"))
    for kind, plural in (
        ("ClusterRole", "clusterroles"),
        ("ClusterRoleBinding", "clusterrolebindings"),
        ("Role", "roles"),
        ("RoleBinding", "rolebindings"),
    )
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if KUBECONFIG:
        return
    skip = pytest.mark.skip(reason=SKIP_REASON)
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(skip)


# --- talking to the cluster from synchronous tests ---


def call(coro_fn: Callable[[Client], Any], kubeconfig: str | None = None) -> Any:
    """Run one async step with a fresh client (tests stay synchronous and simple)."""

    async def wrapper() -> Any:
        path = kubeconfig or KUBECONFIG
        assert path, SKIP_REASON
        async with Client(from_kubeconfig(path), qps=0) as client:
            return await coro_fn(client)

    return asyncio.run(wrapper())


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition") -> Any:
    """Poll until ``predicate()`` is truthy; the timeout only bounds a hang."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def get(res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
    async def go(client: Client) -> dict[str, Any] | None:
        try:
            return await client.get(res, name, namespace)
        except NotFound:
            return None

    result: dict[str, Any] | None = call(go)
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def kubectl(*args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig $KUBETRAIN_E2E_KUBECONFIG ...`` (``KUBETRAIN_E2E_KUBECTL`` or the one on PATH)."""
    if KUBECTL is None:
        pytest.skip("kubectl not found: put it on PATH or set KUBETRAIN_E2E_KUBECTL")
    assert KUBECONFIG, SKIP_REASON
    out = subprocess.run(
        [KUBECTL, "--kubeconfig", KUBECONFIG, *args], input=input, capture_output=True, text=True, timeout=300
    )
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


async def ssa(client: Client, obj: dict[str, Any], res: Resource | None = None) -> dict[str, Any]:
    """Server-side apply as field manager ``kubetrain-e2e`` (any kind; ``res`` for kinds the client does not
    know)."""
    return await _apply(client.session, obj, field_manager="kubetrain-e2e", force=True, resource=res)


# --- installing what the suite needs ---


def _established(name: str) -> bool:
    crd = get(CRD, name, None) or {}
    conds = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conds)


def _install_crds() -> None:
    """Server-side apply the CRDs this checkout generates (so the suite tests them, not a stale install) and the
    JobSet CRD when the cluster has none."""
    if get(CRD, "jobsets.jobset.x-k8s.io", None) is None:
        if not JOBSET_CRD.exists():
            pytest.fail(f"the cluster has no JobSet CRD and {JOBSET_CRD} is missing: install JobSet's CRD first")
        jobset = yaml.safe_load(JOBSET_CRD.read_text())
        call(lambda c: ssa(c, jobset))
    text = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", "crds"], check=True, capture_output=True, text=True
    ).stdout
    docs = [d for d in yaml.safe_load_all(text) if d]

    async def apply_all(client: Client) -> None:
        for doc in docs:
            await ssa(client, doc)

    call(apply_all)
    for name in ["jobsets.jobset.x-k8s.io", *(d["metadata"]["name"] for d in docs)]:
        wait_until(lambda n=name: _established(n), 60, f"CRD {name} established")


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    assert KUBECONFIG, SKIP_REASON
    _install_crds()
    return KUBECONFIG


def _create_namespace(prefix: str) -> str:
    ns = uniq(prefix)
    call(lambda c: c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    return ns


def _delete_namespace(ns: str) -> None:
    async def cleanup(client: Client) -> None:
        try:
            await client.delete(r.NAMESPACE, ns)
        except ApiError:
            pass

    call(cleanup)


@pytest.fixture(scope="session")
def namespace(kubeconfig: str) -> Iterator[str]:
    ns = _create_namespace("kt-e2e")
    yield ns
    _delete_namespace(ns)


@pytest.fixture
def fresh_namespace(kubeconfig: str) -> Iterator[str]:
    """A namespace of this test's own (for operators that must not see other tests' objects)."""
    ns = _create_namespace("kt-e2e-x")
    yield ns
    _delete_namespace(ns)


@pytest.fixture(scope="session")
def garbage_collector(kubeconfig: str, namespace: str) -> bool:
    """Whether the cluster collects garbage, found by doing it: delete an owner and watch its dependent go.

    (A kube-controller-manager without leader election has no Lease, so looking for one is not enough.)
    """
    owner_name, dependent_name = uniq("gc-owner"), uniq("gc-dependent")

    async def setup(client: Client) -> None:
        owner = await client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": owner_name, "namespace": namespace}}
        )
        ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": owner_name, "uid": owner["metadata"]["uid"]}
        dependent = {"name": dependent_name, "namespace": namespace, "ownerReferences": [ref]}
        await client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": dependent})
        await client.delete(r.CONFIGMAP, owner_name, namespace)

    call(setup)
    try:
        wait_until(lambda: get(r.CONFIGMAP, dependent_name, namespace) is None, 30, "garbage collection")
    except AssertionError:
        return False
    return True


# --- operators and the webhook as processes ---


class OperatorProcess:
    """``kubetrain operator`` as a child process: start, stop (SIGTERM), kill (SIGKILL), restart. Its output
    goes to ``log_file`` (``log()`` reads it)."""

    def __init__(self, kubeconfig: str, lease_namespace: str, *extra: str, identity: str | None = None) -> None:
        self.kubeconfig, self.lease_namespace, self.extra, self.identity = kubeconfig, lease_namespace, extra, identity
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.status_port = 0
        self.log_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"kt-e2e-operator-{uuid.uuid4().hex[:8]}.log"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kubetrain.cli.main", "operator", "--kubeconfig", self.kubeconfig]
        cmd += ["--lease-namespace", self.lease_namespace, "--health-port", str(self.health_port)]
        # Its own status endpoint port (other e2e runs may share the machine), reachable at 127.0.0.1.
        cmd += ["--status-port", str(self.status_port), "--status-url", f"https://127.0.0.1:{self.status_port}"]
        if self.identity:
            cmd += ["--identity", self.identity]
        return [*cmd, *self.extra]

    def spawn(self) -> OperatorProcess:
        """Start without waiting for readiness."""
        self.health_port = free_port()
        self.status_port = self.status_port or free_port()
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(self.command(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        return self

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    def start(self) -> OperatorProcess:
        self.spawn()

        def up() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"operator exited with {self.proc.returncode}:\n{self.log()}")
            return self.ready()

        wait_until(up, 60, "operator /readyz")
        return self

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)
        self.proc = None

    def kill(self) -> None:
        """kill -9: no graceful shutdown, the Lease is not released."""
        self.stop(signal.SIGKILL)


@pytest.fixture
def operator(kubeconfig: str, namespace: str) -> Iterator[OperatorProcess]:
    op = OperatorProcess(kubeconfig, namespace, "--namespace", namespace).start()
    try:
        yield op
    finally:
        op.stop()


@dataclass
class Webhook:
    """An operator serving the webhook, and the ValidatingWebhookConfiguration pointing the server at it."""

    namespace: str
    operator: OperatorProcess
    config_name: str


def webhook_certs(cert_dir: Path) -> bytes:
    """A CA and a serving certificate for 127.0.0.1 in ``cert_dir``; returns the CA (the caBundle)."""
    from kubetrain import pki
    from kubetrain.k8s import certs

    now = dt.datetime.now(dt.UTC)
    ca_cert, ca_key = pki.generate_ca(now)
    cert, key = pki.generate_serving_cert(ca_cert, ca_key, ["127.0.0.1", "localhost"], now)
    certs.write_cert_dir(certs.CertBundle(ca_cert=ca_cert, ca_key=ca_key, cert=cert, key=key), cert_dir)
    return ca_cert


def register_webhooks(namespace: str, port: int, ca: bytes) -> str:
    """A ValidatingWebhookConfiguration (URL clientConfig, 127.0.0.1:port) for TrainJobs and TrainingRuntimes in
    ``namespace`` only, shaped like the shipped one. Returns its name."""
    from kubetrain.k8s.webhook import names, webhook_configurations

    shipped = {h["name"]: h for h in webhook_configurations()[0]["webhooks"]}
    hooks = []
    for hook_name, path in (
        (names.WEBHOOK_VALIDATOR_TRAINJOB, names.VALIDATE_TRAINJOB),
        (names.WEBHOOK_VALIDATOR_TRAINING_RUNTIME, names.VALIDATE_TRAINING_RUNTIME),
    ):
        hook = {k: v for k, v in shipped[hook_name].items() if k not in ("clientConfig", "objectSelector")}
        hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca).decode()}
        hook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
        hooks.append(hook)
    name = uniq("kt-e2e")
    body = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": hooks,
    }
    call(lambda c: c.create(body, resource=VWC))
    return name


def start_webhook(
    kubeconfig: str, namespace: str, cert_dir: Path, *extra: str, all_namespaces: bool = False
) -> Webhook:
    """An operator serving the webhook (watching ``namespace``, or every namespace as deployed), registered
    for objects in ``namespace``."""
    ca = webhook_certs(cert_dir)
    port = free_port()
    scope = () if all_namespaces else ("--namespace", namespace)
    args = (*scope, "--webhook-port", str(port), "--webhook-cert-dir", str(cert_dir), *extra)
    op = OperatorProcess(kubeconfig, namespace, *args).start()
    return Webhook(namespace, op, register_webhooks(namespace, port, ca))


def stop_webhook(hook: Webhook) -> None:
    try:
        call(lambda c: c.delete(VWC, hook.config_name, missing_ok=True))
    finally:
        hook.operator.stop()


@pytest.fixture
def webhook(kubeconfig: str, namespace: str, tmp_path: Path) -> Iterator[Webhook]:
    hook = start_webhook(kubeconfig, namespace, tmp_path / "certs")
    try:
        yield hook
    finally:
        stop_webhook(hook)


# --- RBAC as shipped ---


def operator_service_account(namespace: str, tmp_path: Path) -> str:
    """A kubeconfig that acts as ServiceAccount ``kubetrain-operator`` in ``namespace`` (admin credentials plus
    impersonation, like ``kubectl --as``), with exactly the rules ``manifests/rbac`` binds to that account:
    ClusterRoles copied under a name of this test's own (so no installed object is touched), namespaced Roles
    moved from kubeflow-system into ``namespace``. The cluster-scoped copies go with ``namespace``'s deletion
    only if the caller removes them: see :func:`remove_operator_service_account`."""
    docs = [d for p in sorted((REPO / "manifests" / "rbac").glob("*.yaml")) for d in yaml.safe_load_all(p.read_text())]
    docs = [d for d in docs if d and d.get("kind") in RBAC]
    sa_name = "kubetrain-operator"

    def binds_operator(binding: dict[str, Any]) -> bool:
        return any(
            s.get("kind") == "ServiceAccount" and s.get("name") == sa_name for s in binding.get("subjects") or []
        )

    bindings = [d for d in docs if d["kind"].endswith("Binding") and binds_operator(d)]
    wanted = {(b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings}
    roles = [d for d in docs if not d["kind"].endswith("Binding") and (d["kind"], d["metadata"]["name"]) in wanted]
    assert {("ClusterRole", "kubetrain-operator")} <= {(d["kind"], d["metadata"]["name"]) for d in roles}
    suffix = f"e2e-{namespace}"

    def renamed(kind: str, name: str) -> str:
        return f"{name}-{suffix}" if kind.startswith("Cluster") else name

    async def install(client: Client) -> None:
        account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": sa_name, "namespace": namespace}}
        await client.create(account, resource=SA)
        for role in roles:
            role = dict(role, metadata=dict(role["metadata"]))
            role["metadata"]["name"] = renamed(role["kind"], role["metadata"]["name"])
            if role["kind"] == "Role":
                role["metadata"]["namespace"] = namespace
            await ssa(client, role, RBAC[role["kind"]])
        for binding in bindings:
            binding = dict(binding, metadata=dict(binding["metadata"]))
            binding["subjects"] = [dict(s, namespace=namespace) for s in binding["subjects"]]
            ref = binding["roleRef"]
            binding["roleRef"] = dict(ref, name=renamed(ref["kind"], ref["name"]))
            binding["metadata"]["name"] = renamed(binding["kind"], binding["metadata"]["name"])
            if binding["kind"] == "RoleBinding":
                binding["metadata"]["namespace"] = namespace
            await ssa(client, binding, RBAC[binding["kind"]])

    call(install)
    assert KUBECONFIG
    doc = yaml.safe_load(Path(KUBECONFIG).read_text())
    ctx_name = doc["current-context"]
    ctx = next(c for c in doc["contexts"] if c["name"] == ctx_name)["context"]
    for user in doc["users"]:
        if user["name"] == ctx["user"]:
            user["user"]["as"] = f"system:serviceaccount:{namespace}:{sa_name}"
            user["user"]["as-groups"] = [
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ]
    path = tmp_path / "operator-sa.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return str(path)


def remove_operator_service_account(namespace: str) -> None:
    """Delete the cluster-scoped copies :func:`operator_service_account` made for ``namespace``."""
    suffix = f"-e2e-{namespace}"

    async def go(client: Client) -> None:
        for kind in ("ClusterRoleBinding", "ClusterRole"):
            items, _ = await client.list(RBAC[kind])
            for item in items:
                if item["metadata"]["name"].endswith(suffix):
                    await client.delete(RBAC[kind], item["metadata"]["name"], missing_ok=True)

    call(go)


@pytest.fixture
def operator_account(fresh_namespace: str, tmp_path: Path) -> Iterator[str]:
    """``operator_service_account`` for ``fresh_namespace``, removed afterwards."""
    try:
        yield operator_service_account(fresh_namespace, tmp_path)
    finally:
        remove_operator_service_account(fresh_namespace)


# --- objects ---


def torch_runtime(name: str, image: str = "busybox:1.36", namespace: str | None = None) -> dict[str, Any]:
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {"template": {"spec": {"containers": [{"name": "node", "image": image}]}}},
        },
    }
    kind = "TrainingRuntime" if namespace else "ClusterTrainingRuntime"
    meta: dict[str, Any] = {"name": name, "labels": {"trainer.kubeflow.org/framework": "torch"}}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": kind,
        "metadata": meta,
        "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [rjob]}}},
    }


def trainjob(name: str, namespace: str, runtime: str, kind: str = "TrainingRuntime", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"runtimeRef": {"name": runtime, "kind": kind}}
    body.update(spec)
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def setup_runtime(ns: str, image: str = "busybox:1.36") -> str:
    name = uniq("rt")
    call(lambda c: c.apply(torch_runtime(name, image, namespace=ns)))
    return name


def conditions(name: str, ns: str) -> dict[str, dict[str, Any]]:
    tj = get(r.TRAINJOB, name, ns) or {}
    return {c["type"]: c for c in (tj.get("status") or {}).get("conditions") or []}


def complete_jobset(name: str, ns: str) -> None:
    """Play the JobSet controller: mark the JobSet completed."""
    cond = {
        "type": "Completed",
        "status": "True",
        "reason": "AllJobsCompleted",
        "message": "jobset completed successfully",
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    call(lambda c: c.patch_status(r.JOBSET, name, ns, {"conditions": [cond]}))
