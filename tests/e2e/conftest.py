"""e2e on a real cluster: runs only when ``KUBETRAIN_E2E_KUBECONFIG`` names a cluster-admin kubeconfig (CI skips it).

The bed is a cluster with a Ready node (kubelet, scheduler, the JobSet controller) where kubetrain is installed the
way docs/install.md says, from this checkout: ``kubectl apply --server-side -k manifests/overlays/manager``, then
(the ClusterTrainingRuntime CRD Established) ``manifests/overlays/runtimes``, with the operator image built from the
same tree (docs/operator.md, "The e2e suite", says how on the one-node bed of
``shared/tools/k8s-node``). Pods are real, their logs are real, JobSet statuses come from the JobSet controller and
TrainJobs are reconciled by the operator in its pod. Nothing here writes what a kubelet, a controller or the
operator should write. A test whose subject is the ``kubetrain operator`` binary on this machine (its flags, its
kubeconfig handling) starts it as a local process, :class:`OperatorProcess`, and says why.

Training pods use ``KUBETRAIN_E2E_IMAGE`` (default ``localhost/kubetrain-train:dev``, the bed's training image:
Debian 12, torch 2.13.0 CPU, OpenMPI, mpi4py, sshd, user mpiuser 1000; docs/images.md). kubectl comes from
``KUBETRAIN_E2E_KUBECTL`` or ``PATH``.
"""

from __future__ import annotations

import asyncio
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
from pathlib import Path
from typing import Any

import pytest

from kubetrain.k8s.client import ApiError, Client, NotFound, Resource
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.applying import apply as _apply
from kubetrain.k8s.client.config import from_kubeconfig

KUBECONFIG = os.environ.get("KUBETRAIN_E2E_KUBECONFIG")
KUBECTL = os.environ.get("KUBETRAIN_E2E_KUBECTL") or shutil.which("kubectl")
IMAGE = os.environ.get("KUBETRAIN_E2E_IMAGE", "localhost/kubetrain-train:dev")
SKIP_REASON = "e2e needs a real cluster: set KUBETRAIN_E2E_KUBECONFIG to a kubeconfig (cluster-admin)"
REPO = Path(__file__).resolve().parents[2]

OPERATOR_NAMESPACE = "kubeflow-system"
OPERATOR_NAME = "kubetrain-operator"
OPERATOR_SELECTOR = "app.kubernetes.io/name=kubetrain,app.kubernetes.io/component=operator"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"

CRD = r.CRD
VWC = Resource("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "", namespaced=False)
MWC = Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "", namespaced=False)
CTR = r.CLUSTER_TRAINING_RUNTIME
SA = Resource("", "v1", "serviceaccounts", "ServiceAccount")
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
DEPLOYMENT = Resource("apps", "v1", "deployments", "Deployment")
ENDPOINT_SLICE = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
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


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 60.0,
    what: str = "condition",
    explain: Callable[[], str] | None = None,
) -> Any:
    """Poll until ``predicate()`` is truthy; the timeout only bounds a hang (generous: the machine is busy).
    ``explain`` adds what was seen to the failure (pods, their logs)."""
    deadline = time.monotonic() + timeout
    pause = 0.2
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(pause)
        pause = min(1.0, pause * 1.5)
    seen = f"\n{explain()}" if explain is not None else ""
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{seen}")


def get(res: Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
    async def go(client: Client) -> dict[str, Any] | None:
        try:
            return await client.get(res, name, namespace)
        except NotFound:
            return None

    result: dict[str, Any] | None = call(go)
    return result


def list_of(res: Resource, namespace: str | None, selector: str | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = call(lambda c: c.list(res, namespace, label_selector=selector))[0]
    return items


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:5]}"


