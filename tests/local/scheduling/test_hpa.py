"""The HPA's replica calculation (kubetrain.local.scheduling.hpa) and the /proc sampler it is fed by
(kubetrain.local.scheduling.usage)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.local.scheduling import hpa
from kubetrain.local.scheduling.usage import Sampler


def cpu_utilization(percent: int) -> dict[str, Any]:
    return {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                        "averageUtilization": percent}}}


def pods_metric(name: str, average: str) -> dict[str, Any]:
    return {"type": "Pods", "pods": {"metric": {"name": name}, "target": {"type": "AverageValue",
                                                                          "averageValue": average}}}


def external(name: str, **target: Any) -> dict[str, Any]:
    return {"type": "External", "external": {"metric": {"name": name}, "target": target}}


@pytest.mark.parametrize(
    ("usage_per_pod", "request_per_pod", "pods", "expected"),
    [
        (0.8, 1.0, 2, 2),  # 80 % against 80 %: at target
        (0.85, 1.0, 2, 2),  # ratio 1.0625: inside the 0.1 tolerance
        (0.9, 1.0, 2, 3),  # ratio 1.125: ceil(1.125 * 2) = 3
        (1.6, 2.0, 2, 2),  # the percentage is of the request
        (0.2, 1.0, 4, 1),  # ratio 0.25: ceil(0.25 * 4) = 1
        (0.7, 1.0, 2, 2),  # ratio 0.875: ceil(1.75) = 2
    ],
)
def test_resource_utilization(usage_per_pod: float, request_per_pod: float, pods: int, expected: int) -> None:
    measured = hpa.Measured(value=usage_per_pod, requests=request_per_pod * pods, pods=pods)
    assert hpa.proposal(cpu_utilization(80), measured, pods, hpa.TOLERANCE) == expected


def test_average_value_and_object_metrics() -> None:
    memory = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                             "averageValue": "1Gi"}}}
    assert hpa.proposal(memory, hpa.Measured(value=3 * 2**30, pods=2), 2, 0.1) == 6
    assert hpa.proposal(pods_metric("samples_per_second", "100"), hpa.Measured(value=250, pods=2), 2, 0.1) == 5
    # External AverageValue: the metric spread over the replicas; Value: the metric against the target.
    assert hpa.proposal(external("queue", type="AverageValue", averageValue="10"), hpa.Measured(value=45), 2,
                        0.1) == 5
    assert hpa.proposal(external("queue", type="AverageValue", averageValue="10"), hpa.Measured(value=21), 2,
                        0.1) == 2  # 21 / (10 * 2) within the tolerance
    assert hpa.proposal(external("lag", type="Value", value="500m"), hpa.Measured(value=1.0), 3, 0.1) == 6


def test_an_unmeasured_metric_proposes_nothing() -> None:
    assert hpa.proposal(cpu_utilization(50), hpa.Measured(error="missing request for cpu"), 2, 0.1) is None
    assert hpa.proposal(cpu_utilization(50), hpa.Measured(), 2, 0.1) is None
    scaler = hpa.Autoscaler(1, 8)
    assert scaler.desired(0.0, 3, [None, None]) == 3  # nothing measured: no change


def test_largest_proposal_wins_and_bounds_clamp() -> None:
    scaler = hpa.Autoscaler(2, 6)
    assert scaler.desired(0.0, 3, [2, 5, None]) == 5
    assert hpa.Autoscaler(2, 6).desired(0.0, 3, [40]) == 6  # maxReplicas
    assert hpa.Autoscaler(2, 6, hpa.Behavior(scale_down_window=0)).desired(0.0, 3, [1]) == 2  # minReplicas


def test_scale_down_waits_for_the_stabilization_window() -> None:
    scaler = hpa.Autoscaler(1, 8)  # default: 300 s
    assert scaler.desired(0.0, 4, [4]) == 4
    assert scaler.desired(15.0, 4, [1]) == 4  # the recommendation of 15 s ago (4) still holds
    assert scaler.desired(290.0, 4, [1]) == 4
    assert scaler.desired(301.0, 4, [2]) == 2  # the 4 left the window; the highest since is 2
    # A scale-up is not delayed (scaleUp window 0).
    assert scaler.desired(302.0, 2, [7]) == 6  # and rate-limited: at most max(2 x 2, 2 + 4) per 15 s


def test_scale_up_rate_limit_counts_what_was_added_in_the_period() -> None:
    scaler = hpa.Autoscaler(1, 100)
    assert scaler.desired(0.0, 2, [50]) == 6  # max(100 % of 2, 4 pods) -> 2 + 4
    scaler.applied(0.0, 2, 6)
    assert scaler.desired(5.0, 6, [50]) == 6  # the period started at 2 replicas: still at most 6
    assert scaler.desired(16.0, 6, [50]) == 12  # a new period: 100 % of 6


@given(
    current=st.integers(1, 20),
    proposals=st.lists(st.one_of(st.none(), st.integers(0, 200)), max_size=4),
    lo=st.integers(1, 5),
    span=st.integers(0, 20),
)
def test_desired_stays_within_bounds(current: int, proposals: list[int | None], lo: int, span: int) -> None:
    scaler = hpa.Autoscaler(lo, lo + span, hpa.Behavior(scale_down_window=0))
    got = scaler.desired(0.0, current, proposals)
    if all(p is None for p in proposals):
        assert got == current
    else:
        assert lo <= got <= lo + span


def _tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and its children so far, from /proc (what the sampler reads, independently)."""
    total = 0.0
    pids = [pid]
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            pids += [int(c) for c in f.read().split()]
    except OSError:
        pass
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            pass
    return total


def test_sampler_measures_a_busy_process_tree() -> None:
    # A parent that only waits and a child that spins: the pod's usage is the tree's. On a busy machine the
    # spinner gets what the scheduler gives it, so the test waits for CPU to be used, not for a clock.
    code = "import subprocess,sys; subprocess.run([sys.executable,'-c','while True: pass'])"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    idle = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(600)"],
                            start_new_session=True, stdout=subprocess.PIPE)
    try:
        assert idle.stdout is not None and idle.stdout.readline() == b"ready\n"  # past its start-up
        deadline = time.monotonic() + 60
        while _tree_cpu_seconds(proc.pid) < 0.1:  # the child exists and spins
            assert time.monotonic() < deadline
            time.sleep(0.05)
        sampler = Sampler()
        trees = {"busy": [proc.pid], "idle": [idle.pid]}
        assert sampler.sample(trees, time.monotonic()) == {}  # the first sample has no interval
        start = _tree_cpu_seconds(proc.pid)
        while _tree_cpu_seconds(proc.pid) < start + 0.5:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        usage = sampler.sample(trees, time.monotonic())
        assert usage["busy"].cpu > 0.0 and usage["busy"].cpu > 10 * usage["idle"].cpu, usage
        assert usage["busy"].memory > 1_000_000
        assert sampler.sample({"gone": [2**22 + 7]}, time.monotonic()) == {}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        idle.kill()
        idle.communicate()
