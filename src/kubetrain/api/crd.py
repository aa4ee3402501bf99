"""CustomResourceDefinitions generated from the pydantic API models.

The models in ``kubetrain.api`` are the single source of truth for the wire shape. This module turns
their JSON schemas into *structural* OpenAPI v3 schemas the Kubernetes API server accepts, and adds what
pydantic cannot express (the tables in ``crd_tables``): CEL rules (``x-kubernetes-validations``), list
semantics, bounds, the Kubernetes types embedded fields stand for (``k8sschema``), printer columns and
``kubectl explain`` text for fields the models leave undocumented.

Pure: no I/O. ``kubetrain crds`` prints the result; ``manifests/base/crds/`` holds a checked-in copy.

Public:

``generate_crds() -> list[dict]``
    The four CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime, OptimizationJob), as plain dicts.
``crd_filename(crd, ext="yaml") -> str``
    ``<group>_<plural>.yaml``, the file name used under ``manifests/base/crds`` (``.json`` in the Helm chart).
``dump_yaml(docs) -> str``
    Deterministic multi-document YAML.
``dump_compact_json(crd) -> str``
    One CRD as compact JSON, as the Helm chart holds it (why: the function's docstring).
``openapi_schema(model) -> dict``
    The structural schema of one model (used by the CRDs and by tests).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Final, get_args, get_origin

import yaml
from pydantic import BaseModel

from kubetrain.api import crd_tables as tables
from kubetrain.api import k8sschema, optimization, runtime, trainjob
from kubetrain.api.constants import (
    GROUP,
    KIND_CLUSTER_TRAINING_RUNTIME,
    KIND_OPTIMIZATIONJOB,
    KIND_TRAINING_RUNTIME,
    KIND_TRAINJOB,
    LABEL_FRAMEWORK,
    VERSION,
)

Schema = dict[str, Any]


# --- model walking ---


def _models_under(model: type[BaseModel]) -> dict[str, type[BaseModel]]:
    """Every model reachable from ``model``'s fields, by class name (pydantic's ``$defs`` key)."""
    found: dict[str, type[BaseModel]] = {}

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp.__name__ in found:
                return
            found[tp.__name__] = tp
            for f in tp.model_fields.values():
                visit(f.annotation)
            return
        for arg in get_args(tp):
            visit(arg)
        if get_origin(tp) is not None:
            visit(get_origin(tp))

    visit(model)
    return found


def _alias(model: type[BaseModel], field: str) -> str:
    info = model.model_fields[field]  # KeyError here means a table above names a field that no longer exists
    return info.alias or field


class _Converter:
    """Turns one pydantic JSON schema into a structural OpenAPI v3 schema."""

    def __init__(self, root: type[BaseModel]):
        self.root = root
        self.raw = root.model_json_schema(by_alias=True, mode="validation")
        self.defs: dict[str, Schema] = self.raw.get("$defs", {})
        self.models = _models_under(root)
        self.applied: set[object] = set()

    def run(self) -> Schema:
        return self._model(self.raw, self.root)

    def _model(self, node: Schema, model: type[BaseModel] | None) -> Schema:
        out = self._node(node)
        if model is None:
            return out
        props: dict[str, Schema] = out.get("properties", {})
        for name, info in model.model_fields.items():
            key = info.alias or name
            if key not in props:
                continue
            prop = props[key]
            # A field's own description= wins; the table beats the docstring of the field's class.
            own = "description" in (node.get("properties") or {}).get(key, {})
            if not own and (model, name) in tables.DESCRIPTIONS:
                prop["description"] = tables.DESCRIPTIONS[(model, name)]
            if (model, name) in tables.DESCRIPTIONS:
                self.applied.add(("desc", model, name))
            if (model, name) in tables.FIELD_RULES:
                prop.setdefault("x-kubernetes-validations", []).extend(
                    copy.deepcopy(tables.FIELD_RULES[(model, name)])
                )
                self.applied.add(("rule", model, name))
            if (model, name) in tables.LIST_MAPS:
                prop["x-kubernetes-list-type"] = "map"
                prop["x-kubernetes-list-map-keys"] = list(tables.LIST_MAPS[(model, name)])
                self.applied.add(("map", model, name))
            for extra_key, extra in tables.SCHEMA_EXTRA.get((model, name), {}).items():
                prop[extra_key] = {**prop.get(extra_key, {}), **extra} if isinstance(extra, dict) else extra
                self.applied.add(("extra", model, name))
            if (model, name) in tables.LIST_SETS:
                prop["x-kubernetes-list-type"] = "set"
            if (model, name) in tables.LIST_ATOMIC:
                prop["x-kubernetes-list-type"] = "atomic"
            if (model, name) in tables.K8S_FIELDS:
                props[key] = tables.k8s_field(prop, tables.K8S_FIELDS[(model, name)])
                self.applied.add(("k8s", model, name))
        if model in tables.MODEL_RULES:
            out.setdefault("x-kubernetes-validations", []).extend(copy.deepcopy(tables.MODEL_RULES[model]))
            self.applied.add(("model", model))
        return out

    def _node(self, node: Schema) -> Schema:
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            model = self.models.get(name)
            if model in tables.K8S_MODELS:
                resolved = k8sschema.schema(tables.K8S_MODELS[model])
            else:
                resolved = self._model(self.defs[name], model)
            # Keys beside the $ref (a field's own description) describe this use and win over the class's.
            for k, v in self._node({k: v for k, v in node.items() if k != "$ref"}).items():
                resolved[k] = v
            return resolved
        if "anyOf" in node:
            return self._any_of(node)
        out: Schema = {}
        for key, value in node.items():
            if key in ("title", "$defs"):
                continue
            if key == "default" and value is None:
                continue  # "unset" in pydantic; the API server must not fill it in
            if key == "const":
                out["enum"] = [value]
            elif key == "exclusiveMinimum":
                # JSON Schema 2020-12 gives a number; OpenAPI v3.0 (what CRDs use) wants minimum + a boolean.
                out["minimum"] = value
                out["exclusiveMinimum"] = True
            elif key == "exclusiveMaximum":
                out["maximum"] = value
                out["exclusiveMaximum"] = True
            elif key == "properties":
                out["properties"] = {k: self._node(v) for k, v in value.items()}
            elif key == "items":
                out["items"] = self._node(value)
            elif key == "additionalProperties":
                if isinstance(value, dict):
                    out["additionalProperties"] = self._node(value)
                elif value is True and "properties" not in node:
                    # A free-form dict the tables above do not type. No CRD field is left like that (a test
                    # checks), but the converter stays total.
                    out["x-kubernetes-preserve-unknown-fields"] = True
                # True next to properties (a model that passes unknown fields through in Python): the CRD
                # still prunes them, so what the server stores is what the schema describes.
                # False: pruning already drops unknown fields; structural schemas may not say false.
            else:
                out[key] = copy.deepcopy(value)
        if out.get("type") == "object" and "additionalProperties" in out and "properties" in out:
            del out["additionalProperties"]  # not allowed together in a structural schema
        return out

    def _any_of(self, node: Schema) -> Schema:
        options = [o for o in node["anyOf"] if o.get("type") != "null"]
        siblings = self._node({k: v for k, v in node.items() if k != "anyOf"})
        if len(options) == 1:
            out = self._node(options[0])
        else:
            types = {o.get("type") for o in options}
            if not types <= {"integer", "number", "string"} or "string" not in types:
                raise ValueError(f"cannot express anyOf {options!r} in a structural schema")
            # int | str (IntOrString, quantities): the one union structural schemas allow.
            out = {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}
        out.update(siblings)
        return out


def openapi_schema(model: type[BaseModel]) -> Schema:
    """The structural OpenAPI v3 schema for ``model`` (no ``$ref``, no null unions, CEL rules attached)."""
    schema: Schema = _tidy(_Converter(model).run())
    return schema


# Schema keys in the order a reader scans them (what it is, then constraints, then children, then extensions).
_KEY_ORDER: Final = (
    "description", "type", "format", "default", "enum",
    "minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "minLength", "maxLength", "pattern",
    "minItems", "maxItems", "minProperties", "maxProperties",
    "anyOf", "properties", "additionalProperties", "items", "required",
)  # fmt: skip


def _tidy(node: Any) -> Any:
    """Orders keys for readable YAML; turns reST ``literals`` into Markdown `literals` for kubectl explain."""
    if isinstance(node, list):
        return [_tidy(v) for v in node]
    if not isinstance(node, dict):
        return node
    rank = {k: i for i, k in enumerate(_KEY_ORDER)}
    out: dict[str, Any] = {}
    for key in sorted(node, key=lambda k: (rank.get(k, len(rank)), k)):
        value = node[key]
        if key == "properties":
            if not value:
                # The API server drops an empty `properties` when it stores the CRD; emitting it would make every
                # server-side apply by a second field manager (kubectl after helm, an upgrade) a conflict, because
                # what it applies would differ from what is stored.
                continue
            out[key] = {name: _tidy(v) for name, v in value.items()}  # keep the models' field order
        elif key == "description" and isinstance(value, str):
            out[key] = value.replace("``", "`")
        elif key in ("default", "enum", "x-kubernetes-validations"):
            out[key] = copy.deepcopy(value)
        else:
            out[key] = _tidy(value)
    return out


def _crd(
    schema: Schema,
    kind: str,
    plural: str,
    short: str,
    scope: str,
    columns: list[dict[str, str]],
    status: bool,
    scale: dict[str, str] | None = None,
) -> dict[str, Any]:
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": columns,
    }
    if status:
        version["subresources"] = {"status": {}}
    if scale:
        version.setdefault("subresources", {})["scale"] = scale
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{plural}.{GROUP}",
            "labels": {"app.kubernetes.io/name": "kubetrain", "app.kubernetes.io/component": "crd"},
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": [short],
            },
            "scope": scope,
            "versions": [version],
        },
    }


# `kubectl scale` and a HorizontalPodAutoscaler change the trainer's node count through this subresource; the
# operator keeps the status side (the running JobSet's node count and the trainer pods' selector) current.
TRAINJOB_SCALE: Final = {
    "specReplicasPath": ".spec.trainer.numNodes",
    "statusReplicasPath": ".status.numNodes",
    "labelSelectorPath": ".status.selector",
}

_STATE: Final = {"name": "State", "type": "string", "jsonPath": ".status.conditions[-1:].type"}
_AGE: Final = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_FRAMEWORK: Final = {
    "name": "Framework",
    "type": "string",
    "jsonPath": ".metadata.labels." + LABEL_FRAMEWORK.replace(".", "\\."),
}


def generate_crds() -> list[dict[str, Any]]:
    """TrainJob, TrainingRuntime, ClusterTrainingRuntime and OptimizationJob CRDs, in that order.

    Raises ``LookupError`` if a CEL rule, list rule or description above names a field the models no longer
    have (so a rename cannot silently drop a validation).
    """
    converters_applied: set[object] = set()

    def build(model: type[BaseModel], kind: str, *args: Any) -> dict[str, Any]:
        conv = _Converter(model)
        crd = _crd(_top_level(conv, kind), kind, *args)
        converters_applied.update(conv.applied)
        return crd

    crds = [
        build(
            trainjob.TrainJob,
            KIND_TRAINJOB,
            "trainjobs",
            "tj",
            "Namespaced",
            [
                _STATE,
                # KEP-2779's column: the last progress the job reported (kubetrain get shows it as PROGRESS).
                {"name": "Progress %", "type": "integer", "jsonPath": ".status.trainerStatus.progressPercentage"},
                {"name": "Runtime", "type": "string", "jsonPath": ".spec.runtimeRef.name"},
                _AGE,
            ],
            True,
            TRAINJOB_SCALE,
        ),
        build(
            runtime.TrainingRuntime,
            KIND_TRAINING_RUNTIME,
            "trainingruntimes",
            "tr",
            "Namespaced",
            [_FRAMEWORK, _AGE],
            False,
        ),
        build(
            runtime.ClusterTrainingRuntime,
            KIND_CLUSTER_TRAINING_RUNTIME,
            "clustertrainingruntimes",
            "ctr",
            "Cluster",
            [_FRAMEWORK, _AGE],
            False,
        ),
        build(
            optimization.OptimizationJob,
            KIND_OPTIMIZATIONJOB,
            "optimizationjobs",
            "oj",
            "Namespaced",
            [
                _STATE,
                {"name": "Best Trial", "type": "string", "jsonPath": ".status.result.trainJobName"},
                {"name": "Trials", "type": "integer", "jsonPath": ".spec.numTrials"},
                _AGE,
            ],
            True,
        ),
    ]
    expected: set[object] = {("rule", m, f) for m, f in tables.FIELD_RULES}
    expected |= {("map", m, f) for m, f in tables.LIST_MAPS}
    expected |= {("desc", m, f) for m, f in tables.DESCRIPTIONS}
    expected |= {("model", m) for m in tables.MODEL_RULES}
    expected |= {("extra", m, f) for m, f in tables.SCHEMA_EXTRA}
    expected |= {("k8s", m, f) for m, f in tables.K8S_FIELDS}
    for table in (
        tables.FIELD_RULES, tables.LIST_MAPS, tables.DESCRIPTIONS, tables.LIST_SETS, tables.LIST_ATOMIC,
        tables.SCHEMA_EXTRA, tables.K8S_FIELDS,
    ):  # fmt: skip
        for m, f in table:
            _alias(m, f)
    missing = expected - converters_applied
    if missing:
        raise LookupError(f"CRD annotations not applied (model changed?): {sorted(map(str, missing))}")
    return crds


def _top_level(conv: _Converter, kind: str) -> Schema:
    """The root schema: standard apiVersion/kind/metadata, then the model's spec (and status)."""
    schema = conv.run()
    props = schema["properties"]
    props["apiVersion"] = {"type": "string", "description": tables.API_VERSION_DESCRIPTION}
    props["kind"] = {"type": "string", "description": tables.KIND_FIELD_DESCRIPTION}
    # The API server validates metadata itself and forbids a detailed schema for it at the root.
    props["metadata"] = {"type": "object"}
    schema["description"] = tables.KIND_DESCRIPTIONS[kind]
    required = [r for r in schema.get("required", []) if r not in ("apiVersion", "kind", "metadata")]
    if required:
        schema["required"] = required
    else:
        schema.pop("required", None)
    schema.pop("x-kubernetes-preserve-unknown-fields", None)
    tidy: Schema = _tidy(schema)
    return tidy


def crd_filename(crd: dict[str, Any], ext: str = "yaml") -> str:
    """``trainer.kubeflow.org_trainjobs.yaml``: the upstream naming, so diffs against upstream line up."""
    spec = crd["spec"]
    return f"{spec['group']}_{spec['names']['plural']}.{ext}"


def dump_compact_json(crd: dict[str, Any]) -> str:
    """One CRD as compact JSON, for the Helm chart's ``crds/``: Helm keeps every file of a chart in its release
    Secret (JSON, file contents base64-encoded, then gzipped), which the API server caps at 1 MiB. Base64 hides the
    repetition of a YAML file's indentation from gzip, and with the OptimizationJob CRD the YAML copies no longer
    fit; compact JSON (which Helm reads from ``crds/`` like YAML) does, with room to spare."""
    return json.dumps(crd, separators=(",", ":"), ensure_ascii=False) + "\n"


class _Dumper(yaml.SafeDumper):
    pass


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def dump_yaml(docs: list[dict[str, Any]]) -> str:
    """Multi-document YAML with keys in insertion order (the models' field order), stable across runs."""
    return "".join(
        "---\n" + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=120, default_flow_style=False)
        for doc in docs
    )