def kubectl(
    *args: str, input: str | None = None, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``kubectl --kubeconfig $KUBETRAIN_E2E_KUBECONFIG ...`` (``KUBETRAIN_E2E_KUBECTL`` or the one on PATH)."""
    if KUBECTL is None:
        pytest.skip("kubectl not found: put it on PATH or set KUBETRAIN_E2E_KUBECTL")
    assert KUBECONFIG, SKIP_REASON
    out = subprocess.run(
        [KUBECTL, "--kubeconfig", KUBECONFIG, *args], input=input, capture_output=True, text=True, timeout=timeout
    )
    if check and out.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def kubetrain(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The ``kubetrain`` CLI of this checkout against the bed (``--kubeconfig`` appended)."""
    assert KUBECONFIG, SKIP_REASON
    env = {**os.environ, "COLUMNS": "250"}
    done = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", *args, "--kubeconfig", KUBECONFIG],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubetrain {' '.join(args)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done


async def ssa(client: Client, obj: dict[str, Any], res: Resource | None = None) -> dict[str, Any]:
    """Server-side apply as field manager ``kubetrain-e2e`` (any kind; ``res`` for kinds the client does not
    know)."""
    return await _apply(client.session, obj, field_manager="kubetrain-e2e", force=True, resource=res)


# --- the bed ---


def ready_nodes() -> list[str]:
    return [
        n["metadata"]["name"]
        for n in list_of(NODE, None)
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in n["status"].get("conditions") or [])
    ]


def established(name: str) -> bool:
    crd = get(CRD, name, None) or {}
    conds = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conds)


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions") or [])


class DeployedOperator:
    """The operator as installed: Deployment ``kubetrain-operator`` in ``kubeflow-system``, its pods, its Lease."""

    namespace = OPERATOR_NAMESPACE
    name = OPERATOR_NAME

    def deployment(self) -> dict[str, Any] | None:
        return get(DEPLOYMENT, self.name, self.namespace)

    def pods(self) -> list[dict[str, Any]]:
        """Its pods that are not being deleted."""
        pods = list_of(r.POD, self.namespace, OPERATOR_SELECTOR)
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    def leader(self) -> str | None:
        """The pod holding the Lease (identities are ``<hostname>_<pid>``; a pod's hostname is its name)."""
        lease = get(r.LEASE, self.name, self.namespace) or {}
        holder = (lease.get("spec") or {}).get("holderIdentity")
        return str(holder).rsplit("_", 1)[0] if holder else None

    def rolled_out(self) -> bool:
        dep = self.deployment()
        if dep is None:
            return False
        want = int(dep["spec"].get("replicas", 1))
        st = dep.get("status") or {}
        if int(st.get("observedGeneration") or 0) < int(dep["metadata"]["generation"]):
            return False
        if not all(int(st.get(k) or 0) == want for k in ("updatedReplicas", "readyReplicas", "availableReplicas")):
            return False
        if int(st.get("replicas") or 0) != want:
            return False
        ready = {p["metadata"]["name"] for p in self.pods() if pod_ready(p)}
        # A leader among the live pods (a killed leader's Lease must have passed on), and the webhook's Service
        # with a ready endpoint (else the API server refuses TrainJob creates).
        return len(ready) == want and self.leader() in ready and self.webhook_endpoints() > 0

    def webhook_endpoints(self) -> int:
        slices = list_of(ENDPOINT_SLICE, self.namespace, f"kubernetes.io/service-name={self.name}")
        return sum(
            1 for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready") is True
        )

    def wait_ready(self, timeout: float = 300) -> DeployedOperator:
        wait_until(self.rolled_out, timeout, "the operator Deployment rolled out with a leader and webhook endpoints")
        return self

    def kill(self, pod: str) -> float:
        """Force-delete ``pod`` (``kubectl delete pod --force --grace-period=0``): the API object goes at once and
        the kubelet kills the container without the usual grace. Returns the time of the delete."""

        async def go(client: Client) -> None:
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
            await client.session.request("DELETE", r.POD.path(self.namespace, pod), body=body)

        call(go)
        return time.monotonic()

    def metrics(self, pod: str) -> dict[str, float]:
        """``/metrics`` of ``pod`` (through the API server's pod proxy): ``{'name{labels}': value}``."""

        async def go(client: Client) -> str:
            path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}:8081/proxy/metrics"
            async with client.session.stream(path, timeout=30) as resp:
                return await resp.text()

        text: str = call(go)
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def memory_kib(self, pod: str) -> dict[str, int]:
        """``VmRSS`` and ``VmHWM`` of the operator process (PID 1 of its container), read from /proc in the pod."""
        out = kubectl("exec", "-n", self.namespace, pod, "-c", "operator", "--", "cat", "/proc/1/status").stdout
        return {
            k: int(v.split()[0])
            for k, v in (line.split(":", 1) for line in out.splitlines() if ":" in line)
            if k in ("VmRSS", "VmHWM")
        }

    def log(self, pod: str) -> str:
        return pod_log(pod, self.namespace, "operator")

    def images(self) -> list[tuple[str, str]]:
        """(image, imageID) of each live operator pod's container."""
        return [
            (cs.get("image", ""), cs.get("imageID", ""))
            for p in self.pods()
            for cs in p["status"].get("containerStatuses") or []
        ]


