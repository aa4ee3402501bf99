"""SQLite state of the local backend: TrainJobs, applied runtimes, pods and events.

Every write commits immediately so a supervisor killed at any point leaves a consistent record that the next
command can reconcile (see ``kubetrain.local.reaper``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubetrain.local import paths

_SCHEMA = """
CREATE TABLE IF NOT EXISTS trainjobs (
  namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL,
  trainjob TEXT NOT NULL, objects TEXT NOT NULL, workdir TEXT NOT NULL,
  supervisor_pid INTEGER, supervisor_start TEXT, restarts INTEGER NOT NULL DEFAULT 0,
  created REAL NOT NULL, updated REAL NOT NULL,
  PRIMARY KEY (namespace, name)
);
CREATE TABLE IF NOT EXISTS pods (
  namespace TEXT NOT NULL, trainjob TEXT NOT NULL, name TEXT NOT NULL, rjob TEXT NOT NULL,
  state TEXT NOT NULL, pid INTEGER, pid_start TEXT, exit_code INTEGER, restarts INTEGER NOT NULL DEFAULT 0,
  message TEXT, log TEXT NOT NULL, updated REAL NOT NULL,
  PRIMARY KEY (namespace, trainjob, name)
);
CREATE TABLE IF NOT EXISTS runtimes (
  kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, manifest TEXT NOT NULL,
  PRIMARY KEY (kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, trainjob TEXT NOT NULL,
  time TEXT NOT NULL, type TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL
);
"""


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class TrainJobRow:
    namespace: str
    name: str
    uid: str
    trainjob: dict[str, Any]
    objects: list[dict[str, Any]]
    workdir: str
    supervisor_pid: int | None
    supervisor_start: str | None
    restarts: int
    created: float


@dataclass
class PodRow:
    namespace: str
    trainjob: str
    name: str
    rjob: str
    state: str
    pid: int | None
    pid_start: str | None
    exit_code: int | None
    restarts: int
    message: str | None
    log: str


@dataclass
class EventRow:
    time: str
    type: str
    reason: str
    message: str


class Store:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.db_path()
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA busy_timeout=30000")
        # WAL + NORMAL: no fsync per commit (the supervisor commits on every pod transition); still crash-safe.
        self._conn.execute("PRAGMA synchronous=NORMAL")
        # Switching to WAL takes an exclusive lock that ignores the busy timeout; concurrent first opens retry.
        for attempt in range(200):
            try:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.executescript(_SCHEMA)
                break
            except sqlite3.OperationalError:
                if attempt == 199:
                    raise
                time.sleep(0.05)

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE so concurrent supervisors serialise their read-modify-write of the same rows.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # TrainJobs.
    def put_trainjob(self, trainjob: dict[str, Any], objects: list[dict[str, Any]], workdir: str) -> None:
        meta = trainjob["metadata"]
        t = time.time()
        with self._tx() as c:
            c.execute("DELETE FROM pods WHERE namespace=? AND trainjob=?", (meta["namespace"], meta["name"]))
            c.execute(
                "DELETE FROM events WHERE namespace=? AND trainjob=?", (meta["namespace"], meta["name"])
            )
            c.execute(
                "INSERT OR REPLACE INTO trainjobs (namespace, name, uid, trainjob, objects, workdir, created, updated)"
                " VALUES (?,?,?,?,?,?,?,?)",
                (
                    meta["namespace"],
                    meta["name"],
                    meta["uid"],
                    json.dumps(trainjob),
                    json.dumps(objects),
                    workdir,
                    t,
                    t,
                ),
            )

    def update_trainjob(self, namespace: str, name: str, trainjob: dict[str, Any]) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE trainjobs SET trainjob=?, updated=? WHERE namespace=? AND name=?",
                (json.dumps(trainjob), time.time(), namespace, name),
            )

    def set_supervisor(self, namespace: str, name: str, pid: int | None, start: str | None) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE trainjobs SET supervisor_pid=?, supervisor_start=? WHERE namespace=? AND name=?",
                (pid, start, namespace, name),
            )

    def set_restarts(self, namespace: str, name: str, restarts: int) -> None:
        with self._tx() as c:
            c.execute(
                "UPDATE trainjobs SET restarts=? WHERE namespace=? AND name=?", (restarts, namespace, name)
            )

    def get_trainjob(self, namespace: str, name: str) -> TrainJobRow | None:
        row = self._conn.execute(
            "SELECT namespace, name, uid, trainjob, objects, workdir, supervisor_pid, supervisor_start, restarts,"
            " created FROM trainjobs WHERE namespace=? AND name=?",
            (namespace, name),
        ).fetchone()
        return _tj_row(row) if row else None

    def list_trainjobs(self, namespace: str | None) -> list[TrainJobRow]:
        q = (
            "SELECT namespace, name, uid, trainjob, objects, workdir, supervisor_pid, supervisor_start, restarts,"
            " created FROM trainjobs"
        )
        args: tuple[Any, ...] = ()
        if namespace is not None:
            q += " WHERE namespace=?"
            args = (namespace,)
        return [_tj_row(r) for r in self._conn.execute(q + " ORDER BY created", args).fetchall()]

    def delete_trainjob(self, namespace: str, name: str) -> None:
        with self._tx() as c:
            for table, col in (("pods", "trainjob"), ("events", "trainjob"), ("trainjobs", "name")):
                c.execute(f"DELETE FROM {table} WHERE namespace=? AND {col}=?", (namespace, name))

    # Pods.
    def put_pod(self, pod: PodRow) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO pods (namespace, trainjob, name, rjob, state, pid, pid_start, exit_code,"
                " restarts, message, log, updated) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    pod.namespace,
                    pod.trainjob,
                    pod.name,
                    pod.rjob,
                    pod.state,
                    pod.pid,
                    pod.pid_start,
                    pod.exit_code,
                    pod.restarts,
                    pod.message,
                    pod.log,
                    time.time(),
                ),
            )

    def list_pods(self, namespace: str, trainjob: str) -> list[PodRow]:
        rows = self._conn.execute(
            "SELECT namespace, trainjob, name, rjob, state, pid, pid_start, exit_code, restarts, message, log"
            " FROM pods WHERE namespace=? AND trainjob=? ORDER BY rowid",
            (namespace, trainjob),
        ).fetchall()
        return [PodRow(*r) for r in rows]

    # Events.
    def add_event(self, namespace: str, trainjob: str, type_: str, reason: str, message: str) -> None:
        with self._tx() as c:
            c.execute(
                "INSERT INTO events (namespace, trainjob, time, type, reason, message) VALUES (?,?,?,?,?,?)",
                (namespace, trainjob, now_rfc3339(), type_, reason, message),
            )

    def list_events(self, namespace: str, trainjob: str) -> list[EventRow]:
        rows = self._conn.execute(
            "SELECT time, type, reason, message FROM events WHERE namespace=? AND trainjob=? ORDER BY id",
            (namespace, trainjob),
        ).fetchall()
        return [EventRow(*r) for r in rows]

    # Runtimes.
    def put_runtime(self, manifest: dict[str, Any]) -> None:
        meta = manifest.get("metadata") or {}
        ns = "" if manifest["kind"] == "ClusterTrainingRuntime" else meta.get("namespace") or "default"
        with self._tx() as c:
            c.execute(
                "INSERT OR REPLACE INTO runtimes (kind, namespace, name, manifest) VALUES (?,?,?,?)",
                (manifest["kind"], ns, meta.get("name", ""), json.dumps(manifest)),
            )

    def delete_object(self, kind: str, namespace: str, name: str) -> bool:
        """Remove an applied runtime (or ConfigMap/Secret); ``False`` when there was none."""
        with self._tx() as c:
            cur = c.execute(
                "DELETE FROM runtimes WHERE kind=? AND namespace=? AND name=?", (kind, namespace, name)
            )
            return bool(cur.rowcount)

    def list_objects(self, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        """Applied objects (runtimes, and the ConfigMaps/Secrets pods may reference) of the given kinds."""
        marks = ",".join("?" * len(kinds))
        rows = self._conn.execute(f"SELECT manifest FROM runtimes WHERE kind IN ({marks})", kinds).fetchall()
        return [json.loads(r[0]) for r in rows]


def _tj_row(r: tuple[Any, ...]) -> TrainJobRow:
    return TrainJobRow(
        namespace=r[0],
        name=r[1],
        uid=r[2],
        trainjob=json.loads(r[3]),
        objects=json.loads(r[4]),
        workdir=r[5],
        supervisor_pid=r[6],
        supervisor_start=r[7],
        restarts=r[8],
        created=r[9],
    )
