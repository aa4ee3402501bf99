"""ConfigMap, Secret and PersistentVolumeClaim: loading and the API server's rules, with field paths; a Secret's
values never appear in a message."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubetrain.api.core import (
    ConfigMap,
    PersistentVolumeClaim,
    Secret,
    normalized_secret,
    secret_bytes,
    validate_core_object,
)
from kubetrain.api.loader import load_text, parse_document

Obj = dict[str, Any]


def cm(name: str = "cfg", **fields: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **fields}


def secret(name: str = "creds", **fields: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, **fields}


def pvc(name: str = "data", storage: Any = "1Gi", modes: Any = ("ReadWriteOnce",), **spec: Any) -> Obj:
    s: Obj = {"accessModes": list(modes), **spec}
    if storage is not None:
        s["resources"] = {"requests": {"storage": storage}}
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name}, "spec": s}


def errors(doc: Obj, old: Obj | None = None) -> list[str]:
    """``path: message`` of every finding of loading and validating ``doc`` (as an update of ``old``)."""
    parsed = parse_document(doc)
    out = [f"{f.path}: {f.message}" for f in parsed.result.errors]
    if parsed.obj is not None:
        previous = parse_document(old).obj if old is not None else None
        result = validate_core_object(parsed.obj, old=previous)  # type: ignore[arg-type]
        out += [f"{f.path}: {f.message}" for f in result.errors]
    return out


def test_the_three_kinds_load_as_v1_without_a_skipped_warning() -> None:
    loaded = load_text("\n---\n".join(__import__("yaml").safe_dump(d) for d in (cm(data={"a": "b"}), secret(), pvc())))
    assert [o.kind for o in loaded.objects] == ["ConfigMap", "Secret", "PersistentVolumeClaim"]
    assert not loaded.result.errors and not loaded.result.warnings
    assert isinstance(loaded.objects[2], PersistentVolumeClaim)


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (cm(data={"port": 8080}), "data[port]: expected a string, got an integer (8080)"),
        (cm(data={"bad key": "x"}), "data[bad key]: invalid key 'bad key'"),
        (cm(data={"..x": "x"}), "data[..x]: invalid key '..x'"),
        (cm(data={"a": "1"}, binaryData={"a": "MQ=="}), "binaryData[a]: key 'a' is in both data and binaryData"),
        (cm(binaryData={"b": "%%%"}), "binaryData[b]: not valid base64"),
        (cm("Bad_Name"), "metadata.name: 'Bad_Name' is not a valid ConfigMap name"),
        (cm(""), "metadata.name: a ConfigMap needs a name"),
        (cm(datas={"a": "b"}), "datas: unknown field 'datas'"),
        ({**cm(), "apiVersion": "apps/v1"}, "apiVersion: apiVersion 'apps/v1' is not served for ConfigMap"),
        (secret(type="kubernetes.io/tls", data={"tls.crt": "eA=="}), "data: a Secret of type kubernetes.io/tls needs "
         "the key 'tls.key'"),
        (pvc(storage=None), "spec.resources.requests.storage: required"),
        (pvc(storage="10XB"), "spec.resources.requests.storage: invalid quantity '10XB'"),
        (pvc(storage="0"), "spec.resources.requests.storage: must be greater than zero"),
        (pvc(modes=()), "spec.accessModes: at least 1 access mode is required"),
        (pvc(modes=("ReadWriteSome",)), "spec.accessModes[0]: unsupported access mode 'ReadWriteSome'"),
        (pvc(modes=("ReadWriteOncePod", "ReadOnlyMany")), "spec.accessModes: ReadWriteOncePod may not be combined"),
        (pvc(volumeMode="Raw"), "spec.volumeMode: unsupported volume mode 'Raw'"),
        (cm(data={"big": "x" * (1024 * 1024 + 1)}), "data: the ConfigMap holds 1048580 bytes; the limit is"),
    ],
)
def test_invalid_objects_name_the_field(doc: Obj, expected: str) -> None:
    found = errors(doc)
    assert any(e.startswith(expected) for e in found), found


def test_valid_objects_have_no_findings() -> None:
    for doc in (cm(data={"app.conf": "x=1", "A_B-c": ""}, binaryData={"bin": "AAE="}),
                secret(data={"user": "YWRtaW4="}, stringData={"password": "p"}),
                secret(type="kubernetes.io/tls", stringData={"tls.crt": "c", "tls.key": "k"}),
                pvc(storage="500Mi", modes=("ReadWriteOnce", "ReadOnlyMany"), storageClassName="fast")):
        assert errors(doc) == [], doc


def test_string_data_is_merged_into_base64_data_as_the_api_server_stores_it() -> None:
    wire = secret(data={"user": base64.b64encode(b"old").decode(), "keep": "eA=="},
                  stringData={"user": "admin", "password": "s3cr3t"})
    stored = normalized_secret(wire)
    assert "stringData" not in stored and stored["type"] == "Opaque"
    assert {k: base64.b64decode(v) for k, v in stored["data"].items()} == {
        "user": b"admin", "keep": b"x", "password": b"s3cr3t"}  # stringData wins over data


@settings(max_examples=60, deadline=None)
@given(
    data=st.dictionaries(st.from_regex(r"[a-z][a-z0-9._-]{0,8}", fullmatch=True), st.binary(max_size=20), max_size=3),
    string_data=st.dictionaries(st.from_regex(r"[a-z][a-z0-9._-]{0,8}", fullmatch=True), st.text(max_size=20),
                                max_size=3),
)
def test_normalizing_keeps_every_value(data: dict[str, bytes], string_data: dict[str, str]) -> None:
    wire = secret(data={k: base64.b64encode(v).decode() for k, v in data.items()}, stringData=string_data)
    assert errors(wire) == []
    expected = {**data, **{k: v.encode() for k, v in string_data.items()}}
    assert secret_bytes(normalized_secret(wire)) == expected
    assert normalized_secret(normalized_secret(wire)) == normalized_secret(wire)


@settings(max_examples=60, deadline=None)
@given(value=st.text(alphabet="!@#$%^&*()_+=-~`abcXYZ", min_size=6, max_size=30).filter(
    lambda v: bool(len(v) % 4) or "!" in v))
def test_a_secret_value_never_appears_in_a_message(value: str) -> None:
    for doc in (secret(data={"pw": value}), secret(data={"pw": 12345678}), secret(stringData={"pw": 98765432}),
                secret(data={"pw": value}, type="kubernetes.io/tls")):
        found = errors(doc)
        assert found, doc
        shown = str(doc["data" if "data" in doc else "stringData"]["pw"])
        assert not any(shown in e for e in found), found


def test_updates_follow_the_api_servers_immutability_rules() -> None:
    frozen = cm(data={"a": "1"}, immutable=True)
    assert errors(cm(data={"a": "2"}, immutable=True), old=frozen) == [
        "data: field is immutable when `immutable` is set"]
    assert errors(cm(data={"a": "1"}), old=frozen) == ["immutable: field is immutable when `immutable` is set"]
    assert errors(cm(data={"a": "1"}, immutable=True), old=frozen) == []
    assert errors(secret(type="kubernetes.io/basic-auth"), old=secret()) == [
        "type: field is immutable (was 'Opaque')"]
    assert errors(pvc(storage="2Gi"), old=pvc(storage="1Gi")) == []  # a claim may grow
    assert errors(pvc(storage="512Mi"), old=pvc(storage="1Gi")) == [
        "spec.resources.requests.storage: field can not be less than the previous value (1Gi)"]
    assert errors(pvc(modes=("ReadWriteMany",)), old=pvc()) == [
        "spec: spec is immutable after creation except resources.requests for bound claims"]
    # Fields the server sets (the binding's volumeName, the default volumeMode) are not a change.
    bound = pvc(volumeName="pvc-1", volumeMode="Filesystem")
    assert errors(pvc(), old=bound) == []


def test_models_keep_what_was_written() -> None:
    obj = parse_document(secret(stringData={"a": "b"}, type="Opaque")).obj
    assert isinstance(obj, Secret) and obj.to_wire()["stringData"] == {"a": "b"}
    obj = parse_document(cm(data={"k": "v"})).obj
    assert isinstance(obj, ConfigMap) and obj.namespace == "default" and obj.name == "cfg"