def pytest_report_header(config: pytest.Config) -> list[str]:
    """What ran against what: the server, the node, JobSet, the operator image (printed before the results)."""
    if not KUBECONFIG:
        return []
    try:

        async def version(client: Client) -> dict[str, Any]:
            return await client.session.request("GET", "/version")

        server = call(version)
        nodes = [
            f"{n['metadata']['name']} (kubelet {n['status']['nodeInfo']['kubeletVersion']}, "
            f"{n['status']['nodeInfo']['containerRuntimeVersion']})"
            for n in list_of(NODE, None)
        ]
        jobset = get(CRD, "jobsets.jobset.x-k8s.io", None)
        served = [v["name"] for v in (jobset or {}).get("spec", {}).get("versions", []) if v.get("served")]
        images = sorted(set(DeployedOperator().images()))
        return [
            f"e2e bed: kube-apiserver {server.get('gitVersion')}; nodes: {', '.join(nodes) or 'none'}",
            *_bed_parts(),
            f"e2e bed: JobSet CRD {'/'.join(served) or 'absent'}; training image {IMAGE}",
            "e2e bed: operator "
            + ("; ".join(f"{img} ({iid})" for img, iid in images) if images else "not deployed in kubeflow-system"),
        ]
    except Exception as exc:  # a header must never break the run; the fixtures say what is missing
        return [f"e2e bed: could not be described ({exc})"]


def _bed_parts() -> list[str]:
    """What else the bed runs (hack/bed/): Kueue and scheduler-plugins, with the source commit they were built from
    when this machine built them, and a MultiKueue manager."""
    home = Path(os.environ.get("K8S_HOME") or Path.home() / "k8s-node")

    def commit(name: str) -> str:
        f = home / "src" / name / ".commit"
        return f" (built from {f.read_text().strip()[:12]})" if f.exists() else ""

    kueue = "installed" if get(CRD, "clusterqueues.kueue.x-k8s.io", None) else "absent"
    if kueue == "installed":
        config = home / "bed" / "kueue" / "config.yaml"
        if config.exists():
            import yaml

            frameworks = ((yaml.safe_load(config.read_text()) or {}).get("integrations") or {}).get("frameworks")
            kueue += f", integrations {frameworks}"
        kueue += commit("kueue")
    lease = get(r.LEASE, "scheduler-plugins-scheduler", "scheduler-plugins")
    gang = f"running{commit('scheduler-plugins')}" if lease else "absent"
    manager = os.environ.get("KUBETRAIN_E2E_MANAGER_KUBECONFIG") or "none (KUBETRAIN_E2E_MANAGER_KUBECONFIG)"
    return [f"e2e bed: Kueue {kueue}; Coscheduling scheduler {gang}; MultiKueue manager {manager}"]


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    assert KUBECONFIG, SKIP_REASON
    return KUBECONFIG


