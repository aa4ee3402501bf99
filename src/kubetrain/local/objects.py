"""ConfigMaps, Secrets and PersistentVolumeClaims on this machine: apply, read and delete them as the API server
would, for the pods that reference them.

- Applied objects get what the API server gives them: a uid and a creation time; a Secret's ``stringData`` is
  merged into base64 ``data``; immutability (``immutable: true``, a claim's spec) is enforced on updates.
- A claim is bound at once to its own directory, ``$KUBETRAIN_HOME/claims/<namespace>/<name>-<uid>``
  (``spec.volumeName`` is ``pvc-<uid>``), which every TrainJob naming the claim mounts: data outlives TrainJobs.
- Deleting a claim that a TrainJob still uses is deferred, as Kubernetes' ``pvc-protection`` finalizer defers it:
  the claim is ``Terminating`` (new TrainJobs naming it are refused) until no unfinished TrainJob uses it; then it
  and its directory go (the reclaim policy ``Delete`` of a default StorageClass). Every reader finalizes.
"""

from __future__ import annotations

import copy
import shutil
import uuid
from typing import TYPE_CHECKING, Any

from kubetrain.api.errors import InvalidObjectError, KubetrainError
from kubetrain.local import paths
from kubetrain.local.store import reaper, status
from kubetrain.local.store.db import Store, TrainJobRow
from kubetrain.local.store.status import now_rfc3339

if TYPE_CHECKING:
    from kubetrain.api.core import CoreObject
    from kubetrain.api.quantity import Quantity

# The models (pydantic) are imported only by the verbs that change objects: `get` and the supervisor do without.
KIND_CONFIGMAP, KIND_SECRET, KIND_PVC = "ConfigMap", "Secret", "PersistentVolumeClaim"
CORE_KINDS = (KIND_CONFIGMAP, KIND_SECRET, KIND_PVC)
PVC_PROTECTION = "kubernetes.io/pvc-protection"


class NotFoundError(KubetrainError):
    pass


def volume_name(uid: str) -> str:
    return f"pvc-{uid}"


def plural(kind: str) -> str:
    return {KIND_CONFIGMAP: "configmaps", KIND_SECRET: "secrets", KIND_PVC: "persistentvolumeclaims"}[kind]


def _parse(manifest: dict[str, Any]) -> CoreObject:
    from kubetrain.api.loader import parse_manifest

    obj, parsed = parse_manifest(manifest)
    if parsed.errors or obj is None:
        raise InvalidObjectError(parsed.errors)
    assert obj.kind in CORE_KINDS
    return obj  # type: ignore[return-value]


def apply(store: Store, manifest: dict[str, Any], namespace: str) -> str:
    """Create or update one object; ``created``, ``configured`` or ``unchanged`` like kubectl. Invalid input and
    forbidden updates raise ``InvalidObjectError`` (field paths, no Secret value) and change nothing."""
    from kubetrain.api.core import normalized_secret, parse_core, validate_core_object

    wire = copy.deepcopy(manifest)
    meta = wire.setdefault("metadata", {})
    meta["namespace"] = meta.get("namespace") or namespace
    obj = _parse(wire)
    kind, ns, name = obj.kind, meta["namespace"], meta.get("name", "")
    if kind == KIND_PVC:
        finalize_claims(store)  # a claim whose last user has finished is gone: this creates it anew
    with store.transaction():
        old_text = store.runtime_manifest(kind, ns, name)
        old = None if old_text is None else _loads(old_text)
        result = validate_core_object(obj, old=parse_core(old) if old is not None else None)
        if not result.ok:
            raise InvalidObjectError(result.errors)
        new = obj.model_dump(by_alias=True, exclude_none=True, mode="json")
        new["metadata"]["namespace"] = ns
        if kind == KIND_SECRET:
            new = normalized_secret(new)
        if old is not None:
            if (old.get("metadata") or {}).get("deletionTimestamp"):
                users = ", ".join(claim_users(store, ns, name)) or "none"
                raise KubetrainError(
                    f'persistentvolumeclaim "{name}" is being deleted (waiting for TrainJobs that use it: {users}); '
                    "apply it again once it is gone (`kubetrain get pvc` no longer lists it)"
                )
            for key in ("uid", "creationTimestamp"):
                new["metadata"][key] = old["metadata"][key]
        else:
            new["metadata"]["uid"] = str(uuid.uuid4())
            new["metadata"]["creationTimestamp"] = now_rfc3339()
        for key in ("resourceVersion", "generation", "deletionTimestamp", "finalizers"):
            new["metadata"].pop(key, None)  # the server's to set
        if kind == KIND_PVC:
            spec = new.setdefault("spec", {})
            spec["volumeName"] = volume_name(new["metadata"]["uid"])
            spec.setdefault("volumeMode", "Filesystem")
            new.pop("status", None)
            new["metadata"]["finalizers"] = [PVC_PROTECTION]
            # Bound at once (a default StorageClass's Immediate binding): the directory exists from now on.
            root = paths.claim_dir(ns, name, new["metadata"]["uid"])
            root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            root.mkdir(exist_ok=True)
        return store.put_object(new)


def _loads(text: str) -> dict[str, Any]:
    import json

    out: dict[str, Any] = json.loads(text)
    return out


