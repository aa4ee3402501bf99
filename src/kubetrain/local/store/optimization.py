"""OptimizationJobs in the local store: the object as applied (with the status its controller writes), the folder
its trials start in, and the pid of its controller process. The trials themselves are TrainJobs (table
``trainjobs``), found again by their label."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from kubetrain.local.store.db import AlreadyExistsError, Store, TrainJobRow

_COLUMNS = "namespace, name, uid, manifest, workdir, controller_pid, controller_start, created"


@dataclass
class OptimizationJobRow:
    namespace: str
    name: str
    uid: str
    manifest: dict[str, Any]
    workdir: str
    controller_pid: int | None
    controller_start: str | None
    created: float


def _row(r: tuple[Any, ...]) -> OptimizationJobRow:
    return OptimizationJobRow(r[0], r[1], r[2], json.loads(r[3]), r[4], r[5], r[6], r[7])


def create(store: Store, manifest: dict[str, Any], workdir: str, controller: tuple[int, str | None]) -> None:
    """Insert a new OptimizationJob owned by ``controller`` (pid, start time: the creating process, until the
    controller it starts takes over). Raises ``AlreadyExistsError`` when the name is taken."""
    meta = manifest["metadata"]
    now = time.time()
    with store.transaction() as c:
        if get(store, meta["namespace"], meta["name"]) is not None:
            raise AlreadyExistsError(f'optimizationjob "{meta["name"]}" already exists in namespace '
                                     f'"{meta["namespace"]}"')
        c.execute(
            f"INSERT INTO optimizationjobs ({_COLUMNS}, updated) VALUES (?,?,?,?,?,?,?,?,?)",
            (meta["namespace"], meta["name"], meta["uid"], json.dumps(manifest), workdir, *controller, now, now),
        )


def get(store: Store, namespace: str, name: str) -> OptimizationJobRow | None:
    rows = store.read(f"SELECT {_COLUMNS} FROM optimizationjobs WHERE namespace=? AND name=?", (namespace, name))
    return _row(rows[0]) if rows else None


def list_all(store: Store, namespace: str | None) -> list[OptimizationJobRow]:
    if namespace is None:
        rows = store.read(f"SELECT {_COLUMNS} FROM optimizationjobs ORDER BY created")
    else:
        rows = store.read(f"SELECT {_COLUMNS} FROM optimizationjobs WHERE namespace=? ORDER BY created", (namespace,))
    return [_row(r) for r in rows]


def set_status(store: Store, namespace: str, name: str, uid: str, status: dict[str, Any]) -> bool:
    """Replace only ``status`` of that incarnation; False when it was deleted or replaced meanwhile."""
    with store.transaction() as c:
        row = get(store, namespace, name)
        if row is None or row.uid != uid:
            return False
        row.manifest["status"] = status
        c.execute("UPDATE optimizationjobs SET manifest=?, updated=? WHERE namespace=? AND name=?",
                  (json.dumps(row.manifest), time.time(), namespace, name))
        return True


def set_metadata(store: Store, namespace: str, name: str, metadata: dict[str, Any]) -> None:
    """``apply`` of an unchanged spec may change labels and annotations (the spec is immutable)."""
    with store.transaction() as c:
        row = get(store, namespace, name)
        if row is None:
            return
        row.manifest["metadata"] = metadata
        c.execute("UPDATE optimizationjobs SET manifest=?, updated=? WHERE namespace=? AND name=?",
                  (json.dumps(row.manifest), time.time(), namespace, name))


def set_controller(store: Store, namespace: str, name: str, pid: int | None, start: str | None) -> None:
    with store.transaction() as c:
        c.execute("UPDATE optimizationjobs SET controller_pid=?, controller_start=? WHERE namespace=? AND name=?",
                  (pid, start, namespace, name))


def delete(store: Store, namespace: str, name: str, uid: str | None = None) -> bool:
    with store.transaction() as c:
        row = get(store, namespace, name)
        if row is None or (uid is not None and row.uid != uid):
            return False
        c.execute("DELETE FROM optimizationjobs WHERE namespace=? AND name=?", (namespace, name))
        return True


def trials(store: Store, namespace: str, uid: str) -> list[TrainJobRow]:
    """The TrainJobs an OptimizationJob (``uid``) owns, without their compiled objects (the controller reads them
    twenty times a second; the compiled JobSets are most of a row)."""
    found = store.read(
        "SELECT namespace, name, uid, trainjob, workdir, supervisor_pid, supervisor_start, restarts, created"
        " FROM trainjobs WHERE namespace=? AND instr(trainjob, ?) > 0 ORDER BY created", (namespace, uid))
    out = []
    for r in found:
        tj = json.loads(r[3])
        refs = (tj.get("metadata") or {}).get("ownerReferences") or []
        if any(ref.get("uid") == uid and ref.get("kind") == "OptimizationJob" for ref in refs):
            out.append(TrainJobRow(r[0], r[1], r[2], tj, [], r[4], r[5], r[6], r[7], r[8]))
    return out
