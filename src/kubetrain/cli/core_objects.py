"""``get``, ``describe`` and ``delete`` of ConfigMaps, Secrets and PersistentVolumeClaims, and ``get`` of the
TrainJobs' Pods and Events, with kubectl's columns.

A Secret's values are never shown in a table or by ``describe`` (only their sizes, as kubectl does); ``-o yaml``
and ``-o json`` show the object as stored, base64 ``data`` included, as kubectl does.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import click

from kubetrain.api.views import Backend
from kubetrain.cli.listing import Query, fetch_named, print_common, select
from kubetrain.cli.output import (
    dump_objects,
    plain_table,
)
from kubetrain.service.present import age

# kubectl's names for each kind (plural, singular, short).
CORE_KINDS: dict[str, str] = {
    "configmaps": "ConfigMap",
    "configmap": "ConfigMap",
    "cm": "ConfigMap",
    "secrets": "Secret",
    "secret": "Secret",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "persistentvolumeclaim": "PersistentVolumeClaim",
    "pvc": "PersistentVolumeClaim",
}
# Read only (``get``): the pods and events of the TrainJobs.
READ_KINDS: dict[str, str] = {
    "pods": "Pod",
    "pod": "Pod",
    "po": "Pod",
    "events": "Event",
    "event": "Event",
    "ev": "Event",
}
PLURALS = {
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "Pod": "pods",
    "Event": "events",
}
_SHORT_MODES = {"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}


def _meta(o: dict[str, Any]) -> dict[str, Any]:
    return o.get("metadata") or {}


def _count(o: dict[str, Any]) -> int:
    return len(o.get("data") or {}) + len(o.get("binaryData") or {})


def _status(o: dict[str, Any]) -> str:
    if _meta(o).get("deletionTimestamp"):
        return "Terminating"
    return str((o.get("status") or {}).get("phase") or "Pending")


def headers(kind: str, all_ns: bool, wide: bool = False) -> list[str]:
    cols = {
        "ConfigMap": ["NAME", "DATA", "AGE"],
        "Secret": ["NAME", "TYPE", "DATA", "AGE"],
        "PersistentVolumeClaim": ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "AGE"],
        "Pod": ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
        "Event": ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"],
    }[kind]
    if wide and kind == "Pod":
        cols = [*cols, "IP", "NODE", "NOMINATED NODE", "READINESS GATES"]
    elif wide and kind == "Event":
        cols = ["LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT",
                "NAME"]
    return (["NAMESPACE"] if all_ns else []) + cols


def pod_status(o: dict[str, Any]) -> str:
    """kubectl's STATUS of a pod: the reason its last container waits or ended (``CrashLoopBackOff``,
    ``Completed``, ``Error``), ``Terminating`` while it is deleted, else its phase."""
    st = o.get("status") or {}
    reason = str(st.get("reason") or st.get("phase") or "Unknown")
    running = False
    for cs in reversed(st.get("containerStatuses") or []):
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting") or {}, state.get("terminated")
        if waiting.get("reason"):
            reason = str(waiting["reason"])
        elif terminated is not None and terminated.get("reason"):
            reason = str(terminated["reason"])
        elif terminated is not None:
            signal = terminated.get("signal")
            reason = f"Signal:{signal}" if signal else f"ExitCode:{terminated.get('exitCode', 0)}"
        elif cs.get("ready") and "running" in state:
            running = True
    if reason == "Completed" and running:
        reason = "Running"
    if _meta(o).get("deletionTimestamp"):
        reason = "Terminating"
    return reason


def _pod_cells(o: dict[str, Any], wide: bool) -> list[str]:
    spec, st = o.get("spec") or {}, o.get("status") or {}
    statuses = st.get("containerStatuses") or []
    ready = sum(1 for cs in statuses if cs.get("ready"))
    restarts = sum(int(cs.get("restartCount") or 0) for cs in statuses)
    cells = [f"{ready}/{len(spec.get('containers') or [])}", pod_status(o), str(restarts)]
    cells.append(age(_meta(o).get("creationTimestamp")))
    if wide:
        gates = spec.get("readinessGates") or []
        cells += [
            str(st.get("podIP") or "<none>"),
            str(spec.get("nodeName") or "<none>"),
            str(st.get("nominatedNodeName") or "<none>"),
            f"0/{len(gates)}" if gates else "<none>",
        ]
    return cells


def _event_cells(o: dict[str, Any], wide: bool) -> list[str]:
    inv = o.get("involvedObject") or {}
    last = o.get("lastTimestamp") or o.get("eventTime") or (o.get("series") or {}).get("lastObservedTime")
    first = o.get("firstTimestamp") or o.get("eventTime")
    count = int(o.get("count") or (o.get("series") or {}).get("count") or 1)
    seen = age(last)
    if count > 1:
        seen = f"{seen} (x{count} over {age(first)})"
    obj = f"{str(inv.get('kind') or '').lower()}/{inv.get('name', '')}"
    message = str(o.get("message") or "").strip()
    if not wide:
        return [seen, str(o.get("type") or ""), str(o.get("reason") or ""), obj, message]
    source = (o.get("source") or {}).get("component") or o.get("reportingComponent") or ""
    host = (o.get("source") or {}).get("host")
    return [
        seen,
        str(o.get("type") or ""),
        str(o.get("reason") or ""),
        obj,
        str(inv.get("fieldPath") or ""),
        f"{source}, {host}" if host else str(source),
        message,
        age(first),
        str(count),
        str(_meta(o).get("name") or ""),
    ]


def row(kind: str, o: dict[str, Any], all_ns: bool, wide: bool = False) -> list[str]:
    meta = _meta(o)
    out = [meta.get("namespace", "default")] if all_ns else []
    if kind == "Event":
        return out + _event_cells(o, wide)
    out.append(meta.get("name", ""))
    if kind == "Pod":
        out += _pod_cells(o, wide)
        return out
    if kind == "ConfigMap":
        out.append(str(_count(o)))
    elif kind == "Secret":
        out += [str(o.get("type") or "Opaque"), str(_count(o))]
    else:
        spec, st = o.get("spec") or {}, o.get("status") or {}
        modes = st.get("accessModes") or spec.get("accessModes") or []
        out += [
            _status(o),
            str(spec.get("volumeName") or ""),
            str((st.get("capacity") or {}).get("storage") or ""),
            ",".join(_SHORT_MODES.get(m, m) for m in modes),
            str(spec.get("storageClassName") or "<unset>"),
        ]
    out.append(age(meta.get("creationTimestamp")))
    return out


def get_core(backend: Backend, kind: str, q: Query) -> int:
    names, namespace, all_ns = q.names, q.namespace, q.all_namespaces
    if names:
        objs, rc = fetch_named(names, lambda name: backend.get_core(kind, name, namespace))
    else:
        objs, rc = backend.list_core(kind, q.scope, q.selector, q.field_selector), 0
    listing = select(objs, lambda o: o, sort_by=q.sort_by, rc=rc)
    objs = listing.items
    if print_common(listing, q, name_of=lambda o: f"{kind.lower()}/{_meta(o).get('name')}"):
        pass
    elif objs:
        wide = q.fmt.kind == "wide"
        rows = [row(kind, o, all_ns, wide) for o in objs]
        click.echo(plain_table(headers(kind, all_ns, wide), rows, no_headers=q.no_headers), nl=False)
    elif not names:
        where = "any namespace" if all_ns else f"namespace {namespace}"
        click.echo(f"No resources found in {where}.", err=True)
    return rc


def _sizes(o: dict[str, Any]) -> list[tuple[str, int]]:
    out = []
    for key, value in sorted((o.get("data") or {}).items()):
        try:
            size = len(base64.b64decode(value)) if o["kind"] == "Secret" else len(str(value).encode())
        except (binascii.Error, ValueError):
            size = len(str(value))
        out.append((key, size))
    return out


def describe_text(o: dict[str, Any], users: list[str], local_path: str | None = None) -> str:
    """kubectl's ``describe`` layout; a Secret shows each key's size, never its value."""
    meta, kind = _meta(o), o["kind"]
    labels = ",".join(f"{k}={v}" for k, v in (meta.get("labels") or {}).items()) or "<none>"
    annotations = ",".join(f"{k}={v}" for k, v in (meta.get("annotations") or {}).items()) or "<none>"
    lines = [
        f"Name:         {meta.get('name', '')}",
        f"Namespace:    {meta.get('namespace', 'default')}",
        f"Labels:       {labels}",
        f"Annotations:  {annotations}",
    ]
    if kind == "Secret":
        lines += ["", f"Type:  {o.get('type') or 'Opaque'}", "", "Data", "===="]
        lines += [f"{k}:  {n} bytes" for k, n in _sizes(o)]
    elif kind == "ConfigMap":
        lines += ["", "Data", "===="]
        for key, value in sorted((o.get("data") or {}).items()):
            lines += [f"{key}:", "----", str(value), ""]
        binary = sorted((o.get("binaryData") or {}).items())
        lines += ["", "BinaryData", "===="]
        lines += [f"{k}: {len(base64.b64decode(v))} bytes" for k, v in binary]
    else:
        spec, st = o.get("spec") or {}, o.get("status") or {}
        lines += [
            f"StorageClass:  {spec.get('storageClassName') or ''}",
            f"Status:        {_status(o)}",
            f"Volume:        {spec.get('volumeName') or ''}",
            f"Finalizers:    [{', '.join(meta.get('finalizers') or [])}]",
            f"Capacity:      {(st.get('capacity') or {}).get('storage') or ''}",
            f"Access Modes:  {','.join(_SHORT_MODES.get(m, m) for m in st.get('accessModes') or [])}",
            f"VolumeMode:    {spec.get('volumeMode') or 'Filesystem'}",
        ]
        if local_path:
            lines.append(f"Local path:    {local_path}")
    if kind == "PersistentVolumeClaim" or users:
        lines.append(f"Used By:      {', '.join(f'trainjob/{u}' for u in users) or '<none>'}")
    return "\n".join(lines) + "\n"


def describe_core(backend: Backend, kind: str, name: str, namespace: str, output: str) -> None:
    o = backend.get_core(kind, name, namespace)
    users = backend.core_users(kind, name, namespace)
    if output == "text":
        claim_path = getattr(backend, "claim_path", None)  # the local backend's directory of a claim
        path = claim_path(o) if claim_path is not None and kind == "PersistentVolumeClaim" else None
        click.echo(describe_text(o, users, path), nl=False)
    else:
        if kind == "Secret":  # describe never shows a Secret's values, in any format
            o = {**o, "data": {k: f"<{n} bytes>" for k, n in _sizes(o)}}
        dump_objects([{**o, "usedBy": users}], output)
