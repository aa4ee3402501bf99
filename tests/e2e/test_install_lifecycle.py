"""Install, upgrade and uninstall kubetrain for real on the bed, with kustomize and with the Helm chart, the way
docs/install.md says; a TrainJob runs after each install and across each upgrade, and an uninstall leaves nothing
behind (Helm keeps the CRDs, as Helm does with every chart's ``crds/``). Each documented step must work the first
time, on a cluster that has never had the CRDs too: the kustomize install applies the manager overlay, waits for the
ClusterTrainingRuntime CRD to be Established, then applies the runtimes overlay; Helm installs the chart's ``crds/``
and waits for them before it applies the templates (the runtimes among them).

These tests replace the bed's install and put the kustomize install of this checkout back when they end. Uninstalling
deletes the CRDs and with them every TrainJob and runtime on the cluster, so a test refuses (skips, naming them) when
the cluster holds TrainJobs or runtimes that this suite did not make. Helm runs through Helm's own Go library
(``helm-python-sdk``, in the dev extra), so no helm binary is needed.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    CRD,
    CTR,
    DEPLOYMENT,
    KUBECONFIG,
    MWC,
    OPERATOR_NAME,
    OPERATOR_NAMESPACE,
    RBAC,
    REPO,
    VWC,
    DeployedOperator,
    call,
    get,
    kubectl,
    list_of,
    pods_of,
    setup_runtime,
    sh,
    trainjob,
    uniq,
    wait_finished,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

MANIFESTS = REPO / "manifests"
MANAGER = MANIFESTS / "overlays" / "manager"
RUNTIMES = MANIFESTS / "overlays" / "runtimes"
CHART = REPO / "charts" / "kubetrain"
CRDS = [f"{p}.trainer.kubeflow.org" for p in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")]
RELEASE = "kubetrain"
OURS = "kt-"  # namespaces this suite makes: kt-e2e-*, kt-pss-*, kt-rbac-*


def foreign() -> list[str]:
    """What an uninstall would delete that this suite did not make."""
    out = []
    if all(get(CRD, n, None) for n in CRDS):
        for res in (r.TRAINJOB, r.TRAINING_RUNTIME):
            for o in list_of(res, None):
                ns = o["metadata"]["namespace"]
                if not ns.startswith(OURS):
                    out.append(f"{res.kind} {ns}/{o['metadata']['name']}")
        for o in list_of(CTR, None):
            if (o["metadata"].get("labels") or {}).get("app.kubernetes.io/part-of") != "kubetrain":
                out.append(f"ClusterTrainingRuntime {o['metadata']['name']}")
    return out


def kustomize_install(manager: Path = MANAGER) -> None:
    """docs/install.md, each step once, and each must work the first time (also on a cluster that never had the
    CRDs): the manager overlay, the ClusterTrainingRuntime CRD Established, the runtimes overlay."""
    kubectl("apply", "--server-side", "-k", str(manager))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/clustertrainingruntimes.trainer.kubeflow.org")
    kubectl("apply", "--server-side", "-k", str(RUNTIMES))


def kustomize_uninstall(manager: Path = MANAGER) -> None:
    """docs/install.md: the runtimes overlay (while the operator still runs), then the manager overlay, CRDs and
    all."""
    for tree in (RUNTIMES, manager):
        kubectl("delete", "-k", str(tree), "--ignore-not-found", "--wait=true", "--timeout=600s", timeout=900)


def helm() -> Any:
    helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm's Go library) not installed")
    return helm_python.Config(kubeconfig_path=KUBECONFIG, namespace=OPERATOR_NAMESPACE)


def helm_release() -> dict[str, Any] | None:
    with helm() as cfg:
        found = [rel for rel in cfg.list(all_states=True) if rel.get("name") == RELEASE]
    return found[0] if found else None


def restore() -> None:
    """The bed's install as it was: the kustomize tree of this checkout, rolled out (also after a failed step)."""
    if helm_release() is not None:
        with helm() as cfg:
            cfg.uninstall(RELEASE, wait="watcher", timeout=300)
    # A namespace still terminating refuses new objects: wait for it to go, or for it to be usable.
    wait_until(lambda: not ((get(r.NAMESPACE, OPERATOR_NAMESPACE, None) or {}).get("metadata") or {}).get(
        "deletionTimestamp"), 600, "kubeflow-system to finish terminating")  # fmt: skip
    for crd in CRDS:
        wait_until(lambda n=crd: not ((get(CRD, n, None) or {}).get("metadata") or {}).get("deletionTimestamp"), 600,
                   f"CRD {crd} to finish terminating")  # fmt: skip
    kustomize_install()
    DeployedOperator().wait_ready(600)
    # The tests after this one use the built-in runtimes at once.
    admitted({"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
              "metadata": {"name": "restore-probe", "namespace": "default"},
              "spec": {"runtimeRef": {"name": "torch-distributed"}}})  # fmt: skip


