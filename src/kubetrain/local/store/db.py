"""SQLite state of the local backend: TrainJobs, applied runtimes, pods, events and the scheduler's books.

It is the one module that owns the schema and its SQL (the scheduler adds its decision queries inside
``Store.transaction``), which is why it is longer than most.

Shared by every ``kubetrain`` process of the user at once (CLI commands, detached supervisors), so:

- WAL journal and a busy timeout: readers never block writers, writers wait for each other instead of failing
  with "database is locked";
- every read-modify-write runs in one ``BEGIN IMMEDIATE`` transaction (``Store.transaction``), so two processes
  can never both act on the same stale read (two supervisors admitting pods into the same free CPU, two readers
  recording the same lost supervisor);
- a TrainJob is created together with the pid of the process responsible for it, in one statement, so there is
  never a moment where it exists without a live owner;
- SQLite errors become ``StoreError`` with what happened and the fix (disk full, unwritable home), and a failed
  transaction is rolled back: the state stays as it was.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local import paths
from kubetrain.local.store.status import finished, now_rfc3339

SCHEMA_VERSION = 5

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
  message TEXT, log TEXT NOT NULL, updated REAL NOT NULL, ready INTEGER NOT NULL DEFAULT 0, created REAL,
  PRIMARY KEY (namespace, trainjob, name)
);
CREATE TABLE IF NOT EXISTS optimizationjobs (
  namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL, manifest TEXT NOT NULL, workdir TEXT NOT NULL,
  controller_pid INTEGER, controller_start TEXT, created REAL NOT NULL, updated REAL NOT NULL,
  PRIMARY KEY (namespace, name)
);
CREATE TABLE IF NOT EXISTS runtimes (
  kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, manifest TEXT NOT NULL,
  PRIMARY KEY (kind, namespace, name)
);
CREATE TABLE IF NOT EXISTS events (
  id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, trainjob TEXT NOT NULL,
  time TEXT NOT NULL, type TEXT NOT NULL, reason TEXT NOT NULL, message TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS progress (
  id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, trainjob TEXT NOT NULL, uid TEXT NOT NULL,
  time REAL NOT NULL, source TEXT NOT NULL, report TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS progress_job ON progress (namespace, trainjob, id);
CREATE TABLE IF NOT EXISTS sched_queue (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, trainjob TEXT NOT NULL, uid TEXT NOT NULL,
  request TEXT NOT NULL, requests TEXT NOT NULL, created REAL NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS sched_queue_key ON sched_queue (namespace, trainjob, uid, request);
CREATE TABLE IF NOT EXISTS sched_allocations (
  namespace TEXT NOT NULL, trainjob TEXT NOT NULL, uid TEXT NOT NULL, pod TEXT NOT NULL,
  resources TEXT NOT NULL, devices TEXT NOT NULL,
  PRIMARY KEY (namespace, trainjob, uid, pod)
);
"""

_TJ_COLUMNS = (
    "namespace, name, uid, trainjob, objects, workdir, supervisor_pid, supervisor_start, restarts, created"
)


class StoreError(KubetrainError):
    pass


class AlreadyExistsError(StoreError):
    pass


