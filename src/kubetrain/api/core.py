"""The core (``v1``) objects pods reference: ConfigMap, Secret and PersistentVolumeClaim.

Modelled as far as kubetrain reads them, validated as the API server validates them (names, keys, base64, sizes,
quantities, immutability), every finding with its field path. A Secret's values never appear in a message: they
are named by key and described by kind only.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Final, Literal, Protocol

from pydantic import Field

from kubetrain.api._base import Model, OpenModel
from kubetrain.api.errors import Result
from kubetrain.api.meta import ObjectMeta
from kubetrain.api.quantity import Quantity, QuantityError

KIND_CONFIGMAP: Final = "ConfigMap"
KIND_SECRET: Final = "Secret"
KIND_PVC: Final = "PersistentVolumeClaim"
CORE_KINDS: Final = (KIND_CONFIGMAP, KIND_SECRET, KIND_PVC)
CORE_API_VERSION: Final = "v1"

MAX_DATA_BYTES: Final = 1024 * 1024  # the API server's limit on a ConfigMap's or Secret's data
ACCESS_MODES: Final = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
ACCESS_MODE_SHORT: Final = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX",
                            "ReadWriteOncePod": "RWOP"}
PVC_PROTECTION: Final = "kubernetes.io/pvc-protection"

_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# Keys a Secret of a kubernetes.io type must have (the API server's ValidateSecret).
_REQUIRED_KEYS: Final = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/dockercfg": (".dockercfg",),
}


class _HasMetadata(Protocol):
    @property
    def metadata(self) -> ObjectMeta: ...


class _Named:
    """The name and namespace the three core kinds are keyed by. A plain mixin: a field declared here would put
    ``metadata`` before ``apiVersion`` and ``kind`` in every dump."""

    @property
    def name(self: _HasMetadata) -> str:
        return self.metadata.name or ""

    @property
    def namespace(self: _HasMetadata) -> str:
        return self.metadata.namespace or "default"


class _KeyedData(Model, _Named):
    """What a ConfigMap and a Secret both are: named data under keys, in the wire order apiVersion, kind,
    metadata, data, then each kind's own fields."""

    api_version: str = CORE_API_VERSION
    kind: str
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    # Values are checked by ``validate_core_object`` (a number needs quoting: the message says so).
    data: dict[str, Any] | None = None


class ConfigMap(_KeyedData):
    kind: Literal["ConfigMap"] = KIND_CONFIGMAP
    binary_data: dict[str, Any] | None = None
    immutable: bool | None = None


class Secret(_KeyedData):
    kind: Literal["Secret"] = KIND_SECRET
    string_data: dict[str, Any] | None = None
    type: str | None = None
    immutable: bool | None = None


class VolumeResourceRequirements(Model):
    limits: dict[str, int | float | str] | None = None
    requests: dict[str, int | float | str] | None = None


class PersistentVolumeClaimSpec(OpenModel):
    """Fields kubetrain reads; the rest (selector, dataSource, ...) pass through."""

    access_modes: list[str] | None = None
    resources: VolumeResourceRequirements | None = None
    storage_class_name: str | None = None
    volume_mode: str | None = None
    volume_name: str | None = None


class PersistentVolumeClaim(Model, _Named):
    api_version: str = CORE_API_VERSION
    kind: Literal["PersistentVolumeClaim"] = KIND_PVC
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PersistentVolumeClaimSpec
    status: dict[str, Any] | None = None


CoreObject = ConfigMap | Secret | PersistentVolumeClaim


def _kind_of(value: Any) -> str:
    names = {dict: "an object", list: "a list", bool: "a boolean", int: "an integer", float: "a number",
             type(None): "null"}
    return names.get(type(value), "a value of another type")


def _name(result: Result, obj: CoreObject) -> None:
    name = obj.metadata.name
    if not name:
        result.error("metadata.name", f"a {obj.kind} needs a name", "set metadata.name")
    elif len(name) > 253 or not _DNS1123_SUBDOMAIN.match(name):
        result.error("metadata.name", f"{name!r} is not a valid {obj.kind} name (a lowercase RFC 1123 subdomain: "
                     "at most 253 characters of a-z, 0-9, '-' and '.', starting and ending alphanumeric)",
                     f"e.g. {re.sub(r'[^a-z0-9.-]+', '-', name.lower()).strip('-.') or 'my-config'!r}")


def _key(result: Result, path: str, key: Any) -> bool:
    if not isinstance(key, str) or not key or len(key) > 253 or not _KEY.match(key) or key in (".", "..") \
            or key.startswith(".."):
        result.error(path, f"invalid key {key!r}: a key is at most 253 characters of a-z, A-Z, 0-9, '-', '_' and "
                     "'.', and is not '.', '..' or starting with '..'", "rename the key (it becomes a file name "
                     "in a volume and an environment variable name with envFrom)")
        return False
    return True