def admitted(obj: dict[str, Any]) -> None:
    """Wait until a server-side dry run of creating ``obj`` passes every admission webhook. After the CRDs were
    deleted and created again, a webhook of another controller that reads runtimes from its cache (Kueue's
    vtrainjob.kb.io) refuses TrainJobs with "runtime '...' not found" until its watch of the new CRD catches up."""

    def dry_run() -> subprocess.CompletedProcess[str]:
        return kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj), check=False)

    wait_until(lambda: dry_run().returncode == 0, 300, "a TrainJob admitted by every webhook", lambda: dry_run().stderr)


@pytest.fixture
def replaceable(operator: DeployedOperator) -> Iterator[None]:
    others = foreign()
    if others:
        pytest.skip("uninstalling would delete what others made: " + ", ".join(others[:10]))
    try:
        yield
    finally:
        restore()


def part_of_kubetrain(res: Any) -> list[str]:
    return [o["metadata"]["name"] for o in list_of(res, None, "app.kubernetes.io/part-of=kubetrain")]


def assert_uninstalled(*, crds_kept: bool) -> None:
    wait_until(lambda: get(DEPLOYMENT, OPERATOR_NAME, OPERATOR_NAMESPACE) is None, 300, "the Deployment gone")
    wait_until(lambda: not DeployedOperator().pods(), 300, "the operator pods gone")
    assert get(VWC, "validator.trainer.kubeflow.org", None) is None
    assert get(MWC, "defaulter.trainer.kubeflow.org", None) is None
    assert part_of_kubetrain(RBAC["ClusterRole"]) == [] and part_of_kubetrain(RBAC["ClusterRoleBinding"]) == []
    if crds_kept:
        assert all(get(CRD, n, None) for n in CRDS)
        assert list_of(CTR, None, "app.kubernetes.io/part-of=kubetrain") == []  # templates go, CRDs stay
    else:
        wait_until(lambda: not any(get(CRD, n, None) for n in CRDS), 300, "the CRDs gone")


def run_one(ns: str, script: str = "echo ok") -> str:
    rt = setup_runtime(ns)
    name = uniq("tj")
    job = trainjob(name, ns, rt, trainer=sh(script))
    admitted(job)
    call(lambda c: c.create(job))
    return name


def args_of_operator() -> list[str]:
    dep = get(DEPLOYMENT, OPERATOR_NAME, OPERATOR_NAMESPACE) or {}
    return list(dep["spec"]["template"]["spec"]["containers"][0]["args"])