def _view(store: Store, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as a reader sees it: a claim with its status (bound to its directory, or Terminating)."""
    if obj["kind"] != KIND_PVC:
        return obj
    out = copy.deepcopy(obj)
    q = _storage(out)
    out["status"] = {
        "phase": "Bound",
        "accessModes": list((out.get("spec") or {}).get("accessModes") or []),
        "capacity": {"storage": q.format() if q is not None else ""},
    }
    return out


def _storage(pvc: dict[str, Any]) -> Quantity | None:
    from kubetrain.api.quantity import Quantity, QuantityError

    raw = (((pvc.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    try:
        return Quantity.parse(raw) if raw is not None else None
    except QuantityError:
        return None


def list_objects(
    store: Store, kind: str, namespace: str | None, selector: str | None = None
) -> list[dict[str, Any]]:
    """Applied objects of ``kind`` (``namespace=None``: all namespaces), oldest first."""
    if kind == KIND_PVC:
        finalize_claims(store)
    from kubetrain.api.selectors import parse as parse_selector

    sel = parse_selector(selector) if selector else None
    out = []
    for o in store.list_objects((kind,)):
        meta = o.get("metadata") or {}
        if namespace is not None and meta.get("namespace", "default") != namespace:
            continue
        if sel is not None and not sel.matches(meta.get("labels")):
            continue
        out.append(_view(store, o))
    out.sort(key=lambda o: (o["metadata"].get("creationTimestamp") or "", o["metadata"].get("name", "")))
    return out


def get(store: Store, kind: str, name: str, namespace: str) -> dict[str, Any]:
    if kind == KIND_PVC:
        finalize_claims(store)
    text = store.runtime_manifest(kind, namespace, name)
    if text is None:
        known = [o["metadata"]["name"] for o in list_objects(store, kind, namespace)]
        from kubetrain.api.suggest import not_found_hint

        hint = not_found_hint(name, known, f"`kubetrain get {plural(kind)} -n {namespace}` lists them")
        raise NotFoundError(f'{plural(kind)} "{name}" not found in namespace "{namespace}"{hint}')
    return _view(store, _loads(text))


def delete(store: Store, kind: str, name: str, namespace: str) -> str:
    """Remove the object; a claim still used by an unfinished TrainJob is only marked for deletion. Returns what
    kubectl prints, plus why a claim stays."""
    what = f'{kind.lower()} "{name}" deleted'
    with store.transaction():
        obj = get(store, kind, name, namespace)
        if kind == KIND_PVC:
            users = claim_users(store, namespace, name)
            if users:
                if not obj["metadata"].get("deletionTimestamp"):
                    stored = _loads(store.runtime_manifest(kind, namespace, name) or "{}")
                    stored["metadata"]["deletionTimestamp"] = now_rfc3339()
                    store.put_object(stored)
                return (f"{what} (Terminating: in use by trainjob {', '.join(users)}; it and its data go when "
                        "that finishes or is deleted, as pvc-protection defers it)")
        store.delete_object(kind, namespace, name)
    if kind == KIND_PVC:
        shutil.rmtree(paths.claim_dir(namespace, name, obj["metadata"]["uid"]), ignore_errors=True)
        return f"{what} (its data at {paths.claim_dir(namespace, name, obj['metadata']['uid'])} was removed)"
    return what


def claim_names(objects: list[dict[str, Any]]) -> set[str]:
    """Claims the pods of a TrainJob's compiled objects mount."""
    names: set[str] = set()
    for o in objects:
        if o.get("kind") != "JobSet":
            continue
        for rj in (o.get("spec") or {}).get("replicatedJobs") or []:
            pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            for v in pod.get("volumes") or []:
                claim = (v.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:
                    names.add(str(claim))
    return names


def claim_users(store: Store, namespace: str, name: str) -> list[str]:
    """Unfinished TrainJobs of the namespace whose pods mount the claim (a lost supervisor is recorded first)."""
    rows: list[TrainJobRow] = store.list_trainjobs(namespace)
    if store.read_only is None:
        rows = reaper.check_all(store, rows)
    return [
        r.name for r in rows
        if not status.finished(r.trainjob.get("status") or {}) and name in claim_names(r.objects)
    ]


def finalize_claims(store: Store) -> None:
    """Remove claims marked for deletion that no unfinished TrainJob uses any more (and their data)."""
    if store.read_only is not None:
        return
    for o in store.list_objects((KIND_PVC,)):
        meta = o.get("metadata") or {}
        if not meta.get("deletionTimestamp"):
            continue
        ns, name = meta.get("namespace", "default"), meta.get("name", "")
        with store.transaction():
            if claim_users(store, ns, name):
                continue
            store.delete_object(KIND_PVC, ns, name)
        shutil.rmtree(paths.claim_dir(ns, name, meta.get("uid", "")), ignore_errors=True)


def check_claims(store: Store, namespace: str, objects: list[dict[str, Any]]) -> None:
    """Refuse a TrainJob that mounts a claim being deleted (the scheduler would never place its pods)."""
    for name in sorted(claim_names(objects)):
        text = store.runtime_manifest(KIND_PVC, namespace, name)
        if text is not None and (_loads(text).get("metadata") or {}).get("deletionTimestamp"):
            raise KubetrainError(
                f'persistentvolumeclaim "{name}" is being deleted; its pods could never start. Fix: wait until '
                "it is gone and apply it again, or use another claim"
            )
