"""OptimizationJobs on this machine: applying one (validated like every entry point, stored, its controller
started), reading them, and keeping a controller behind each unfinished one.

The controller (``kubetrain.local.trials``, run by one detached process per OptimizationJob: ``optimizer``) holds
no state of its own: everything it needs is the stored OptimizationJob and its trial TrainJobs. So a controller that
died (killed, a reboot) is simply started again by the next reader that notices, like a Deployment restarting its
pod; the trials it had started keep running under their own supervisors meanwhile.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from typing import IO, TYPE_CHECKING, Any

from kubetrain.api.errors import InvalidObjectError, KubetrainError
from kubetrain.local import paths
from kubetrain.local.sandbox import pods, terminate
from kubetrain.local.store import optimization as rows
from kubetrain.local.store.db import Store, TrainJobRow
from kubetrain.local.store.optimization import OptimizationJobRow
from kubetrain.local.store.status import finished, now_rfc3339
from kubetrain.local.submit import changes

if TYPE_CHECKING:
    from kubetrain.api.optimization import OptimizationJob

CONTROLLER_MODULE = "kubetrain.local.optimizer"
GO = b"go\n"  # what a new controller waits for on stdin before it acts (the supervisor's handshake)


def apply(store: Store, manifest: dict[str, Any], *, namespace: str, workdir: str) -> tuple[str, str]:
    """Create the OptimizationJob, owned by this process (the caller runs a first pass and then starts its
    controller: ``spawn_controller``), or update the labels and annotations of an existing one (its spec is
    immutable). Returns the name and ``created``, ``configured`` or ``unchanged``."""
    from pydantic import ValidationError

    from kubetrain.api.optimization import OptimizationJob
    from kubetrain.compiler import Subject, validate_objects

    try:
        oj = OptimizationJob.model_validate(manifest)
    except ValidationError as exc:
        raise KubetrainError(f"invalid OptimizationJob: {exc}") from None
    oj.metadata.namespace = oj.metadata.namespace or namespace
    existing = rows.get(store, oj.namespace, oj.name)
    old = OptimizationJob.model_validate(existing.manifest) if existing is not None else None
    runtime = oj.spec.train_job_template.spec.runtime_ref.name
    result = validate_objects([Subject(oj, old=old)], installed=changes.runtimes(store, runtime), local="run")[0]
    if not result.ok:
        raise InvalidObjectError(result.errors)
    if existing is not None and old is not None:
        return oj.name, _relabel(store, existing, old, oj)
    oj.metadata.uid = str(uuid.uuid4())
    oj.metadata.creation_timestamp = now_rfc3339()
    oj.metadata.generation = 1
    oj.status = None
    rows.create(store, oj.to_wire(), workdir, (os.getpid(), pods.proc_start_time(os.getpid())))
    return oj.name, "created"


def _relabel(store: Store, row: OptimizationJobRow, old: OptimizationJob, new: OptimizationJob) -> str:
    keep = ("labels", "annotations")
    wanted = {k: getattr(new.metadata, k) for k in keep}
    if all(getattr(old.metadata, k) == wanted[k] for k in keep):
        return "unchanged"
    meta = dict(row.manifest["metadata"])
    for key in keep:
        if wanted[key] is None:
            meta.pop(key, None)
        else:
            meta[key] = wanted[key]
    rows.set_metadata(store, row.namespace, row.name, meta)
    return "configured"


def spawn_controller(store: Store, namespace: str, name: str) -> None:
    """Start the detached controller; it acts only after its pid is recorded (else a reader would start another)."""
    out: IO[bytes]
    with open(paths.supervisor_log(), "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", CONTROLLER_MODULE, namespace, name],
            stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )
    assert proc.stdin is not None
    try:
        rows.set_controller(store, namespace, name, proc.pid, pods.proc_start_time(proc.pid))
        proc.stdin.write(GO)
        proc.stdin.close()
    except BaseException:
        proc.kill()
        raise


def controller_alive(row: OptimizationJobRow) -> bool:
    return pods.alive(row.controller_pid, row.controller_start)


def ensure_controller(store: Store, row: OptimizationJobRow) -> OptimizationJobRow:
    """Start a controller for an unfinished OptimizationJob whose controller is gone (at most one: the check and
    the start happen in one store transaction)."""
    if finished(row.manifest.get("status") or {}) or controller_alive(row):
        return row
    with store.transaction():
        fresh = rows.get(store, row.namespace, row.name)
        if fresh is None or fresh.uid != row.uid or controller_alive(fresh):
            return fresh or row
        spawn_controller(store, row.namespace, row.name)
    return rows.get(store, row.namespace, row.name) or row


def find(store: Store, name: str, namespace: str) -> OptimizationJobRow | None:
    return rows.get(store, namespace, name)


def get(store: Store, name: str, namespace: str) -> OptimizationJobRow:
    row = rows.get(store, namespace, name)
    if row is None:
        from kubetrain.api.suggest import not_found_hint

        known = [r.name for r in rows.list_all(store, namespace)]
        hint = not_found_hint(name, known, f"`kubetrain get optimizationjobs -n {namespace}` lists them")
        from kubetrain.local.objects import NotFoundError

        raise NotFoundError(f'optimizationjob "{name}" not found in namespace "{namespace}"{hint}')
    return ensure_controller(store, row)


def list_rows(store: Store, namespace: str | None) -> list[OptimizationJobRow]:
    return [ensure_controller(store, r) for r in rows.list_all(store, namespace)]


def stop_controller(row: OptimizationJobRow, wait: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after ``wait`` seconds; the controller only writes the store, so stopping it
    between two steps loses nothing."""
    if row.controller_pid is None or row.controller_pid == os.getpid() or not controller_alive(row):
        return
    terminate.signal_until_gone(row.controller_pid, lambda: controller_alive(row),
                                ((signal.SIGTERM, wait), (signal.SIGKILL, 5.0)))


def delete(store: Store, row: OptimizationJobRow) -> bool:
    """Forget the OptimizationJob (its trials are deleted first, by the backend); False when it was replaced."""
    return rows.delete(store, row.namespace, row.name, uid=row.uid)


def trial_rows(store: Store, row: OptimizationJobRow) -> list[TrainJobRow]:
    """The stored TrainJobs that are this OptimizationJob's trials (its uid in their ownerReferences), without their
    compiled objects."""
    return rows.trials(store, row.namespace, row.uid)
