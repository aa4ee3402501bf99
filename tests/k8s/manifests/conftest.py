"""Helpers for the install-manifest tests: load YAML, build with kustomize, validate against Kubernetes and
our own CRD schemas."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_schema_validator import OAS30Validator

from kubetrain.api.crd import generate_crds

ROOT = Path(__file__).resolve().parents[3]
MANIFESTS = ROOT / "manifests"
BASE = MANIFESTS / "base"
"""The pieces: crds, operator, rbac, webhook, public (the manager install) and runtimes."""
MANAGER = MANIFESTS / "overlays" / "manager"
"""Step 1 of docs/install.md: everything but the built-in runtimes."""
RUNTIMES = MANIFESTS / "overlays" / "runtimes"
"""Step 3: the built-in ClusterTrainingRuntimes, once their CRD is Established."""
CHART = ROOT / "charts" / "kubetrain"
K8S_VERSION = "1.37.0"
NAMESPACE = "kubeflow-system"

_CRD_SCHEMAS = {
    c["spec"]["names"]["kind"]: c["spec"]["versions"][0]["schema"]["openAPIV3Schema"] for c in generate_crds()
}


def load_docs(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def kustomize_build(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip(
            "kubectl not installed (its built-in kustomize renders the tree); "
            "files are still checked one by one"
        )
    out = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return load_docs(out.stdout)


def schema_errors(obj: dict[str, Any]) -> list[str]:
    """Errors of ``obj`` against Kubernetes' schema (built-in kinds) or our generated CRD (our kinds)."""
    kind = obj.get("kind", "")
    if obj.get("apiVersion", "").startswith("trainer.kubeflow.org/"):
        return [e.message for e in OAS30Validator(_CRD_SCHEMAS[kind]).iter_errors(obj)]
    if kind in ("Issuer", "Certificate") and obj.get("apiVersion", "").startswith("cert-manager.io/"):
        return []  # cert-manager's CRDs are not ours to carry; their shape is checked in the chart tests
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed")
    try:
        kv.validate(obj, K8S_VERSION, strict=True)
    except kv.ValidationError as exc:
        return [str(exc).splitlines()[0]]  # the first line names the problem; the rest dumps the schema
    return []
