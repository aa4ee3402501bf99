"""Local pod logs read as kubectl reads a container's: tail, since, timestamps, follow; constant memory; bytes as
written. Plain files and a hand-made store stand in for a supervisor, so these run without namespaces."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api import KubetrainError
from kubetrain.api.logtext import lines_of
from kubetrain.api.views import LogChunk, LogOptions, StateChange, StepChange
from kubetrain.local.backend import LocalBackend
from kubetrain.local.logs.index import RECORD, LogClock, TimeIndex, index_path
from kubetrain.local.logs.read import CHUNK, LogReader, tail_offset
from kubetrain.local.sandbox.pods import proc_start_time
from kubetrain.local.store.db import PodRow, Store


def read_all(reader: LogReader) -> str:
    parts = []
    while text := reader.read():
        parts.append(text)
    return "".join(parts) + reader.flush()


def index(log: Path, *records: tuple[int, float]) -> None:
    index_path(log).write_bytes(b"".join(RECORD.pack(size, t) for size, t in records))


@pytest.mark.parametrize("final_newline", [True, False])
def test_tail_counts_lines_across_chunks(tmp_path: Path, final_newline: bool) -> None:
    log = tmp_path / "p.log"
    lines = [("x" * 3000) + f" {i}" for i in range(100)]  # ~300 KB: several chunks
    log.write_text("\n".join(lines) + ("\n" if final_newline else ""))
    with open(log, "rb") as f:
        size = log.stat().st_size
        assert tail_offset(f, size, 0) == size
        assert tail_offset(f, size, 1000) == 0
    for n in (1, 2, 37):
        text = read_all(LogReader(log, tail=n))
        assert text.splitlines() == lines[-n:]


def test_bytes_reach_the_reader_as_written(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    euro = "€".encode()
    # A multi-byte character split across the chunk boundary, carriage returns, invalid UTF-8, no final newline.
    data = b"a" * (CHUNK - 1) + euro + b"\n 10%\r 50%\r100%\n" + b"bad \xff byte\nunfinished"
    log.write_bytes(data)
    reader = LogReader(log)
    first = reader.read()
    assert len(first) == CHUNK - 1  # the half character waits for the next read
    rest = read_all(reader)
    assert first + rest == "a" * (CHUNK - 1) + "€\n 10%\r 50%\r100%\nbad \ufffd byte\nunfinished"


def test_since_and_timestamps_come_from_the_index(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    log.write_bytes(b"one\ntwo\nthree\nfour")
    t0 = 1_767_225_600.0
    index(log, (4, t0), (8, t0 + 10), (14, t0 + 20))  # "four" has no sample yet: its time is the file's mtime
    os.utime(log, (t0 + 30, t0 + 30))
    assert read_all(LogReader(log, since=t0 + 5)) == "two\nthree\nfour"
    assert read_all(LogReader(log, since=t0 + 15)) == "three\nfour"
    assert read_all(LogReader(log, since=t0 + 25)) == "four"
    assert read_all(LogReader(log, since=t0 + 40)) == ""
    assert read_all(LogReader(log, timestamps=True)) == (
        "2026-01-01T00:00:00Z one\n2026-01-01T00:00:10Z two\n2026-01-01T00:00:20Z three\n2026-01-01T00:00:30Z four"
    )
    assert read_all(LogReader(log, tail=2, timestamps=True)) == "2026-01-01T00:00:20Z three\n2026-01-01T00:00:30Z four"
    # Without an index (a log from before indexes existed) the mtime decides everything or nothing.
    index_path(log).unlink()
    assert read_all(LogReader(log, since=t0 + 29)) == "one\ntwo\nthree\nfour"
    assert read_all(LogReader(log, since=t0 + 31)) == ""


def test_log_clock_samples_only_growth_and_at_its_own_pace(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    clock = LogClock(logs, interval=3600)
    (logs / "a.log").write_bytes(b"x\n")
    clock.sample(force=True)
    (logs / "a.log").write_bytes(b"x\ny\n")
    clock.sample()  # within the interval: no sample
    clock.sample(force=True)
    clock.sample(force=True)  # no growth: no record
    clock.close()
    recs = list(RECORD.iter_unpack(index_path(logs / "a.log").read_bytes()))
    assert [size for size, _ in recs] == [2, 4]
    idx = TimeIndex(logs / "a.log")
    assert idx.offset_before(recs[1][1]) == 2
    assert idx.time_for(3) == recs[1][1]
    idx.close()


def test_reading_a_large_log_keeps_memory_constant(tmp_path: Path) -> None:
    log = tmp_path / "big.log"
    line = b"step 123456 loss 0.123456 " + b"x" * 100 + b"\n"
    with open(log, "wb") as f:
        for _ in range(48):
            f.write(line * 8192)  # ~50 MB
    tracemalloc.start()
    try:
        reader = LogReader(log, timestamps=False)
        total = 0
        while text := reader.read():
            total += len(text)
        _, peak = tracemalloc.get_traced_memory()
        assert total == log.stat().st_size
        assert peak < 2 * 1024 * 1024, peak  # a few chunks, not the file
        tracemalloc.reset_peak()
        assert read_all(LogReader(log, tail=3)) == (line * 3).decode()
        _, peak = tracemalloc.get_traced_memory()
        assert peak < 2 * 1024 * 1024, peak
    finally:
        tracemalloc.stop()


def test_a_truncated_log_is_read_again_from_the_start(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    log.write_text("old old old\n")
    reader = LogReader(log)
    assert reader.read() == "old old old\n"
    log.write_text("new\n")
    assert reader.read() == "new\n"


# -- the stream over the store ----------------------------------------------------------------------------------
def jobset(*rjobs: tuple[str, list[str]]) -> dict[str, Any]:
    return {
        "kind": "JobSet",
        "metadata": {"name": "tj"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": name,
                    "replicas": 1,
                    "template": {
                        "spec": {"parallelism": 1, "template": {"spec": {"containers": [{"name": c} for c in cs]}}}
                    },
                }
                for name, cs in rjobs
            ]
        },
    }


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("KUBETRAIN_HOME", str(tmp_path / "home"))
    s = Store()
    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "tj", "namespace": "default", "uid": "u1"},
        "spec": {"runtimeRef": {"name": "rt"}},
    }
    # This process plays the supervisor: alive, so nothing reaps the job while the test writes its logs.
    me = (os.getpid(), proc_start_time(os.getpid()))
    s.create_trainjob(tj, [jobset(("node", ["node"]), ("sidecar", ["a", "b"]))], str(tmp_path), me)
    return s


def pod(store: Store, tmp_path: Path, name: str, state: str = "Running", rjob: str = "node", **kw: Any) -> Path:
    log = tmp_path / f"{name}.log"
    log.touch()
    store.put_pod(
        PodRow("default", "tj", name, rjob, state, None, None, kw.get("exit_code"), 0, kw.get("message"), str(log))
    )
    return log


def finish(store: Store, type_: str = "Complete") -> None:
    row = store.get_trainjob("default", "tj")
    assert row is not None
    row.trainjob["status"] = {
        "conditions": [
            {
                "type": type_,
                "status": "True",
                "reason": "R",
                "message": "m",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]
    }
    store.update_trainjob("default", "tj", row.trainjob)
    store.set_supervisor("default", "tj", None, None)


def test_follow_streams_pods_as_they_appear_and_ends_with_the_job(store: Store, tmp_path: Path) -> None:
    backend = LocalBackend(store)
    items: list[Any] = []
    done = threading.Event()

    def consume() -> None:
        for item in backend.log_stream("tj", "default", LogOptions(follow=True, progress=True)):
            items.append(item)
        done.set()

    log0 = pod(store, tmp_path, "node-0-0")
    log0.write_text("first\n")
    threading.Thread(target=consume, daemon=True).start()
    deadline = time.monotonic() + 10
    while "first" not in "".join(i.text for i in items if isinstance(i, LogChunk)) and time.monotonic() < deadline:
        time.sleep(0.02)
    log1 = pod(store, tmp_path, "node-1-0")
    with open(log1, "a") as f:
        f.write("10%\r")
        f.flush()
        time.sleep(0.3)
        f.write("100%\n")
    with open(log0, "a") as f:
        f.write("second\n")
    time.sleep(0.3)
    store.put_pod(PodRow("default", "tj", "node-1-0", "node", "Succeeded", None, None, 0, 0, None, str(log1)))
    finish(store)
    assert done.wait(10)
    text = {
        s: "".join(i.text for i in items if isinstance(i, LogChunk) and i.step == s) for s in ("node-0-0", "node-1-0")
    }
    assert text == {"node-0-0": "first\nsecond\n", "node-1-0": "10%\r100%\n"}
    # The unfinished progress line reached the reader before its newline did.
    assert LogChunk("node-1-0", "10%\r") in items
    assert any(isinstance(i, StepChange) and i.step == "node-1-0" and i.state == "Succeeded" for i in items)
    assert [i.state.state for i in items if isinstance(i, StateChange)][-1] == "Complete"


def test_once_with_step_container_and_errors(store: Store, tmp_path: Path) -> None:
    backend = LocalBackend(store)
    pod(store, tmp_path, "node-0-0").write_text("a\nb\nc\n")
    pod(store, tmp_path, "sidecar-0-0", rjob="sidecar").write_text("s\n")
    assert list(backend.logs("tj", "default", step="node", follow=False)) == ["a", "b", "c"]
    assert list(lines_of(backend.log_stream("tj", "default", LogOptions(tail=1)))) == [
        "[node-0/0] c",
        "[sidecar-0/0] s",
    ]
    assert list(lines_of(backend.log_stream("tj", "default", LogOptions(step="node-0-0", container="node")))) == [
        "a",
        "b",
        "c",
    ]
    with pytest.raises(KubetrainError, match=r"container 'x' is not in step node-0-0 \(containers: node\)"):
        list(backend.log_stream("tj", "default", LogOptions(step="node", container="x")))
    # Each container of a pod has its own log: the default one (here the first, `a`) is the pod's, the others
    # are beside it.
    (tmp_path / "sidecar-0-0.b.log").write_text("from b\n")
    sidecar = LogOptions(step="sidecar")
    assert list(lines_of(backend.log_stream("tj", "default", sidecar))) == ["s"]
    assert list(lines_of(backend.log_stream("tj", "default", replace(sidecar, container="a")))) == ["s"]
    assert list(lines_of(backend.log_stream("tj", "default", replace(sidecar, container="b")))) == ["from b"]
    assert list(lines_of(backend.log_stream("tj", "default", replace(sidecar, all_containers=True)))) == [
        "[sidecar-0/0/a] s",
        "[sidecar-0/0/b] from b",
    ]
    with pytest.raises(KubetrainError, match=r"no step 'launcher' in TrainJob tj \(replicated jobs: node, sidecar"):
        list(backend.log_stream("tj", "default", LogOptions(step="launcher")))
    with pytest.raises(
        KubetrainError, match=r"trainjob \"tjj\" not found in namespace \"default\" \(did you mean 'tj'\?\)"
    ):
        list(backend.log_stream("tjj", "default", LogOptions()))


def test_describe_shows_the_failed_steps_last_lines(store: Store, tmp_path: Path) -> None:
    backend = LocalBackend(store)
    pod(store, tmp_path, "node-0-0", state="Failed", exit_code=1).write_text(
        "".join(f"line {i}\n" for i in range(50)) + "ValueError: bad\n"
    )
    d = backend.describe_trainjob("tj", "default")
    assert d.failure_logs["node-0-0"][-1] == "ValueError: bad"
    assert len(d.failure_logs["node-0-0"]) == 20
    assert d.state is not None and d.state.state == "Pending" and "exit code 1" in d.state.message


def test_follow_ends_with_the_reason_when_the_supervisor_died(store: Store, tmp_path: Path) -> None:
    backend = LocalBackend(store)
    pod(store, tmp_path, "node-0-0").write_text("working\n")
    store.set_supervisor("default", "tj", 2**22 + 12345, "0")  # a pid that is not running (kill -9)
    items = list(backend.log_stream("tj", "default", LogOptions(follow=True, progress=True)))
    final = [i.state for i in items if isinstance(i, StateChange)][-1]
    assert (final.state, final.reason) == ("Failed", "SupervisorLost")
    assert LogChunk("node-0-0", "working\n") in items
