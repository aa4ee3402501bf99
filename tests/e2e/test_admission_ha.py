"""Admission never drops (docs/webhook.md#availability), on a cluster with nodes and kubetrain installed from
``manifests/overlays`` (installed here when it is not): TrainJob creates every 50 ms (server-side dry run, never
retried) while one operator pod is force-deleted, the Deployment is restarted, and one pod is evicted with the
second eviction refused by the PodDisruptionBudget. Not one create may be refused, and one replica leads throughout.

``bench/admission_ha.py`` measures the same and writes the numbers to BENCHMARKS.md.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubetrain.testing import cluster
from tests.e2e.conftest import REPO, kubectl, uniq

pytestmark = pytest.mark.e2e

SETTLE = 3.0  # seconds of load after each recovery: a late refusal would land here


@pytest.fixture(scope="module")
def installed(kubeconfig: str) -> str:
    """This checkout's ``manifests/overlays`` applied as docs/install.md says (whatever was installed before), every
    replica Ready. The image is the one the node has under the manifests' name: import this checkout's first
    (``make image``, then ``ctr -n k8s.io images import``)."""
    cluster.install(kubeconfig, REPO / "manifests")
    try:
        cluster.wait_all_ready(kubeconfig, 240)
    except RuntimeError as exc:
        pytest.fail(f"{exc}: is the operator image imported into the node's runtime? (docs/install.md)")
    return kubeconfig


@pytest.fixture
def load_namespace(installed: str) -> Iterator[str]:
    ns = uniq("kt-e2e-adm")
    kubectl("create", "namespace", ns)
    yield ns
    kubectl("delete", "namespace", ns, "--wait=false", check=False)


LEASE_HANDOVER = 15.0 + 2.0 + 5.0  # lease duration + retry period + margin for a busy node


def one_leader(kubeconfig: str) -> None:
    """Exactly one replica leads, and it is the Lease's holder. Right after a replica went away the Lease may be
    between holders for up to a lease duration (a released one is taken within the 2 s retry period), so this
    waits for a leader; two leaders at once fail at the first sight."""
    deadline = time.monotonic() + LEASE_HANDOVER
    while True:
        gauges = cluster.leaders(kubeconfig)
        leading = [name for name, value in gauges.items() if value == 1]
        assert len(leading) <= 1, f"two leaders: {gauges}"
        if leading:
            holder = cluster.lease_holder(kubeconfig)
            assert holder.startswith(f"{leading[0]}_"), (holder, leading)
            return
        assert time.monotonic() < deadline, f"no leader {LEASE_HANDOVER:.0f}s after the disruption: {gauges}"
        time.sleep(0.5)


def test_no_create_is_refused_through_a_kill_an_upgrade_and_a_drain(installed: str, load_namespace: str) -> None:
    kc = installed
    want, _ = cluster.replicas(kc)
    assert want >= 2, "the default install runs the webhook on two replicas"
    one_leader(kc)
    load = cluster.AdmissionLoad(kc, load_namespace, interval=0.05)
    notes: list[str] = []
    with load.in_background():
        time.sleep(1.0)

        cluster.force_delete_one(kc)
        cluster.wait_all_ready(kc)
        time.sleep(SETTLE)
        one_leader(kc)

        cluster.rolling_restart(kc)
        cluster.wait_all_ready(kc)
        time.sleep(SETTLE)
        one_leader(kc)

        first, second = (p["metadata"]["name"] for p in cluster.operator_pods(kc)[:2])
        evicted, message = cluster.evict(kc, first)
        assert evicted, message
        evicted, message = cluster.evict(kc, second)
        notes.append(message)
        assert not evicted and "disruption budget" in message, "the PDB must keep one replica through a drain"
        cluster.wait_all_ready(kc)
        time.sleep(SETTLE)
        one_leader(kc)
    answers = load.answers
    refused = cluster.AdmissionLoad.refused(answers)
    assert len(answers) > 100, f"the load ran: {len(answers)} creates"
    assert refused == [], f"{len(refused)} of {len(answers)} creates refused: {cluster.AdmissionLoad.reasons(answers)}"
