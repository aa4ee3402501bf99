"""The CRDs describe every field upstream's do, fit the API server's size limits, and explain what users ask."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api.crd import crd_filename, generate_crds
from tests.conftest import SHARED

ROOT = Path(__file__).resolve().parents[2]
CRDS = {crd_filename(c): c for c in generate_crds()}
UPSTREAM = SHARED / "reference" / "upstream" / "crds"

# etcd refuses objects over 1.5 MiB; what the API server stores for a CRD is the object plus managedFields (up
# to about half again for a schema this deep) plus status. Staying under 1 MiB as JSON leaves that room.
MAX_CRD_JSON = 1024 * 1024
# Client-side `kubectl apply` copies the object into the last-applied-configuration annotation, and
# annotations are limited to 256 KiB in total: bigger CRDs install only with `kubectl apply --server-side`.
MAX_CLIENT_SIDE_APPLY = 256 * 1024


def field_paths(schema: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """``spec.trainer.env.valueFrom``: every property path, lists and maps transparent (kubectl explain's view)."""
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}.{name}" if prefix else name
        yield path
        yield from field_paths(sub, path)
    if isinstance(schema.get("items"), dict):
        yield from field_paths(schema["items"], prefix)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from field_paths(schema["additionalProperties"], f"{prefix}.*")


def root(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def upstream_files() -> list[Any]:
    # OptimizationJob came after v2.3 (upstream's main): tests/api/test_optimization_crd.py compares it.
    return [
        pytest.param(version, name, id=f"{version}/{name}")
        for version in ("v2.1", "v2.3")
        for name in sorted(CRDS)
        if "optimizationjobs" not in name
    ]


@pytest.mark.parametrize(("version", "name"), upstream_files())
def test_every_upstream_field_path_is_in_our_crd(version: str, name: str) -> None:
    path = UPSTREAM / version / name
    if not path.exists():
        pytest.skip(f"{path} not found: the steering repo's shared/ must sit beside the repo (or set KUBETRAIN_SHARED)")
    theirs = set(field_paths(root(yaml.safe_load(path.read_text()))))
    ours = set(field_paths(root(CRDS[name])))
    assert len(theirs) > 500
    assert sorted(theirs - ours) == []


def _explain(kind_file: str, dotted: str) -> dict[str, Any]:
    node = root(CRDS[kind_file])
    for part in dotted.split("."):
        while "properties" not in node and isinstance(node.get("items"), dict):
            node = node["items"]
        node = node["properties"][part]
    return node


@pytest.mark.parametrize(
    ("kind_file", "path", "children"),
    [
        (
            "trainer.kubeflow.org_trainjobs.yaml",
            "spec.trainer.env.valueFrom.secretKeyRef",
            {"key", "name", "optional"},
        ),
        (
            "trainer.kubeflow.org_clustertrainingruntimes.yaml",
            "spec.template.spec.replicatedJobs.template.spec.template.spec.containers.resources",
            {"claims", "limits", "requests"},
        ),
        ("trainer.kubeflow.org_trainjobs.yaml", "status.trainerStatus.metrics", {"name", "value"}),
        (
            "trainer.kubeflow.org_trainingruntimes.yaml",
            "spec.mlPolicy.torch.elasticPolicy.metrics",
            {"containerResource", "external", "object", "pods", "resource", "type"},
        ),
    ],
)
def test_kubectl_explain_finds_documented_fields(kind_file: str, path: str, children: set[str]) -> None:
    node = _explain(kind_file, path)
    assert node["description"]
    item = node["items"] if node.get("type") == "array" else node
    assert set(item["properties"]) == children
    assert all(sub.get("description") for sub in item["properties"].values())


@pytest.mark.parametrize("name", sorted(CRDS))
def test_each_crd_fits_what_the_api_server_stores(name: str) -> None:
    assert len(json.dumps(CRDS[name], separators=(",", ":"))) < MAX_CRD_JSON


def test_install_docs_say_server_side_when_client_side_apply_cannot_work() -> None:
    too_big = [n for n, c in CRDS.items() if len(json.dumps(c, separators=(",", ":"))) > MAX_CLIENT_SIDE_APPLY]
    assert too_big, "the CRDs are small enough for client-side apply; the docs may drop the requirement"
    install = (ROOT / "docs" / "install.md").read_text()
    assert "kubectl apply --server-side -k manifests/overlays/manager" in install
    assert "--server-side" in (ROOT / "charts" / "kubetrain" / "templates" / "NOTES.txt").read_text()
