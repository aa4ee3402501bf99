"""Tools for measuring kubetrain on a real cluster, shared by ``bench/`` and ``tests/e2e``.

- :class:`AdmissionLoad`: creates TrainJobs at a steady rate (server-side dry run by default, so the webhooks run
  and nothing is stored) and records every answer, so a disruption of the operator can be judged by the one number
  that matters to a user: how many creates the API server refused.
- :class:`PodsRunning`: watches a namespace's pods and records when every pod of a JobSet is Running.
- :func:`kubectl`, :func:`install`, :func:`uninstall`, :func:`wait_rollout`: the install as docs/install.md says
  (the manager overlay, its CRDs Established, the runtimes overlay).

The load generator's client never retries (``max_retries=0``): a create the API server refused is counted, not
hidden behind a retry the way ``kubetrain``'s own client would.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubetrain.k8s.client import ApiError, Client
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.config import from_kubeconfig

API = "trainer.kubeflow.org/v1alpha1"
SYSTEM_NAMESPACE = "kubeflow-system"
DEPLOYMENT = "kubetrain-operator"
OPERATOR_SELECTOR = "app.kubernetes.io/name=kubetrain,app.kubernetes.io/component=operator"


def kubeconfig_from_env() -> str | None:
    return os.environ.get("KUBETRAIN_E2E_KUBECONFIG") or None


def kubectl_path() -> str | None:
    """``KUBETRAIN_E2E_KUBECTL``, else ``kubectl`` on PATH (never a fixed path)."""
    return os.environ.get("KUBETRAIN_E2E_KUBECTL") or shutil.which("kubectl")


def kubectl(
    kubeconfig: str, *args: str, input: str | None = None, check: bool = True, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    exe = kubectl_path()
    if exe is None:
        raise RuntimeError("kubectl not found: put it on PATH or set KUBETRAIN_E2E_KUBECTL")
    out = subprocess.run(
        [exe, "--kubeconfig", kubeconfig, *args], input=input, capture_output=True, text=True, timeout=timeout
    )
    if check and out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}):\n{out.stdout}\n{out.stderr}")
    return out


def wait_rollout(kubeconfig: str, timeout: int = 300) -> None:
    kubectl(
        kubeconfig, "-n", SYSTEM_NAMESPACE, "rollout", "status", f"deployment/{DEPLOYMENT}", f"--timeout={timeout}s",
        timeout=timeout + 30,
    )  # fmt: skip


MANAGER = Path("overlays", "manager")
"""Under the manifests tree: step 1 of docs/install.md, everything but the built-in runtimes."""
RUNTIMES = Path("overlays", "runtimes")
"""Step 3: the built-in ClusterTrainingRuntimes, once their CRD is Established (step 2)."""
RUNTIMES_CRD = "clustertrainingruntimes.trainer.kubeflow.org"
"""What step 3 needs served: step 2 waits for it to be Established."""


def install(kubeconfig: str, manifests: Path) -> None:
    """docs/install.md, each step once: ``kubectl apply --server-side -k manifests/overlays/manager``, the
    ClusterTrainingRuntime CRD Established, ``kubectl apply --server-side -k manifests/overlays/runtimes``; then the
    Deployment's rollout."""
    kubectl(kubeconfig, "apply", "--server-side", "-k", str(manifests / MANAGER))
    kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=120s", f"crd/{RUNTIMES_CRD}")
    kubectl(kubeconfig, "apply", "--server-side", "-k", str(manifests / RUNTIMES))
    wait_rollout(kubeconfig)


def uninstall(kubeconfig: str, manifests: Path, *, crds: bool) -> None:
    """Delete the install, the runtimes first (and the CRDs last, with every TrainJob, when ``crds``), waiting
    until it is gone."""
    import yaml

    docs = [
        d
        for tree in (RUNTIMES, MANAGER)
        for d in yaml.safe_load_all(kubectl(kubeconfig, "kustomize", str(manifests / tree)).stdout)
        if d
    ]
    definitions = [d for d in docs if d.get("kind") == "CustomResourceDefinition"]
    for batch in ([d for d in docs if d not in definitions], definitions if crds else []):
        if not batch:
            continue
        out = kubectl(
            kubeconfig, "delete", "--ignore-not-found", "--wait=true", "-f", "-", input=yaml.safe_dump_all(batch),
            check=False, timeout=600,
        )  # fmt: skip
        # Objects of kinds whose CRD is not installed are as gone as can be.
        problems = [
            line for line in out.stderr.splitlines()
            if line.strip() and "resource mapping not found" not in line and "ensure CRDs are installed" not in line
        ]  # fmt: skip
        if out.returncode != 0 and problems:
            raise RuntimeError("kubectl delete failed:\n" + "\n".join(problems))


def operator_pods(kubeconfig: str) -> list[dict[str, Any]]:
    import json

    out = kubectl(kubeconfig, "-n", SYSTEM_NAMESPACE, "get", "pods", "-l", OPERATOR_SELECTOR, "-o", "json")
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return items