def _configmap(result: Result, cm: ConfigMap) -> int:
    size = 0
    for key, value in (cm.data or {}).items():
        path = f"data[{key}]"
        if _key(result, path, key) and not isinstance(value, str):
            shown = repr(value) if isinstance(value, int | float | bool) else _kind_of(value)
            result.error(path, f"expected a string, got {_kind_of(value)} ({shown})",
                         "quote the value (ConfigMap data holds strings only)")
        size += len(str(key)) + len(str(value).encode())
    for key, value in (cm.binary_data or {}).items():
        path = f"binaryData[{key}]"
        if not _key(result, path, key):
            continue
        decoded = _base64(result, path, value)
        size += len(key) + (len(decoded) if decoded is not None else 0)
        if key in (cm.data or {}):
            result.error(path, f"key {key!r} is in both data and binaryData", "keep it in one of them")
    return size


def _base64(result: Result, path: str, value: Any) -> bytes | None:
    """Decoded bytes, or None with an error that never shows the value."""
    if not isinstance(value, str):
        result.error(path, f"expected a base64-encoded string, got {_kind_of(value)}",
                     "encode the value with `base64 -w0`, or put the plain text under stringData")
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        result.error(path, f"not valid base64 ({len(value)} characters; the value is not shown)",
                     "encode the value with `base64 -w0`, or put the plain text under stringData instead of data")
        return None


def secret_bytes(secret: Secret | dict[str, Any]) -> dict[str, bytes]:
    """A Secret's values as the API server stores them: ``data`` decoded, ``stringData`` merged over it."""
    if isinstance(secret, dict):
        data, string_data = secret.get("data") or {}, secret.get("stringData") or {}
    else:
        data, string_data = secret.data or {}, secret.string_data or {}
    out = {k: base64.b64decode(v) for k, v in data.items()}
    out.update({k: str(v).encode() for k, v in string_data.items()})
    return out


def normalized_secret(wire: dict[str, Any]) -> dict[str, Any]:
    """The Secret as the API server stores it: ``stringData`` merged into base64 ``data`` (its values win) and
    dropped, ``type`` defaulted to Opaque. ``wire`` must be valid (see ``validate_core_object``)."""
    out = {k: v for k, v in wire.items() if k != "stringData"}
    values = secret_bytes(wire)
    if values or "data" in wire:
        out["data"] = {k: base64.b64encode(v).decode() for k, v in values.items()}
    out["type"] = wire.get("type") or "Opaque"
    return out


def _secret(result: Result, secret: Secret) -> int:
    size = 0
    keys: set[str] = set()
    for key, value in (secret.data or {}).items():
        path = f"data[{key}]"
        if _key(result, path, key):
            decoded = _base64(result, path, value)
            size += len(key) + (len(decoded) if decoded is not None else 0)
            keys.add(key)
    for key, value in (secret.string_data or {}).items():
        path = f"stringData[{key}]"
        if not _key(result, path, key):
            continue
        if not isinstance(value, str):
            result.error(path, f"expected a string, got {_kind_of(value)} (the value is not shown)", "quote the value")
        size += len(key) + len(str(value).encode())
        keys.add(key)
    kind = secret.type or "Opaque"
    for key in _REQUIRED_KEYS.get(kind, ()):
        if key not in keys:
            result.error("data", f"a Secret of type {kind} needs the key {key!r}",
                         f"add data[{key}] (or stringData[{key}]), or use type: Opaque")
    return size


def _pvc(result: Result, pvc: PersistentVolumeClaim) -> None:
    spec = pvc.spec
    if not spec.access_modes:
        result.error("spec.accessModes", "at least 1 access mode is required",
                     "e.g. accessModes: [ReadWriteOnce]")
    for i, mode in enumerate(spec.access_modes or []):
        if mode not in ACCESS_MODES:
            result.error(f"spec.accessModes[{i}]", f"unsupported access mode {mode!r}",
                         f"use one of {', '.join(ACCESS_MODES)}")
    if "ReadWriteOncePod" in (spec.access_modes or []) and len(spec.access_modes or []) > 1:
        result.error("spec.accessModes", "ReadWriteOncePod may not be combined with other access modes",
                     "use accessModes: [ReadWriteOncePod] alone")
    requests = (spec.resources.requests if spec.resources else None) or {}
    if "storage" not in requests:
        result.error("spec.resources.requests.storage", "required: a claim asks for an amount of storage",
                     "e.g. resources: {requests: {storage: 10Gi}}")
    for section, values in (("requests", requests), ("limits", (spec.resources.limits if spec.resources else None)
                                                     or {})):
        for name, raw in values.items():
            path = f"spec.resources.{section}.{name}"
            if name != "storage":
                result.error(path, f"unsupported resource {name!r} for a claim", "a claim requests storage only")
                continue
            try:
                q = Quantity.parse(raw)
            except QuantityError as exc:
                result.error(path, f"invalid quantity {raw!r}: {exc}", "e.g. 10Gi, 500Mi or 1T")
                continue
            if q.value <= 0:
                result.error(path, f"must be greater than zero, got {raw!r}", "e.g. 10Gi")
    if spec.volume_mode not in (None, "Filesystem", "Block"):
        result.error("spec.volumeMode", f"unsupported volume mode {spec.volume_mode!r}",
                     "use Filesystem (the default) or Block")


