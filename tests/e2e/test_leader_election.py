"""Two operators, one Lease: only the leader reconciles, and after kill -9 of the leader the standby takes over
within the lease duration (15 s, measured from the leader's last renewal; it renews every 2 s)."""

from __future__ import annotations

import time

import pytest

from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import OperatorProcess, call, get, setup_runtime, trainjob, uniq, wait_until

pytestmark = pytest.mark.e2e

LEASE_DURATION = 15.0  # OperatorSettings.lease_duration (client-go's default)
RETRY_PERIOD = 2.0


def holder(ns: str) -> str | None:
    lease = get(r.LEASE, "kubetrain-operator", ns) or {}
    value = (lease.get("spec") or {}).get("holderIdentity")
    return str(value) if value else None


def test_kill_9_of_the_leader_hands_over_within_the_lease_duration(kubeconfig: str, fresh_namespace: str) -> None:
    ns = fresh_namespace
    rt = setup_runtime(ns)
    a = OperatorProcess(kubeconfig, ns, "--namespace", ns, identity="op-a").start()
    b = OperatorProcess(kubeconfig, ns, "--namespace", ns, identity="op-b")
    try:
        wait_until(lambda: holder(ns) == "op-a", 30, "op-a leads")
        b.start()  # a standby is ready (it would serve the webhook) but does not reconcile
        first = uniq("tj")
        call(lambda c: c.create(trainjob(first, ns, rt)))
        wait_until(lambda: get(r.JOBSET, first, ns), what="JobSet from op-a")
        assert holder(ns) == "op-a"
        transitions = (get(r.LEASE, "kubetrain-operator", ns) or {})["spec"].get("leaseTransitions", 0)

        a.kill()
        killed = time.monotonic()
        wait_until(lambda: holder(ns) == "op-b", LEASE_DURATION + RETRY_PERIOD + 10, "op-b takes over")
        took = time.monotonic() - killed
        lease = get(r.LEASE, "kubetrain-operator", ns) or {}
        assert lease["spec"]["leaseTransitions"] == transitions + 1
        # The dead leader renewed at most RETRY_PERIOD before the kill; the standby checks every RETRY_PERIOD.
        assert took <= LEASE_DURATION + RETRY_PERIOD, f"takeover took {took:.1f}s"
        print(f"takeover after kill -9: {took:.1f}s")

        second = uniq("tj")
        call(lambda c: c.create(trainjob(second, ns, rt)))
        wait_until(lambda: get(r.JOBSET, second, ns), what="JobSet from op-b")
    finally:
        a.stop()
        b.stop()