def is_ready(pod: dict[str, Any]) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
    return not deleting and any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)


SLEEPER = "trap 'exit 0' TERM; sleep 3600 & wait"


def uniq(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def sleeper_trainjob(name: str, namespace: str, *, runtime: str, image: str, nodes: int = 1) -> dict[str, Any]:
    """A TrainJob of a built-in runtime whose pods only sleep: admission and scheduling are what is measured."""
    return {
        "apiVersion": API,
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": "ClusterTrainingRuntime"},
            # Exits on SIGTERM (a bare `sleep` as PID 1 ignores it and holds deletion for the grace period).
            "trainer": {"numNodes": nodes, "image": image, "command": ["sh", "-c", SLEEPER]},
        },
    }


@dataclass
class Answer:
    at: float
    """Seconds since the load started, when the create was sent."""
    latency: float
    status: int
    """HTTP status: 201 created, 0 no answer (connection), else the API server's code."""
    message: str = ""


@dataclass
class AdmissionLoad:
    """Creates a TrainJob every ``interval`` seconds (never more than ``max_in_flight`` outstanding) until
    stopped. ``dry_run`` (default) asks for ``dryRun=All``: the API server runs both webhooks and stores nothing.
    Each create has its own name, so a refusal is never an AlreadyExists."""

    kubeconfig: str
    namespace: str
    runtime: str = "torch-distributed"
    image: str = "busybox:1.36"
    interval: float = 0.05
    dry_run: bool = True
    max_in_flight: int = 64
    answers: list[Answer] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    """Names stored (``dry_run=False``), for the caller to clean up."""
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _started: float = 0.0

    def now(self) -> float:
        return time.monotonic() - self._started

    async def run(self) -> None:
        self._started = time.monotonic()
        async with Client(from_kubeconfig(self.kubeconfig), qps=0) as client:
            client.session.max_retries = 0  # count refusals; never retry them away
            slots = asyncio.Semaphore(self.max_in_flight)
            tasks: set[asyncio.Task[None]] = set()
            tick = time.monotonic()
            while not self._stop.is_set():
                await slots.acquire()
                task = asyncio.create_task(self._one(client, slots))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                tick += self.interval
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), max(0.0, tick - time.monotonic()))
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)

    async def _one(self, client: Client, slots: asyncio.Semaphore) -> None:
        name = uniq("adm")
        body = sleeper_trainjob(name, self.namespace, runtime=self.runtime, image=self.image)
        params = {"dryRun": "All"} if self.dry_run else None
        sent = self.now()
        try:
            await client.session.request("POST", r.TRAINJOB.path(self.namespace), params=params, body=body)
            self.answers.append(Answer(sent, self.now() - sent, 201))
            if not self.dry_run:
                self.created.append(name)
        except ApiError as exc:
            self.answers.append(Answer(sent, self.now() - sent, exc.status, exc.message))
        finally:
            slots.release()

    def stop(self) -> None:
        self._stop.set()

    @contextlib.contextmanager
    def in_background(self) -> Iterator[AdmissionLoad]:
        """Run the load on an event loop of its own thread while the caller disrupts things synchronously."""
        loop = asyncio.new_event_loop()
        began = threading.Event()

        async def go() -> None:
            self._stop = asyncio.Event()
            loop.call_soon(began.set)
            await self.run()

        thread = threading.Thread(target=loop.run_until_complete, args=(go(),), name="admission-load", daemon=True)
        thread.start()
        began.wait(30)
        try:
            yield self
        finally:
            loop.call_soon_threadsafe(self.stop)
            thread.join(120)
            loop.close()

    def between(self, start: float, end: float) -> list[Answer]:
        return [a for a in self.answers if start <= a.at < end]

    @staticmethod
    def refused(answers: list[Answer]) -> list[Answer]:
        return [a for a in answers if a.status != 201]

    @staticmethod
    def reasons(answers: list[Answer]) -> Counter[str]:
        """Refusals by a short reason (the webhook call's error, without the request-specific parts)."""
        out: Counter[str] = Counter()
        for a in answers:
            if a.status == 201:
                continue
            msg = a.message
            for marker in ("no endpoints available", "connection refused", "context deadline exceeded",
                           "certificate", "EOF", "connection reset", "i/o timeout"):  # fmt: skip
                if marker in msg:
                    msg = marker
                    break
            out[f"{a.status}: {msg[:120]}"] += 1
        return out


