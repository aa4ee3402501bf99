"""Lease-based leader election (``coordination.k8s.io/v1``), the protocol client-go's leaderelection uses.

Optimistic concurrency does the locking: every write is a PUT carrying the resourceVersion that was read, so
two candidates can never both believe they took over the same lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from typing import Any

from kubetrain.k8s.client import ApiError, Client, Conflict, NotFound
from kubetrain.k8s.client.resources import LEASE

log = logging.getLogger("kubetrain.operator.leader")


def _micro(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseNamespaceMissing(Exception):
    """The Lease's namespace does not exist: retrying cannot help, the operator must not start."""

    def __init__(self, namespace: str):
        self.namespace = namespace
        super().__init__(
            f'leader election cannot start: the Lease namespace "{namespace}" does not exist. Pass '
            f"--lease-namespace with an existing namespace, run a single operator with --no-leader-elect, or "
            f"create it (kubectl create namespace {namespace})"
        )


def _namespace_missing(exc: NotFound) -> bool:
    """A create answered 404 because the namespace is missing (the object itself cannot be "not found")."""
    details = exc.body.get("details") or {}
    return details.get("kind") == "namespaces" or exc.message.startswith('namespaces "')


def _parse(s: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(s.replace("Z", "+00:00")) if s else None


class LeaderElector:
    def __init__(
        self,
        client: Client,
        *,
        name: str,
        namespace: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.name, self.namespace, self.identity = name, namespace, identity
        self.lease_duration, self.renew_deadline, self.retry_period = (
            lease_duration,
            renew_deadline,
            retry_period,
        )
        self.clock = clock
        self.is_leader = False
        self.lost = asyncio.Event()

    def _spec(self, old: dict[str, Any] | None) -> dict[str, Any]:
        now = _micro(self.clock())
        old_spec = (old or {}).get("spec") or {}
        transitions = int(old_spec.get("leaseTransitions") or 0)
        taking_over = old_spec.get("holderIdentity") != self.identity
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.lease_duration),
            "acquireTime": now if taking_over else old_spec.get("acquireTime", now),
            "renewTime": now,
            "leaseTransitions": transitions + (1 if taking_over and old is not None else 0),
        }

    async def try_acquire_or_renew(self) -> bool:
        """One attempt. True if we hold the lease afterwards. Raises :class:`LeaseNamespaceMissing`."""
        try:
            lease = await self.client.get(LEASE, self.name, self.namespace)
        except NotFound:
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._spec(None),
            }
            try:
                await self.client.create(body, resource=LEASE)
                return True
            except Conflict:
                return False
            except NotFound as exc:
                if _namespace_missing(exc):
                    raise LeaseNamespaceMissing(self.namespace) from exc
                raise
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        renewed = _parse(spec.get("renewTime"))
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        expired = renewed is None or (self.clock() - renewed).total_seconds() > duration
        if holder and holder != self.identity and not expired:
            return False
        lease["spec"] = self._spec(lease)
        try:
            await self.client.replace(lease, resource=LEASE)  # carries the resourceVersion we read
            return True
        except Conflict:
            return False

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Block until this replica leads (True) or ``stop`` is set (False). Transient API errors are retried;
        a missing namespace raises :class:`LeaseNamespaceMissing` at once."""
        while not stop.is_set():
            try:
                if await self.try_acquire_or_renew():
                    self.is_leader = True
                    log.info("became leader", extra={"object": f"Lease {self.namespace}/{self.name}"})
                    return True
            except ApiError as exc:
                log.warning("leader election attempt failed: %s", exc)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.retry_period)
        return False

    async def keep(self) -> None:
        """Renew every ``retry_period``; set :attr:`lost` after ``renew_deadline`` without a renewal."""
        loop = asyncio.get_running_loop()
        last_ok = loop.time()
        while True:
            await asyncio.sleep(self.retry_period)
            try:
                ok = await asyncio.wait_for(self.try_acquire_or_renew(), self.renew_deadline)
            except TimeoutError:
                log.warning("lease renewal failed: no answer within %.0fs", self.renew_deadline)
                ok = False
            except ApiError as exc:
                log.warning("lease renewal failed: %s", exc)
                ok = False
            if ok:
                last_ok = loop.time()
            elif loop.time() - last_ok > self.renew_deadline or await self._taken():
                self.is_leader = False
                self.lost.set()
                log.error("lost leadership", extra={"object": f"Lease {self.namespace}/{self.name}"})
                return

    async def _taken(self) -> bool:
        try:
            lease = await self.client.get(LEASE, self.name, self.namespace)
        except ApiError:
            return False
        return ((lease.get("spec") or {}).get("holderIdentity")) not in (None, "", self.identity)

    async def release(self) -> None:
        """Hand the lease back on graceful shutdown so a standby takes over at once, not after expiry."""
        if not self.is_leader:
            return
        self.is_leader = False
        try:
            lease = await self.client.get(LEASE, self.name, self.namespace)
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            lease["spec"]["leaseDurationSeconds"] = 1
            await self.client.replace(lease, resource=LEASE)
        except ApiError as exc:
            log.warning("could not release the lease: %s", exc)
