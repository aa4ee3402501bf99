"""Keeping ``$KUBETRAIN_HOME`` bounded: ``kubetrain prune`` and the retention setting remove finished
TrainJobs (their state, logs and pod scratch directories) and files no TrainJob owns any more.

Volumes (``$KUBETRAIN_HOME/volumes``, the local PVCs) are user data and are only removed when asked
(``--volumes``), and then only for TrainJobs that no longer exist.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubetrain.api import constants as C
from kubetrain.local import paths
from kubetrain.local.config import Retention
from kubetrain.local.store import optimization, reaper, status
from kubetrain.local.store.db import Store, TrainJobRow


@dataclass
class Pruned:
    what: str  # ``trainjob default/x``, ``orphaned logs …``
    path: Path | None
    bytes: int


def du(path: Path) -> int:
    total = 0
    try:
        for p in path.rglob("*"):
            try:
                if p.is_file() and not p.is_symlink():
                    total += p.stat().st_size
            except OSError:
                continue
    except OSError:
        pass
    return total


def finished_at(row: TrainJobRow) -> float | None:
    """When the TrainJob finished (its Complete/Failed condition's transition time), None while it runs."""
    st = row.trainjob.get("status") or {}
    if not status.finished(st):
        return None
    for c in st.get("conditions") or []:
        if c["type"] in (C.COND_COMPLETE, C.COND_FAILED) and c["status"] == "True":
            try:
                return datetime.strptime(c["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
            except (KeyError, ValueError):
                break
    return row.created


def _recent(d: Path) -> bool:
    # A TrainJob submitted while we listed the store may already have its directory: leave young ones alone.
    try:
        return time.time() - d.stat().st_mtime < 60
    except OSError:
        return True


def remove_files(row: TrainJobRow, *, keep_logs: bool) -> Path:
    """A deleted TrainJob's files: everything, or everything but its logs."""
    d = paths.trainjob_dir(row.namespace, row.name, row.uid)
    if keep_logs:
        for child in d.iterdir() if d.exists() else []:
            if child.name != "logs":
                paths.remove_tree(child) if child.is_dir() else child.unlink(missing_ok=True)
    else:
        paths.remove_tree(d)  # pods in their image leave overlayfs's work directories (mode 0000) behind
    return d


def select(
    store: Store, *, older_than: float, namespace: str | None, keep_newest: int | None = None
) -> list[TrainJobRow]:
    """Finished TrainJobs that finished at least ``older_than`` seconds ago, or beyond the newest
    ``keep_newest`` ones."""
    now = time.time()
    rows = store.list_trainjobs(namespace)
    if store.read_only is None:
        rows = reaper.check_all(store, rows)
    # A trial goes with its OptimizationJob: pruned alone, the search would run it again (its result names it).
    searches = {r.uid for r in optimization.list_all(store, namespace)}
    rows = [r for r in rows if not any(o.get("uid") in searches for o in
                                       (r.trainjob.get("metadata") or {}).get("ownerReferences") or [])]
    done = sorted(
        ((t, r) for r in rows if (t := finished_at(r)) is not None), key=lambda p: p[0], reverse=True
    )
    return [
        r for i, (t, r) in enumerate(done) if now - t >= older_than or (keep_newest is not None and i >= keep_newest)
    ]


def free_space_first(store: Store, **criteria: Any) -> None:
    """On a full disk the store cannot record anything: remove the selected TrainJobs' files first, so that the
    store can then be written (their records go next)."""
    for r in select(store, **criteria):
        paths.remove_tree(paths.trainjob_dir(r.namespace, r.name, r.uid))


def prune(
    store: Store,
    *,
    older_than: float = 0.0,
    namespace: str | None = None,
    keep_newest: int | None = None,
    volumes: bool = False,
    dry_run: bool = False,
) -> list[Pruned]:
    """Remove finished TrainJobs (see ``select``), then files of TrainJobs that no longer exist."""
    out: list[Pruned] = []
    for r in select(store, older_than=older_than, namespace=namespace, keep_newest=keep_newest):
        d = paths.trainjob_dir(r.namespace, r.name, r.uid)
        size = du(d)
        if not dry_run:
            if not store.delete_trainjob(r.namespace, r.name, uid=r.uid):
                continue  # replaced meanwhile
            paths.remove_tree(d)
        out.append(Pruned(f"trainjob {r.namespace}/{r.name}", d, size))
    out += _orphans(store, namespace, volumes=volumes, dry_run=dry_run)
    return out


def _orphans(store: Store, namespace: str | None, *, volumes: bool, dry_run: bool) -> list[Pruned]:
    """Directories of TrainJobs the store no longer knows (deleted with --keep-logs, older versions, crashes)."""
    out: list[Pruned] = []
    live = {(r.namespace, r.name, r.uid[:8]) for r in store.list_trainjobs(None)}
    root = paths.home() / "trainjobs"
    for ns_dir in sorted(root.iterdir()) if root.is_dir() else []:
        if namespace is not None and ns_dir.name != namespace:
            continue
        for d in sorted(ns_dir.iterdir()):
            name, _, short_uid = d.name.rpartition("-")
            if (ns_dir.name, name, short_uid) in live or not d.is_dir() or _recent(d):
                continue
            size = du(d)
            if not dry_run:
                paths.remove_tree(d)
            out.append(Pruned(f"files of deleted trainjob {ns_dir.name}/{name}", d, size))
    if volumes:
        names = {(r.namespace, r.name) for r in store.list_trainjobs(None)}
        vroot = paths.home() / "volumes"
        for ns_dir in sorted(vroot.iterdir()) if vroot.is_dir() else []:
            if namespace is not None and ns_dir.name != namespace:
                continue
            for d in sorted(ns_dir.iterdir()):
                if (ns_dir.name, d.name) in names:
                    continue
                size = du(d)
                if not dry_run:
                    shutil.rmtree(d, ignore_errors=True)
                out.append(Pruned(f"volumes of deleted trainjob {ns_dir.name}/{d.name}", d, size))
    return out


def apply_retention(store: Store, retention: Retention) -> list[Pruned]:
    """The automatic part: run whenever a TrainJob is submitted."""
    if retention.ttl_after_finished is None and retention.max_finished is None:
        return []
    return prune(
        store,
        older_than=retention.ttl_after_finished if retention.ttl_after_finished is not None else float("inf"),
        keep_newest=retention.max_finished,
    )
