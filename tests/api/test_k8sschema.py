"""The Kubernetes type schemas the CRDs embed: generated from the pinned kubernetes-validate package, kept fresh."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import k8sschema

DATA = Path(k8sschema.__file__).parent / "data" / "k8s_definitions.json"


def _upstream_definitions() -> dict[str, Any]:
    kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate not installed")
    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    path = base / f"{k8sschema.K8S_VERSION}-local" / "_definitions.json"
    defs: dict[str, Any] = json.loads(path.read_text())["$defs"]
    return defs


def render(defs: dict[str, Any]) -> str:
    doc = {"kubernetesVersion": k8sschema.K8S_VERSION, "source": "kubernetes-validate", "definitions": defs}
    return json.dumps(doc, indent=1) + "\n"  # one field per line: a version bump reviews as a diff


def test_packaged_definitions_are_generated_from_kubernetes_validate() -> None:
    """Regenerate with ``KUBETRAIN_UPDATE_MANIFESTS=1 pytest tests/api/test_k8sschema.py`` after a version bump."""
    fresh = render(k8sschema.extract(_upstream_definitions()))
    if os.environ.get("KUBETRAIN_UPDATE_MANIFESTS"):
        DATA.write_text(fresh)
        k8sschema.definitions.cache_clear()
    assert DATA.read_text() == fresh, "stale: KUBETRAIN_UPDATE_MANIFESTS=1 pytest tests/api/test_k8sschema.py"


def test_every_root_and_everything_it_references_is_packaged() -> None:
    defs = k8sschema.definitions()
    assert set(k8sschema.ROOTS) <= set(defs)
    for name in k8sschema.ROOTS:
        text = json.dumps(k8sschema.schema(name))
        assert '"$ref"' not in text, name


def test_swagger_shapes_become_structural() -> None:
    raw = {
        "A": {
            "type": ["object", "null"],
            "properties": {
                "q": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.api.resource.Quantity", "description": "mine"},
                "n": {"type": ["integer", "null"], "format": "int32", "x-kubernetes-patch-strategy": "merge"},
                "t": {"$ref": "#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
            },
        },
        "io.k8s.apimachinery.pkg.api.resource.Quantity": {"oneOf": [{"type": "string"}, {"type": "number"}]},
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time": {"type": ["string", "null"], "format": "date-time"},
    }
    out = k8sschema.extract(raw, ("A",))
    assert out["A"] == {
        "type": "object",
        "properties": {
            "q": {"$ref": "io.k8s.apimachinery.pkg.api.resource.Quantity", "description": "mine"},
            "n": {"type": "integer", "format": "int32"},
            "t": {"$ref": "io.k8s.apimachinery.pkg.apis.meta.v1.Time"},
        },
    }
    quantity = out["io.k8s.apimachinery.pkg.api.resource.Quantity"]
    assert quantity["x-kubernetes-int-or-string"] is True
    assert quantity["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    assert out["io.k8s.apimachinery.pkg.apis.meta.v1.Time"] == {"type": "string", "format": "date-time"}


@pytest.mark.parametrize(
    ("value", "ok"),
    [("1", True), ("500m", True), ("4Gi", True), (".5", True), ("1e3", True), ("-1Ki", True), ("1.5", True),
     ("2 cores", False), ("Gi", False), ("1.5.5", False), ("", False), ("4GB", False)],
)  # fmt: skip
def test_quantity_pattern(value: str, ok: bool) -> None:
    assert bool(re.match(k8sschema.QUANTITY_PATTERN, value)) is ok


def test_list_map_keys_are_required_or_defaulted() -> None:
    """A CRD is rejected when a key of a keyed list is neither required nor defaulted."""
    defs = k8sschema.definitions()
    assert defs["io.k8s.api.core.v1.ContainerPort"]["properties"]["protocol"]["default"] == "TCP"
    for name in k8sschema.ROOTS:
        stack: list[Any] = [k8sschema.schema(name)]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if node.get("x-kubernetes-list-type") == "map":
                    item = node["items"]
                    for key in node["x-kubernetes-list-map-keys"]:
                        assert key in item.get("required", []) or "default" in item["properties"][key], key
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)


def test_patch_drops_only_the_top_level_required() -> None:
    assert k8sschema.schema(k8sschema.POD_SPEC)["required"] == ["containers"]
    patch = k8sschema.schema(k8sschema.POD_SPEC, patch=True)
    assert "required" not in patch
    assert patch["properties"]["containers"]["items"]["required"] == ["name"]


def test_embedded_metadata_has_only_what_templates_keep() -> None:
    meta = k8sschema.schema("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
    assert sorted(meta["properties"]) == sorted(k8sschema.EMBEDDED_META_FIELDS)
    assert meta["properties"]["labels"]["additionalProperties"] == {"type": "string"}