def upgraded_kustomization(tmp: Path) -> Path:
    """An overlay of this checkout's manager overlay that changes an operator flag: an upgrade that rolls the
    Deployment."""
    deployment = yaml.safe_load((MANIFESTS / "base" / "operator" / "deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = ["--concurrency=3" if a.startswith("--concurrency=") else a for a in container["args"]]
    patch = {"apiVersion": "apps/v1", "kind": "Deployment",
             "metadata": {"name": OPERATOR_NAME, "namespace": OPERATOR_NAMESPACE},
             "spec": {"template": {"spec": {"containers": [{"name": container["name"], "args": args}]}}}}  # fmt: skip
    (tmp / "patch.yaml").write_text(yaml.safe_dump(patch))
    kustomization = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
                     "resources": [os.path.relpath(MANAGER, tmp)], "patches": [{"path": "patch.yaml"}]}  # fmt: skip
    (tmp / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return tmp


def test_kustomize_install_upgrade_uninstall(namespace: str, replaceable: None, tmp_path: Path) -> None:
    ns = namespace
    running = run_one(ns, "sleep 3600")
    wait_until(lambda: pods_of(running, ns), 180, "a pod of a job running before the uninstall")

    kustomize_uninstall()
    assert_uninstalled(crds_kept=False)
    wait_until(lambda: not pods_of(running, ns), 300, "the running job's pods collected with it")

    kustomize_install()  # on a cluster without the CRDs: each step works the first time
    assert {o["metadata"]["name"] for o in list_of(CTR, None)} >= {"torch-distributed", "deepspeed-distributed"}
    op = DeployedOperator().wait_ready(600)
    assert wait_finished(run_one(ns), ns)["type"] == "Complete"

    across = run_one(ns, "sleep 30; echo survived")
    wait_until(lambda: pods_of(across, ns), 180, "a pod of the job running across the upgrade")
    overlay = upgraded_kustomization(tmp_path)
    kustomize_install(overlay)  # an upgrade is the same three steps
    assert "--concurrency=3" in args_of_operator()
    op.wait_ready(600)
    assert all("--concurrency=3" in p["spec"]["containers"][0]["args"] for p in op.pods())
    assert wait_finished(across, ns)["type"] == "Complete"
    assert wait_finished(run_one(ns), ns)["type"] == "Complete"

    kustomize_uninstall(overlay)
    assert_uninstalled(crds_kept=False)
    assert get(r.NAMESPACE, OPERATOR_NAMESPACE, None) is None


def test_helm_install_upgrade_uninstall(namespace: str, replaceable: None) -> None:
    ns = namespace
    kustomize_uninstall()
    assert_uninstalled(crds_kept=False)

    with helm() as cfg:
        release = cfg.install(str(CHART), RELEASE, {}, namespace=OPERATOR_NAMESPACE, create_namespace=True,
                              wait="watcher", timeout=600)  # fmt: skip
    assert (release["revision"], release["status"]) == (1, "deployed"), {
        k: release[k] for k in release if k != "manifest"
    }
    op = DeployedOperator().wait_ready(600)
    assert all(get(CRD, n, None) for n in CRDS)
    assert {o["metadata"]["name"] for o in list_of(CTR, None)} >= {"torch-distributed", "deepspeed-distributed"}
    assert wait_finished(run_one(ns), ns)["type"] == "Complete"

    across = run_one(ns, "sleep 30; echo survived")
    wait_until(lambda: pods_of(across, ns), 180, "a pod of the job running across the upgrade")
    with helm() as cfg:
        upgraded = cfg.upgrade(str(CHART), RELEASE, {"operator": {"concurrency": 3}}, namespace=OPERATOR_NAMESPACE,
                               reuse_values=True, wait="watcher", timeout=600)  # fmt: skip
    assert (upgraded["revision"], upgraded["status"]) == (2, "deployed"), {
        k: upgraded[k] for k in upgraded if k != "manifest"
    }
    assert "--concurrency=3" in args_of_operator()
    op.wait_ready(600)
    assert wait_finished(across, ns)["type"] == "Complete"
    assert wait_finished(run_one(ns), ns)["type"] == "Complete"
    kept = run_one(ns)
    wait_finished(kept, ns)

    with helm() as cfg:
        cfg.uninstall(RELEASE, wait="watcher", timeout=300)
    assert helm_release() is None
    assert_uninstalled(crds_kept=True)
    assert get(r.TRAINJOB, kept, ns) is not None  # the CRDs stay, and so do the TrainJobs
