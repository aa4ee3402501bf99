"""The local scheduler: one machine's cpu, memory, GPUs and extended resources shared by every TrainJob on it.

Each supervisor asks for its pods (one pod at a time, or a whole gang when the TrainJob has a PodGroup); the
decision is made inside one ``BEGIN IMMEDIATE`` transaction of the shared store, so two supervisors can never
both admit into the same free resources. Requests wait in one FIFO queue: walking it in order, every earlier
request that is still waiting keeps what it asks for reserved, so a later request is admitted only with what is
left (a small job never overtakes a big one for the resource the big one waits for, but a job that needs none of
it still starts). GPUs are handed out as device indices, each to exactly one pod, except among the pods of one
over-committed TrainJob (``--overcommit``), which share the GPUs it holds when it asks for more than the machine has;
a GPU another TrainJob holds is never shared. Books of supervisors that died are dropped on the next decision.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from kubetrain.local.sandbox import pods as pods_
from kubetrain.local.scheduling.resources import GPU, SHARED, Capacity, add, fmt
from kubetrain.local.store.db import Store, _Tx

_EPS = 1e-9
INSUFFICIENT = "Insufficient "
"""How the reason of a request that does not fit now begins (``Insufficient cpu``), as kube-scheduler says it."""


@dataclass(frozen=True)
class Owner:
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass
class Decision:
    admitted: bool
    devices: dict[str, list[int]] = field(default_factory=dict)  # pod -> GPU indices
    reason: str = ""  # waiting: e.g. ``Insufficient cpu``
    message: str = ""


class Scheduler:
    def __init__(self, store: Store, capacity: Capacity, owner: Owner) -> None:
        self.store = store
        self.capacity = capacity
        self.owner = owner

    def admit(self, key: str, requests: dict[str, dict[str, float]], *, overcommit: bool = False) -> Decision:
        """Admit the pods of ``requests`` (pod -> resource -> amount) together, or queue them under ``key``.
        Idempotent: asking again for pods that were admitted returns their devices. ``overcommit``: cpu, memory
        and ephemeral storage never hold them back (``resources.SHARED``); what they take is still booked. GPUs asked
        beyond this machine's count wait for all of them to be free, then are shared among these pods."""
        o = self.owner
        with self.store.transaction() as c:
            _drop_dead(c)
            held = {
                r[0]: json.loads(r[1])
                for r in c.execute(
                    "SELECT pod, devices FROM sched_allocations WHERE namespace=? AND trainjob=? AND uid=?",
                    (o.namespace, o.name, o.uid),
                ).fetchall()
            }
            if requests and all(p in held for p in requests):
                return Decision(True, {p: held[p] for p in requests})
            c.execute(
                "INSERT OR IGNORE INTO sched_queue (namespace, trainjob, uid, request, requests, created)"
                " VALUES (?,?,?,?,?,?)",
                (o.namespace, o.name, o.uid, key, json.dumps(requests), time.time()),
            )
            used: dict[str, float] = {}
            holders: dict[str, set[str]] = {}
            taken: set[int] = set()
            for ns, tj, res_json, dev_json in c.execute(
                "SELECT namespace, trainjob, resources, devices FROM sched_allocations"
            ).fetchall():
                res = json.loads(res_json)
                used = add(used, res)
                for r in res:
                    holders.setdefault(r, set()).add(f"{ns}/{tj}")
                taken.update(json.loads(dev_json))
            if self.capacity.gpus:
                used[GPU] = float(len(taken))  # devices, not requests: an over-committed gang shares its GPUs
            free = {r: self.capacity.get(r) - used.get(r, 0.0) for r in set(self.capacity.resources) | set(used)}
            queue = c.execute(
                "SELECT seq, namespace, trainjob, uid, request, requests FROM sched_queue ORDER BY seq"
            ).fetchall()
            for position, (seq, ns, tj, uid, req_key, req_json) in enumerate(queue, start=1):
                want: dict[str, float] = {}
                for per_pod in json.loads(req_json).values():
                    want = add(want, per_pod)
                mine = (ns, tj, uid, req_key) == (o.namespace, o.name, o.uid, key)
                if mine and overcommit and want.get(GPU, 0.0) > self.capacity.gpus >= 1:
                    want[GPU] = float(self.capacity.gpus)  # every GPU, shared among its pods
                short = [
                    r
                    for r, v in sorted(want.items())
                    if v > free.get(r, 0.0) + _EPS and not (mine and overcommit and r in SHARED)
                ]
                if mine and not short:
                    devices = self._allocate(c, requests, taken, int(want.get(GPU, 0.0)))
                    c.execute("DELETE FROM sched_queue WHERE seq=?", (seq,))
                    return Decision(True, devices)
                if mine:
                    r = short[0]
                    idle = self.capacity.get(r) - used.get(r, 0.0)
                    reserved = idle - free.get(r, 0.0)
                    who = sorted(holders.get(r, set()))
                    parts = [
                        f"{INSUFFICIENT}{r}: needs {fmt(r, want[r])}, {fmt(r, max(idle, 0.0))} of "
                        f"{fmt(r, self.capacity.get(r))} free"
                    ]
                    if who:
                        parts.append(f"in use by {', '.join(who[:3])}{' and others' if len(who) > 3 else ''}")
                    if reserved > _EPS:
                        parts.append(f"TrainJobs queued earlier wait for {fmt(r, reserved)}")
                    parts.append(f"position {position} in the local queue")
                    return Decision(False, reason=f"{INSUFFICIENT}{r}", message="; ".join(parts))
                for r, v in want.items():
                    free[r] = free.get(r, 0.0) - v  # reserved for this earlier request, whether it fits or not
            raise AssertionError("own scheduling request vanished inside its transaction")

    def _allocate(
        self, c: _Tx, requests: dict[str, dict[str, float]], taken: set[int], count: int
    ) -> dict[str, list[int]]:
        """Book the pods with ``count`` free GPUs among them: one each, or (over-committed, fewer GPUs than asked)
        handed round, so pods share them and none holds the same GPU twice."""
        o = self.owner
        pool = [i for i in range(self.capacity.gpus) if i not in taken][:count]
        devices: dict[str, list[int]] = {}
        at = 0
        for pod, res in requests.items():
            n = min(round(res.get(GPU, 0.0)), len(pool))
            devices[pod] = sorted(pool[(at + k) % len(pool)] for k in range(n)) if n else []
            at += n
            c.execute(
                "INSERT OR REPLACE INTO sched_allocations (namespace, trainjob, uid, pod, resources, devices)"
                " VALUES (?,?,?,?,?,?)",
                (o.namespace, o.name, o.uid, pod, json.dumps(res), json.dumps(devices[pod])),
            )
        return devices

    def release(self, pods: list[str]) -> None:
        if not pods:
            return
        o = self.owner
        marks = ",".join("?" * len(pods))
        with self.store.transaction() as c:
            c.execute(
                f"DELETE FROM sched_allocations WHERE namespace=? AND trainjob=? AND uid=? AND pod IN ({marks})",
                (o.namespace, o.name, o.uid, *pods),
            )

    def release_all(self) -> None:
        """Everything this TrainJob holds or waits for (it ended, was suspended, or restarts its pods)."""
        o = self.owner
        with self.store.transaction() as c:
            for table in ("sched_allocations", "sched_queue"):
                c.execute(
                    f"DELETE FROM {table} WHERE namespace=? AND trainjob=? AND uid=?", (o.namespace, o.name, o.uid)
                )


def _drop_dead(c: _Tx) -> None:
    """Forget what TrainJobs without a live supervisor hold or wait for (deleted, finished, ``kill -9``)."""
    owners: set[tuple[str, str, str]] = set()
    for table in ("sched_allocations", "sched_queue"):
        owners.update(c.execute(f"SELECT DISTINCT namespace, trainjob, uid FROM {table}").fetchall())
    for ns, tj, uid in owners:
        row: Any = c.execute(
            "SELECT uid, supervisor_pid, supervisor_start FROM trainjobs WHERE namespace=? AND name=?", (ns, tj)
        ).fetchone()
        if row is not None and row[0] == uid and pods_.alive(row[1], row[2]):
            continue
        for table in ("sched_allocations", "sched_queue"):
            c.execute(f"DELETE FROM {table} WHERE namespace=? AND trainjob=? AND uid=?", (ns, tj, uid))