@pytest.fixture(scope="session")
def bed(kubeconfig: str) -> str:
    """A cluster that runs pods: a Ready node, JobSet (CRD and controller) and kubetrain installed. Returns the
    node's name."""
    nodes = ready_nodes()
    if not nodes:
        pytest.skip("needs a Ready node with a kubelet, a scheduler and the JobSet controller (shared/tools/k8s-node)")
    if not established("jobsets.jobset.x-k8s.io"):
        pytest.skip("needs JobSet (jobset.x-k8s.io/v1alpha2 CRD and controller) installed")
    for plural in ("trainjobs", "trainingruntimes", "clustertrainingruntimes"):
        if not established(f"{plural}.trainer.kubeflow.org"):
            pytest.skip(
                "kubetrain is not installed: kubectl apply --server-side -k manifests/overlays/manager, "
                "then manifests/overlays/runtimes (docs/install.md)"
            )
    if DeployedOperator().deployment() is None:
        pytest.skip(
            f"no Deployment {OPERATOR_NAME} in {OPERATOR_NAMESPACE}: install kubetrain from this checkout "
            "(docs/operator.md, 'The e2e suite')"
        )
    return nodes[0]


@pytest.fixture
def operator(bed: str) -> DeployedOperator:
    """The installed operator, rolled out and leading (a test before may have killed or reinstalled it)."""
    return DeployedOperator().wait_ready()


def create_namespace(prefix: str, labels: dict[str, str] | None = None) -> str:
    ns = uniq(prefix)
    meta: dict[str, Any] = {"name": ns}
    if labels:
        meta["labels"] = labels
    call(lambda c: c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta}))
    # Pods need the namespace's default ServiceAccount, made by kube-controller-manager a moment later.
    wait_until(lambda: get(SA, "default", ns), 60, f"the default ServiceAccount of {ns}")
    return ns


def delete_namespace(ns: str) -> None:
    async def cleanup(client: Client) -> None:
        try:
            await client.delete(r.NAMESPACE, ns)
        except ApiError:
            pass

    call(cleanup)


@pytest.fixture(scope="session")
def namespace(kubeconfig: str) -> Iterator[str]:
    ns = create_namespace("kt-e2e")
    yield ns
    delete_namespace(ns)


@pytest.fixture
def fresh_namespace(kubeconfig: str) -> Iterator[str]:
    """A namespace of this test's own."""
    ns = create_namespace("kt-e2e-x")
    yield ns
    delete_namespace(ns)


# --- objects ---


def pod_spec(**extra: Any) -> dict[str, Any]:
    """A trainer pod: container ``node`` on the training image. A short grace period, since test commands are
    shells that would otherwise sit out the default 30 s when their pod is deleted."""
    container = {"name": "node", "image": IMAGE, "imagePullPolicy": "IfNotPresent"}
    return {"terminationGracePeriodSeconds": 2, "containers": [container], **extra}