def validate_core_object(obj: CoreObject, *, old: CoreObject | None = None) -> Result:
    """The API server's rules for a ConfigMap, Secret or PersistentVolumeClaim (and for an update of ``old``)."""
    result = Result()
    _name(result, obj)
    if isinstance(obj, ConfigMap | Secret):
        size = _configmap(result, obj) if isinstance(obj, ConfigMap) else _secret(result, obj)
        if size > MAX_DATA_BYTES:
            result.error("data", f"the {obj.kind} holds {size} bytes; the limit is {MAX_DATA_BYTES} (1 MiB)",
                         "keep large files in a volume (a PersistentVolumeClaim) instead")
    else:
        _pvc(result, obj)
    if old is not None and result.ok:
        _update(result, obj, old)
    return result


def _update(result: Result, obj: CoreObject, old: CoreObject) -> None:
    if isinstance(old, ConfigMap | Secret) and isinstance(obj, ConfigMap | Secret):
        if old.immutable:
            if not obj.immutable:
                result.error("immutable", "field is immutable when `immutable` is set",
                             f"delete the {obj.kind} and create it again to change it")
            elif _values(obj) != _values(old):
                result.error("data", "field is immutable when `immutable` is set",
                             f"delete the {obj.kind} and create it again to change its data")
        if isinstance(obj, Secret) and isinstance(old, Secret) and (obj.type or "Opaque") != (old.type or "Opaque"):
            result.error("type", f"field is immutable (was {old.type or 'Opaque'!r})",
                         "delete the Secret and create it again to change its type")
    elif isinstance(obj, PersistentVolumeClaim) and isinstance(old, PersistentVolumeClaim):
        _pvc_update(result, obj, old)


def _values(obj: ConfigMap | Secret) -> dict[str, bytes]:
    if isinstance(obj, Secret):
        return secret_bytes(obj)
    out = {k: base64.b64decode(v) for k, v in (obj.binary_data or {}).items()}
    out.update({k: str(v).encode() for k, v in (obj.data or {}).items()})
    return out


def _pvc_update(result: Result, new: PersistentVolumeClaim, old: PersistentVolumeClaim) -> None:
    """A bound claim's spec is immutable except for growing its storage request."""
    def user_spec(p: PersistentVolumeClaim) -> dict[str, Any]:
        spec = p.spec.model_dump(by_alias=True, exclude_none=True, mode="json")
        spec.pop("resources", None)
        spec.pop("volumeName", None)  # set by the binding
        spec.setdefault("volumeMode", "Filesystem")  # the server's default
        return spec

    if user_spec(new) != user_spec(old):
        result.error("spec", "spec is immutable after creation except resources.requests for bound claims",
                     "delete the claim and create it again (its data goes with it), or change only "
                     "resources.requests.storage")
    new_q, old_q = storage_request(new), storage_request(old)
    if new_q is not None and old_q is not None and new_q.value < old_q.value:
        result.error("spec.resources.requests.storage", f"field can not be less than the previous value "
                     f"({old_q.format()})", "a claim can only grow")


def storage_request(pvc: PersistentVolumeClaim | dict[str, Any]) -> Quantity | None:
    if isinstance(pvc, dict):
        raw = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    else:
        raw = ((pvc.spec.resources.requests if pvc.spec.resources else None) or {}).get("storage")
    try:
        return Quantity.parse(raw) if raw is not None else None
    except QuantityError:
        return None


def parse_core(wire: dict[str, Any]) -> CoreObject:
    """A stored (valid) core object as its model."""
    model = {KIND_CONFIGMAP: ConfigMap, KIND_SECRET: Secret, KIND_PVC: PersistentVolumeClaim}[wire["kind"]]
    return model.model_validate(wire)  # type: ignore[attr-defined, no-any-return]