class PodsRunning:
    """Watches ``namespace``'s pods; :meth:`wait` returns when ``count`` pods of JobSet ``jobset`` are Running
    (the monotonic time that happened)."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.kubeconfig, self.namespace = kubeconfig, namespace
        self.running: dict[str, set[str]] = {}
        self.first_seen: dict[str, float] = {}
        self.all_running: dict[tuple[str, int], float] = {}
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()

    async def __aenter__(self) -> PodsRunning:
        self._task = asyncio.create_task(self._run())
        await self._ready.wait()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self) -> None:
        async with Client(from_kubeconfig(self.kubeconfig), qps=0) as client:
            items, rv = await client.list(r.POD, self.namespace)
            for pod in items:
                await self._seen(pod)
            self._ready.set()
            while True:
                try:
                    async for ev in client.watch(r.POD, self.namespace, resource_version=rv, timeout_seconds=300):
                        rv = ev.resource_version or rv
                        await self._seen(ev.object)
                except ApiError:
                    items, rv = await client.list(r.POD, self.namespace)
                    for pod in items:
                        await self._seen(pod)

    async def _seen(self, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        jobset = (meta.get("labels") or {}).get("jobset.sigs.k8s.io/jobset-name")
        if not jobset:
            return
        now = time.monotonic()
        self.first_seen.setdefault(jobset, now)
        names = self.running.setdefault(jobset, set())
        if (pod.get("status") or {}).get("phase") == "Running" and not meta.get("deletionTimestamp"):
            names.add(meta.get("name", ""))
        else:
            names.discard(meta.get("name", ""))
        async with self._changed:
            self._changed.notify_all()

    async def wait(self, jobset: str, count: int, timeout: float = 180) -> float:
        key = (jobset, count)

        def done() -> bool:
            if key not in self.all_running and len(self.running.get(jobset, ())) >= count:
                self.all_running[key] = time.monotonic()
            return key in self.all_running

        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(done), timeout)
        return self.all_running[key]


async def delete_all(kubeconfig: str, res: r.Resource, namespace: str, names: list[str]) -> None:
    async with Client(from_kubeconfig(kubeconfig), qps=0) as client:
        for name in names:
            with contextlib.suppress(ApiError):
                await client.delete(res, name, namespace, missing_ok=True)


def percentile(values: list[float], p: float) -> float:
    data = sorted(values)
    if not data:
        return 0.0
    return data[min(len(data) - 1, round(p / 100 * (len(data) - 1)))]



def lease_holder(kubeconfig: str) -> str:
    """The operator Lease's holder identity (``<pod>_<pid>`` in a pod), or ""."""
    import json

    out = kubectl(kubeconfig, "-n", SYSTEM_NAMESPACE, "get", "lease", DEPLOYMENT, "-o", "json", check=False)
    if out.returncode != 0:
        return ""
    return str((json.loads(out.stdout).get("spec") or {}).get("holderIdentity") or "")


def leaders(kubeconfig: str) -> dict[str, float]:
    """Each running operator pod's ``kubetrain_leader`` gauge, read through the API server's pod proxy."""
    out: dict[str, float] = {}
    for pod in operator_pods(kubeconfig):
        name = pod["metadata"]["name"]
        if not is_ready(pod):
            continue
        path = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/{name}:8081/proxy/metrics"
        text = kubectl(kubeconfig, "get", "--raw", path).stdout
        for line in text.splitlines():
            if line.startswith("kubetrain_leader "):
                out[name] = float(line.split()[1])
    return out


# --- disruptions --------------------------------------------------------------------------------------------


def replicas(kubeconfig: str) -> tuple[int, int]:
    """The operator Deployment's (desired, ready) replicas."""
    import json

    out = kubectl(kubeconfig, "-n", SYSTEM_NAMESPACE, "get", "deploy", DEPLOYMENT, "-o", "json")
    dep = json.loads(out.stdout)
    return int(dep["spec"].get("replicas") or 1), int((dep.get("status") or {}).get("readyReplicas") or 0)


def wait_all_ready(kubeconfig: str, timeout: float = 300) -> None:
    """The rollout complete, and exactly the desired number of operator pods, all Ready, none terminating."""
    wait_rollout(kubeconfig, int(timeout))
    want, _ = replicas(kubeconfig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pods = operator_pods(kubeconfig)
        if len(pods) == want and all(is_ready(p) for p in pods):
            return
        time.sleep(0.2)
    raise RuntimeError(f"the operator pods did not all become ready within {timeout:.0f}s")


def force_delete_one(kubeconfig: str) -> str:
    """``kubectl delete pod --grace-period=0 --force`` of one operator pod; returns its name."""
    pod = operator_pods(kubeconfig)[0]["metadata"]["name"]
    kubectl(kubeconfig, "-n", SYSTEM_NAMESPACE, "delete", "pod", pod, "--grace-period=0", "--force")
    return str(pod)


def rolling_restart(kubeconfig: str) -> None:
    kubectl(kubeconfig, "-n", SYSTEM_NAMESPACE, "rollout", "restart", f"deployment/{DEPLOYMENT}")


def evict(kubeconfig: str, pod: str) -> tuple[bool, str]:
    """POST an Eviction (what ``kubectl drain`` does per pod): (evicted, the server's message)."""
    import json

    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": SYSTEM_NAMESPACE}}
    path = f"/api/v1/namespaces/{SYSTEM_NAMESPACE}/pods/{pod}/eviction"
    out = kubectl(kubeconfig, "create", "--raw", path, "-f", "-", input=json.dumps(body), check=False)
    return out.returncode == 0, (out.stderr or out.stdout).strip()