def torch_runtime(
    name: str, namespace: str | None = None, *, spec: dict[str, Any] | None = None, job: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A torch runtime with one ``node`` replicated job on the training image (a TrainingRuntime in
    ``namespace``, else a ClusterTrainingRuntime). Commands come from the TrainJob's ``trainer.command``."""
    rjob = {
        "name": "node",
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
            "spec": {**(job or {}), "template": {"spec": spec or pod_spec()}},
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


def sh(script: str, **trainer: Any) -> dict[str, Any]:
    """A ``trainer`` that runs ``script`` with sh on the runtime's image."""
    return {"command": ["sh", "-c", script], **trainer}


# Runs until its pod is deleted, then leaves at once (a shell as PID 1 would ignore SIGTERM).
SLEEP = "trap 'exit 0' TERM; sleep 3600 & wait"


def setup_runtime(ns: str, **kwargs: Any) -> str:
    name = uniq("rt")
    call(lambda c: c.apply(torch_runtime(name, namespace=ns, **kwargs)))
    return name


def status(name: str, ns: str) -> dict[str, Any]:
    return (get(r.TRAINJOB, name, ns) or {}).get("status") or {}


def conditions(name: str, ns: str) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status(name, ns).get("conditions") or []}


def finished(name: str, ns: str) -> dict[str, Any] | None:
    """The TrainJob's Complete or Failed condition once one is True."""
    conds = conditions(name, ns)
    return next((conds[t] for t in ("Complete", "Failed") if conds.get(t, {}).get("status") == "True"), None)


def wait_finished(name: str, ns: str, timeout: float = 300) -> dict[str, Any]:
    cond: dict[str, Any] = wait_until(
        lambda: finished(name, ns), timeout, f"TrainJob {ns}/{name} to finish", lambda: describe_pods(name, ns)
    )
    return cond


def pods_of(name: str, ns: str) -> list[dict[str, Any]]:
    return list_of(r.POD, ns, f"{JOBSET_NAME}={name}")


def running_pods(name: str, ns: str) -> list[dict[str, Any]]:
    return [
        p
        for p in pods_of(name, ns)
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def pod_log(pod: str, ns: str, container: str | None = None) -> str:
    async def go(client: Client) -> str:
        try:
            return "".join([line + "\n" async for line in client.pod_logs(pod, ns, container=container)])
        except ApiError:
            return ""

    return str(call(go))


def describe_pods(name: str, ns: str, lines: int = 30) -> str:
    """The TrainJob's pods, their phases and last log lines, and its status: for a failure's message."""
    out = [f"TrainJob {ns}/{name} status: {status(name, ns)}"]
    for p in pods_of(name, ns):
        st = p["status"]
        waiting = [(c["name"], c.get("state")) for c in st.get("containerStatuses") or []]
        out.append(f"pod {p['metadata']['name']}: {st.get('phase')} {waiting}")
        out += ["  " + line for line in pod_log(p["metadata"]["name"], ns).splitlines()[-lines:]]
    return "\n".join(out)


def events_of(kind: str, name: str, ns: str, reason: str | None = None) -> list[dict[str, Any]]:
    return [
        e
        for e in list_of(r.EVENT, ns)
        if (e["involvedObject"].get("kind"), e["involvedObject"].get("name")) == (kind, name)
        and (reason is None or e.get("reason") == reason)
    ]


def reconciles(op: DeployedOperator) -> float:
    """The leader's ``kubetrain_reconcile_total`` (all results)."""
    leader = op.leader()
    assert leader is not None
    return sum(v for k, v in op.metrics(leader).items() if k.startswith("kubetrain_reconcile_total"))


def handled_since(op: DeployedOperator, before: float) -> bool:
    """The leader reconciled something after its count was ``before`` and its work queue is empty, so whatever was
    queued by then has been handled: how a test knows the operator has seen a change that must *not* have an
    effect, without guessing a time."""
    leader = op.leader()
    if leader is None:
        return False
    m = op.metrics(leader)
    total = sum(v for k, v in m.items() if k.startswith("kubetrain_reconcile_total"))
    idle = m.get("kubetrain_workqueue_depth", 1) == 0 and m.get("kubetrain_workqueue_processing", 1) == 0
    return total > before and idle


# --- the operator as a local process (only for tests whose subject is the binary on this machine) ---


class OperatorProcess:
    """``kubetrain operator`` as a child process. Only for tests of the binary itself (its flags, its kubeconfig
    handling): the installed operator reconciles every namespace, so a local one must not be given TrainJobs."""

    def __init__(self, kubeconfig: str, lease_namespace: str, *extra: str, identity: str | None = None) -> None:
        self.kubeconfig, self.lease_namespace, self.extra, self.identity = kubeconfig, lease_namespace, extra, identity
        self.proc: subprocess.Popen[bytes] | None = None
        self.health_port = 0
        self.log_file = Path(os.environ.get("TMPDIR", "/tmp")) / f"kt-e2e-operator-{uuid.uuid4().hex[:8]}.log"

    def command(self) -> list[str]:
        cmd = [sys.executable, "-m", "kubetrain.cli.main", "operator", "--kubeconfig", self.kubeconfig]
        cmd += ["--lease-namespace", self.lease_namespace, "--health-port", str(self.health_port)]
        cmd += ["--status-port", "-1"]
        if self.identity:
            cmd += ["--identity", self.identity]
        return [*cmd, *self.extra]

    def start(self) -> OperatorProcess:
        self.health_port = free_port()
        with self.log_file.open("ab") as log:
            self.proc = subprocess.Popen(self.command(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT)

        def up() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"operator exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.health_port}/readyz", timeout=1) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_until(up, 120, "operator /readyz")
        return self

    def log(self) -> str:
        return self.log_file.read_text(errors="replace") if self.log_file.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(60)
        self.proc = None
