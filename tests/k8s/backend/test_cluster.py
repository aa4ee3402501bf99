"""The cluster backend of the CLI verbs, against the fake API server (on a background thread)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubetrain.api import KubetrainError
from kubetrain.k8s.backend.cluster import ClusterBackend
from tests.k8s.helpers import torch_runtime, trainjob
from tests.k8s.threaded import background_api


def pod(name: str, rjob: str, index: int, phase: str = "Running") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"job-{rjob}-0-{index}-abcde",
            "namespace": "default",
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": name,
                "jobset.sigs.k8s.io/replicatedjob-name": rjob,
                "jobset.sigs.k8s.io/job-index": "0",
                "batch.kubernetes.io/job-completion-index": str(index),
            },
        },
        "spec": {"containers": [{"name": "node", "image": "x"}]},
        "status": {"phase": phase, "containerStatuses": [{"name": "node", "restartCount": 1}]},
    }


def test_apply_get_list_delete_and_runtimes(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        applied = backend.apply([trainjob("job"), torch_runtime()], namespace="default")
        assert applied == ["clustertrainingruntime/torch-distributed", "trainjob/job"]
        assert [t.name for t in backend.list_trainjobs("default")] == ["job"]
        assert [t.name for t in backend.list_trainjobs(None)] == ["job"]
        assert backend.get_trainjob("job", "default").spec.runtime_ref.name == "torch-distributed"
        assert [rt.name for rt in backend.list_runtimes("default")] == ["torch-distributed"]
        # Applying again is idempotent (server-side apply).
        backend.apply([trainjob("job")], namespace="default")
        backend.delete_trainjob("job", "default")
        with pytest.raises(
            KubetrainError, match=r'trainjobs\.trainer\.kubeflow\.org "job" not found in namespace default'
        ):
            backend.get_trainjob("job", "default")


def test_operator_creates_jobset_and_describe_shows_steps_and_events(tmp_path: Path) -> None:
    with background_api(tmp_path, operator=True) as (bg, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([torch_runtime(), trainjob("job", trainer={"numNodes": 2})], namespace="default")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if bg.api.store.list("jobset.x-k8s.io", "jobsets", "default")[0]:
                break
            time.sleep(0.02)
        for i in range(2):
            bg.call(_create(bg, pod("job", "node", i)))
        details = backend.describe_trainjob("job", "default")
        assert [s.name for s in details.steps] == ["node-0-0", "node-0-1"]
        assert details.steps[0].state == "Running" and details.steps[0].restarts == 1
        assert details.extra["JobSet"] == "job (suspend=false; conditions: none)"


async def _create(bg, obj: dict) -> None:
    # Pods have a status subresource: the phase is written separately, as the kubelet does.
    created = bg.api.store.create("", "pods", "default", obj, "test")
    created["status"] = obj["status"]
    bg.api.store.replace("", "pods", "default", obj["metadata"]["name"], created, "kubelet", "status")


def test_logs_single_step_and_prefixed_multi_step(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([trainjob("job")], namespace="default")
        for i in range(2):
            bg.call(_create(bg, pod("job", "node", i)))
            bg.api.store.logs[("default", f"job-node-0-{i}-abcde")] = f"hello from {i}\nbye {i}\n"
        bg.call(_create(bg, pod("job", "node", 2, phase="Pending")))
        assert list(backend.logs("job", "default", step="node-0-1", follow=False)) == [
            "hello from 1",
            "bye 1",
        ]
        lines = list(backend.logs("job", "default", step=None, follow=False))
        assert sorted(lines) == sorted(
            ["[node-0/0] hello from 0", "[node-0/0] bye 0", "[node-0/1] hello from 1", "[node-0/1] bye 1"]
        )
        with pytest.raises(KubetrainError, match="no log yet: no pod of TrainJob default/job step launcher"):
            list(backend.logs("job", "default", step="launcher", follow=False))


def test_admission_denial_message_reaches_the_user(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        bg.api.inject("PATCH", "/trainjobs/job", 403, times=1)
        backend = ClusterBackend(kubeconfig, None)
        with pytest.raises(KubetrainError, match=r"apply TrainJob default/job: injected \(403"):
            backend.apply([trainjob("job")], namespace="default")


def test_missing_kubeconfig_context_is_a_clean_error(tmp_path: Path) -> None:
    with (
        background_api(tmp_path) as (_, kubeconfig),
        pytest.raises(KubetrainError, match="no context named 'prod'"),
    ):
        ClusterBackend(kubeconfig, "prod")


@pytest.fixture(autouse=True)
def _python_sigint() -> None:
    """Python's own SIGINT handler, as a command starts with (the backend takes over only from that one)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _interrupt_when(started: threading.Event) -> threading.Thread:
    """Ctrl-C to this process once ``started`` is set (from inside the loop, so the loop is running then)."""

    def go() -> None:
        assert started.wait(30)
        os.kill(os.getpid(), signal.SIGINT)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread


def test_ctrl_c_while_a_stream_waits_cancels_it_and_cleans_up(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        started, cleaned = threading.Event(), []

        async def stream() -> AsyncIterator[int]:
            try:
                yield 1
                started.set()
                await asyncio.Event().wait()  # a watch with nothing to say
                yield 2
            finally:
                cleaned.append("closed")

        items = backend._iterate(stream(), "a stream")
        assert next(items) == 1
        thread = _interrupt_when(started)
        with pytest.raises(KeyboardInterrupt):
            next(items)
        thread.join()
        assert cleaned == ["closed"]
        # Python's own handler is back: Ctrl-C outside the loop raises as usual.
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        backend.close()


def test_ctrl_c_leaves_even_when_a_clean_up_never_ends(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.CLEANUP_TIMEOUT = 0.5
        started = threading.Event()

        async def stubborn() -> AsyncIterator[int]:
            started.set()
            try:
                await asyncio.Event().wait()
            finally:
                # A clean-up that waits on a peer that never answers (a half-read stream, a stuck connection).
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.Event().wait()
                await asyncio.Event().wait()
            yield 0

        thread = _interrupt_when(started)
        t0 = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            next(backend._iterate(stubborn(), "a stream"))
        thread.join()
        # Bounded by the two clean-up waits (the step, then the generator's close), not by the peer.
        assert time.monotonic() - t0 < 20


def test_ctrl_c_during_a_single_call_raises_keyboard_interrupt(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        started = threading.Event()

        async def slow_call() -> int:
            started.set()
            await asyncio.Event().wait()
            return 0

        thread = _interrupt_when(started)
        with pytest.raises(KeyboardInterrupt):
            backend._run(slow_call())
        thread.join()
        assert backend._run(asyncio.sleep(0, result=7)) == 7  # the loop is still usable
        backend.close()