def disk_full(path: Path) -> bool:
    try:
        st = os.statvfs(path if path.is_dir() else path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < 256 * 1024


def explain(exc: BaseException, path: Path) -> str:
    """What a storage failure means for the user, and the fix; the state is unchanged when this is raised."""
    text = str(exc)
    low = text.lower()
    # SQLite reports a full disk as "database or disk is full", or as "disk I/O error" when it could not even
    # create its shared-memory file: ask the file system.
    if "disk is full" in low or getattr(exc, "errno", None) == errno.ENOSPC or disk_full(path):
        return (
            f"no space left on the disk holding kubetrain's state ({path.parent}): {text}. Nothing was changed. "
            "Fix: free disk space (`kubetrain prune` removes finished TrainJobs and their logs) or set "
            "KUBETRAIN_HOME to a directory on another disk"
        )
    if (
        "readonly" in low
        or "unable to open" in low
        or getattr(exc, "errno", None) in (errno.EACCES, errno.EPERM, errno.EROFS)
    ):
        return (
            f"kubetrain's state {path} cannot be written by this user: {text}. Fix: make {path.parent} "
            "writable for you (e.g. it was created by `sudo kubetrain`: `sudo chown -R $USER "
            f"{path.parent}`), or set KUBETRAIN_HOME to a directory you own"
        )
    if "malformed" in low or "not a database" in low:
        return (
            f"kubetrain's state {path} is damaged ({text}). Fix: move it away (TrainJob logs under "
            f"{path.parent / 'trainjobs'} stay readable as files) and run the command again"
        )
    return f"kubetrain's state {path}: {text}"


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
    ready: bool = False
    """Every container passed its readiness probe (or has none): kubectl's READY."""
    created: float | None = None
    """When the pod was first recorded (seconds since the epoch): its creationTimestamp."""


@dataclass
class ProgressRow:
    time: float
    source: str  # report | logs
    report: dict[str, Any]  # a trainerStatus


MAX_PROGRESS = 10_000
"""History rows kept per TrainJob (thinned, not cut: see ``Store.add_progress``)."""


@dataclass
class EventRow:
    time: str
    type: str
    reason: str
    message: str


class Store:
    """One connection; safe to share between threads of a process (``kubetrain run`` draws progress on one
    thread while its supervisor writes on another), serialised by a lock."""

    _open: weakref.WeakSet[Store] = weakref.WeakSet()

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.db_path()
        self._lock = threading.RLock()
        self._depth = 0
        self.read_only: str | None = None  # why writes are refused, when the store could only be opened to read
        try:
            self._conn = sqlite3.connect(
                self.path, timeout=60, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA busy_timeout=60000")
            # WAL + NORMAL: no fsync per commit (the supervisor commits on every pod transition); still crash-safe.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._migrate()
            _private(self.path)
        except sqlite3.Error as exc:
            reason = explain(exc, self.path)
            if not self._open_read_only():
                raise StoreError(reason) from None
            self.read_only = reason
        Store._open.add(self)

    @classmethod
    def close_all(cls) -> None:
        """Close every store of this process: what an exit that skips the interpreter's teardown must still do, or
        the database keeps its write-ahead log (and the disk space it holds) after the process is gone."""
        for store in list(cls._open):
            store.close()

    def _open_read_only(self) -> bool:
        """Reading must keep working when the disk is full (``get``, ``logs``): without write access SQLite
        cannot create its WAL index, but a store nobody has open is complete in its main file."""
        if not self.path.exists():
            return False
        try:
            conn = sqlite3.connect(
                f"file:{self.path}?immutable=1", uri=True, isolation_level=None, check_same_thread=False
            )
            if conn.execute("PRAGMA user_version").fetchone()[0] < SCHEMA_VERSION:
                conn.close()
                return False
        except sqlite3.Error:
            return False
        self._conn = conn
        return True

    def _migrate(self) -> None:
        if self._conn.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
            return
        # Switching to WAL takes a lock that ignores the busy timeout: concurrent first opens retry. The mode is
        # stored in the file, so this happens once per state.db.
        for attempt in range(400):
            try:
                if self._conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    self._conn.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or attempt == 399:
                    raise
                time.sleep(0.025)
        with self.transaction() as c:
            if c.execute("PRAGMA user_version").fetchone()[0] >= SCHEMA_VERSION:
                return
            c.executescript_in_tx(_SCHEMA)
            # Columns added since a table was first made (CREATE TABLE IF NOT EXISTS leaves an old table as it is).
            have = {r[1] for r in c.execute("PRAGMA table_info(pods)").fetchall()}
            for column, decl in (("ready", "INTEGER NOT NULL DEFAULT 0"), ("created", "REAL")):
                if column not in have:
                    c.execute(f"ALTER TABLE pods ADD COLUMN {column} {decl}")
            c.execute(f"PRAGMA user_version={SCHEMA_VERSION}")

    def close(self) -> None:
        with self._lock:
            self._conn.close()
        Store._open.discard(self)

    @contextmanager
    def transaction(self) -> Iterator[_Tx]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``: the caller's reads and writes inside see and change one consistent
        state; any exception rolls everything back. Nested calls join the outer transaction."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield _Tx(self._conn, self.path)
                finally:
                    self._depth -= 1
                return
            if self.read_only is not None:
                raise StoreError(self.read_only)
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(explain(exc, self.path)) from None
            self._depth = 1
            try:
                yield _Tx(self._conn, self.path)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite already rolled back (e.g. SQLITE_FULL during COMMIT)
                if isinstance(exc, sqlite3.Error):
                    raise StoreError(explain(exc, self.path)) from None
                raise
            finally:
                self._depth = 0

    def read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query (``kubetrain.local.store.optimization`` keeps its SQL beside its rows)."""
        return self._read(sql, args)

    def _read(self, sql: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(explain(exc, self.path)) from None

    # TrainJobs.
    def create_trainjob(
        self,
        trainjob: dict[str, Any],
        objects: list[dict[str, Any]],
        workdir: str,
        supervisor: tuple[int, str | None],
        *,
        replace_finished: bool = False,
    ) -> TrainJobRow | None:
        """Insert a new TrainJob owned by ``supervisor`` (pid, start time). Raises ``AlreadyExistsError`` when
        one with that name exists (unless ``replace_finished`` and it is finished: it is then replaced, its pods
        and events dropped, and returned so that its files can go too)."""
        meta = trainjob["metadata"]
        ns, name = meta["namespace"], meta["name"]
        t = time.time()
        with self.transaction() as c:
            old = self.get_trainjob(ns, name)
            if old is not None:

                if not (replace_finished and finished(old.trainjob.get("status") or {})):
                    raise AlreadyExistsError(f'trainjob "{name}" already exists in namespace "{ns}"')
                _delete_rows(c, ns, name)
            c.execute(
                "INSERT INTO trainjobs (namespace, name, uid, trainjob, objects, workdir, supervisor_pid,"
                " supervisor_start, created, updated) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (ns, name, meta["uid"], json.dumps(trainjob), json.dumps(objects), workdir, *supervisor, t, t),
            )
        return old

    def update_trainjob(
        self, namespace: str, name: str, trainjob: dict[str, Any], *, objects: list[dict[str, Any]] | None = None
    ) -> None:
        with self.transaction() as c:
            c.execute(
                "UPDATE trainjobs SET trainjob=?, updated=? WHERE namespace=? AND name=?",
                (json.dumps(trainjob), time.time(), namespace, name),
            )
            if objects is not None:
                c.execute(
                    "UPDATE trainjobs SET objects=? WHERE namespace=? AND name=?",
                    (json.dumps(objects), namespace, name),
                )

    def set_status(self, namespace: str, name: str, uid: str, status: dict[str, Any]) -> bool:
        """Replace only ``status`` of that incarnation (an ``apply`` may change spec or labels meanwhile)."""
        with self.transaction() as c:
            row = c.execute(
                "SELECT uid, trainjob FROM trainjobs WHERE namespace=? AND name=?", (namespace, name)
            ).fetchone()
            if row is None or row[0] != uid:
                return False
            tj = json.loads(row[1])
            tj["status"] = status
            c.execute(
                "UPDATE trainjobs SET trainjob=?, updated=? WHERE namespace=? AND name=?",
                (json.dumps(tj), time.time(), namespace, name),
            )
            return True

    def set_supervisor(self, namespace: str, name: str, pid: int | None, start: str | None) -> None:
        with self.transaction() as c:
            c.execute(
                "UPDATE trainjobs SET supervisor_pid=?, supervisor_start=? WHERE namespace=? AND name=?",
                (pid, start, namespace, name),
            )

    def set_restarts(self, namespace: str, name: str, restarts: int) -> None:
        with self.transaction() as c:
            c.execute(
                "UPDATE trainjobs SET restarts=? WHERE namespace=? AND name=?", (restarts, namespace, name)
            )

    def get_trainjob(self, namespace: str, name: str) -> TrainJobRow | None:
        rows = self._read(
            f"SELECT {_TJ_COLUMNS} FROM trainjobs WHERE namespace=? AND name=?", (namespace, name)
        )
        return _tj_row(rows[0]) if rows else None

    def list_trainjobs(self, namespace: str | None) -> list[TrainJobRow]:
        q = f"SELECT {_TJ_COLUMNS} FROM trainjobs"
        args: tuple[Any, ...] = ()
        if namespace is not None:
            q += " WHERE namespace=?"
            args = (namespace,)
        return [_tj_row(r) for r in self._read(q + " ORDER BY created", args)]

    def change_marks(self, namespace: str | None) -> dict[tuple[str, str], tuple[Any, ...]]:
        """Per TrainJob, values that change whenever it or one of its pods is written (its uid, its row's and its
        pods' last update, its pod count): a watcher re-reads only the TrainJobs whose mark moved (one query,
        however many TrainJobs there are)."""
        q = (
            "SELECT t.namespace, t.name, t.uid, t.updated, MAX(p.updated), COUNT(p.name) FROM trainjobs t"
            " LEFT JOIN pods p ON p.namespace = t.namespace AND p.trainjob = t.name"
        )
        args: tuple[Any, ...] = ()
        if namespace is not None:
            q += " WHERE t.namespace=?"
            args = (namespace,)
        return {(r[0], r[1]): tuple(r[2:]) for r in self._read(q + " GROUP BY t.namespace, t.name", args)}

    def delete_trainjob(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Remove the TrainJob and everything recorded about it; with ``uid``, only that incarnation."""
        with self.transaction() as c:
            if uid is not None:
                row = c.execute(
                    "SELECT uid FROM trainjobs WHERE namespace=? AND name=?", (namespace, name)
                ).fetchone()
                if row is None or row[0] != uid:
                    return False
            _delete_rows(c, namespace, name)
            return True

    # Pods.
    def put_pods(self, pods: list[PodRow]) -> None:
        if not pods:
            return
        t = time.time()
        with self.transaction() as c:
            c.executemany(
                # A pod keeps the time it was first recorded (its creationTimestamp) across rewrites.
                "INSERT OR REPLACE INTO pods (namespace, trainjob, name, rjob, state, pid, pid_start, exit_code,"
                " restarts, message, log, updated, ready, created) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,"
                " COALESCE((SELECT created FROM pods WHERE namespace=? AND trainjob=? AND name=?), ?))",
                [
                    (
                        p.namespace,
                        p.trainjob,
                        p.name,
                        p.rjob,
                        p.state,
                        p.pid,
                        p.pid_start,
                        p.exit_code,
                        p.restarts,
                        p.message,
                        p.log,
                        t,
                        int(p.ready),
                        p.namespace,
                        p.trainjob,
                        p.name,
                        t,
                    )
                    for p in pods
                ],
            )

    def delete_pods(self, namespace: str, trainjob: str, names: list[str]) -> None:
        """Forget pods that no longer exist (an elastic TrainJob scaled down); their logs stay."""
        if not names:
            return
        with self.transaction() as c:
            c.executemany(
                "DELETE FROM pods WHERE namespace=? AND trainjob=? AND name=?",
                [(namespace, trainjob, n) for n in names],
            )

    def put_pod(self, pod: PodRow) -> None:
        self.put_pods([pod])

    def list_pods(self, namespace: str, trainjob: str) -> list[PodRow]:
        rows = self._read(
            "SELECT namespace, trainjob, name, rjob, state, pid, pid_start, exit_code, restarts, message, log,"
            " ready, created FROM pods WHERE namespace=? AND trainjob=? ORDER BY rowid",
            (namespace, trainjob),
        )
        return [
            PodRow(
                namespace=r[0], trainjob=r[1], name=r[2], rjob=r[3], state=r[4], pid=r[5], pid_start=r[6],
                exit_code=r[7], restarts=r[8], message=r[9], log=r[10], ready=bool(r[11]), created=r[12],
            )
            for r in rows
        ]

    # Events.
    def add_event(self, namespace: str, trainjob: str, type_: str, reason: str, message: str) -> None:
        with self.transaction() as c:
            c.execute(
                "INSERT INTO events (namespace, trainjob, time, type, reason, message) VALUES (?,?,?,?,?,?)",
                (namespace, trainjob, now_rfc3339(), type_, reason, message),
            )

    def list_events(self, namespace: str, trainjob: str) -> list[EventRow]:
        rows = self._read(
            "SELECT time, type, reason, message FROM events WHERE namespace=? AND trainjob=? ORDER BY id",
            (namespace, trainjob),
        )
        return [EventRow(*r) for r in rows]

    # Progress history (``kubetrain metrics``): every trainerStatus a TrainJob had, oldest first.
    def add_progress(self, namespace: str, trainjob: str, uid: str, source: str, report: dict[str, Any]) -> None:
        """Append one report; past ``MAX_PROGRESS`` rows of a TrainJob, every other row of its older half goes,
        so a run of any length keeps its whole shape at a bounded size."""
        with self.transaction() as c:
            c.execute(
                "INSERT INTO progress (namespace, trainjob, uid, time, source, report) VALUES (?,?,?,?,?,?)",
                (namespace, trainjob, uid, time.time(), source, json.dumps(report)),
            )
            (count,) = c.execute(
                "SELECT COUNT(*) FROM progress WHERE namespace=? AND trainjob=?", (namespace, trainjob)
            ).fetchone()
            if count > MAX_PROGRESS:
                ids = [r[0] for r in c.execute(
                    "SELECT id FROM progress WHERE namespace=? AND trainjob=? ORDER BY id LIMIT ?",
                    (namespace, trainjob, count // 2),
                ).fetchall()]  # fmt: skip
                c.executemany("DELETE FROM progress WHERE id=?", [(i,) for i in ids[1::2]])

    def list_progress(self, namespace: str, trainjob: str) -> list[ProgressRow]:
        rows = self._read(
            "SELECT time, source, report FROM progress WHERE namespace=? AND trainjob=? ORDER BY id",
            (namespace, trainjob),
        )
        return [ProgressRow(r[0], r[1], json.loads(r[2])) for r in rows]

    def last_progress_source(self, namespace: str, trainjob: str) -> str | None:
        rows = self._read(
            "SELECT source FROM progress WHERE namespace=? AND trainjob=? ORDER BY id DESC LIMIT 1",
            (namespace, trainjob),
        )
        return str(rows[0][0]) if rows else None

    # Runtimes, ConfigMaps, Secrets, PersistentVolumeClaims.
    def put_object(self, manifest: dict[str, Any]) -> str:
        """Store an applied object; returns ``created``, ``configured`` or ``unchanged`` like kubectl."""
        meta = manifest.get("metadata") or {}
        ns = "" if manifest["kind"] == "ClusterTrainingRuntime" else meta.get("namespace") or "default"
        key = (manifest["kind"], ns, meta.get("name", ""))
        text = json.dumps(manifest, sort_keys=True)
        with self.transaction() as c:
            row = c.execute(
                "SELECT manifest FROM runtimes WHERE kind=? AND namespace=? AND name=?", key
            ).fetchone()
            if row is not None and json.loads(row[0]) == manifest:
                return "unchanged"
            c.execute(
                "INSERT OR REPLACE INTO runtimes (kind, namespace, name, manifest) VALUES (?,?,?,?)", (*key, text)
            )
            return "created" if row is None else "configured"

    def runtime_manifest(self, kind: str, namespace: str, name: str) -> str | None:
        """The stored JSON of an applied object (``namespace`` is ignored for ClusterTrainingRuntimes)."""
        ns = "" if kind == "ClusterTrainingRuntime" else namespace
        rows = self._read("SELECT manifest FROM runtimes WHERE kind=? AND namespace=? AND name=?", (kind, ns, name))
        return str(rows[0][0]) if rows else None

    def delete_object(self, kind: str, namespace: str, name: str) -> bool:
        """Remove an applied runtime (or ConfigMap/Secret); ``False`` when there was none."""
        with self.transaction() as c:
            cur = c.execute(
                "DELETE FROM runtimes WHERE kind=? AND namespace=? AND name=?", (kind, namespace, name)
            )
            return bool(cur.rowcount)

    def list_objects(self, kinds: tuple[str, ...]) -> list[dict[str, Any]]:
        """Applied objects (runtimes, and the ConfigMaps/Secrets pods may reference) of the given kinds."""
        marks = ",".join("?" * len(kinds))
        rows = self._read(f"SELECT manifest FROM runtimes WHERE kind IN ({marks})", kinds)
        return [json.loads(r[0]) for r in rows]


def _private(db: Path) -> None:
    """The state holds applied Secrets: only its owner may read it (SQLite gives its -wal and -shm files the
    database file's mode). Another user's store (read as root) is left as it is."""
    for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        try:
            st = p.stat()
            if st.st_uid == os.geteuid() and st.st_mode & 0o077:
                p.chmod(st.st_mode & 0o700)
        except OSError:
            continue


class _Tx:
    """The connection inside ``Store.transaction``."""

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path

    def execute(self, sql: str, args: tuple[Any, ...] | list[Any] = ()) -> sqlite3.Cursor:
        return self._conn.execute(sql, args)

    def executemany(self, sql: str, rows: list[tuple[Any, ...]]) -> sqlite3.Cursor:
        return self._conn.executemany(sql, rows)

    def executescript_in_tx(self, script: str) -> None:
        # executescript() would COMMIT first; run the statements one by one inside the open transaction.
        for stmt in script.split(";"):
            if stmt.strip():
                self._conn.execute(stmt)


def _delete_rows(c: _Tx, namespace: str, name: str) -> None:
    for table, col in (
        ("pods", "trainjob"),
        ("progress", "trainjob"),
        ("events", "trainjob"),
        ("sched_queue", "trainjob"),
        ("sched_allocations", "trainjob"),
        ("trainjobs", "name"),
    ):
        c.execute(f"DELETE FROM {table} WHERE namespace=? AND {col}=?", (namespace, name))


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
