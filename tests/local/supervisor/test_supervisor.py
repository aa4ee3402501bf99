"""The local JobSet semantics, end to end with real sandboxed processes (small Python commands, no torch)."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from kubetrain.api import KubetrainError
from kubetrain.local.backend import LocalBackend
from kubetrain.local.supervisor.controller import Supervisor

from ..conftest import condition, container, needs_namespaces, py, rjob, run_to_end, runtime, trainjob

pytestmark = needs_namespaces

CLAIM = {
    "metadata": {"name": "initializer"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
}


def test_initializer_writes_under_its_mount_path_and_trainer_reads_the_same_path(
    backend: LocalBackend, tmp_path: Path
) -> None:
    rt = runtime(
        "init-then-train",
        [
            rjob(
                "dataset-initializer",
                [
                    container(
                        py(
                            "import pathlib; p = pathlib.Path('/workspace/dataset'); p.mkdir();"
                            " (p / 'x.txt').write_text('42')"
                        ),
                        name="dataset-initializer",
                        volumeMounts=[{"name": "initializer", "mountPath": "/workspace"}],
                    )
                ],
                ancestor="dataset-initializer",
            ),
            rjob(
                "node",
                [
                    container(
                        py(
                            "import pathlib; assert pathlib.Path('/workspace/dataset/x.txt').read_text() == '42';"
                            " print('read 42')"
                        ),
                        volumeMounts=[{"name": "initializer", "mountPath": "/workspace"}],
                    )
                ],
                ancestor="trainer",
                depends_on=[("dataset-initializer", "Complete")],
            ),
        ],
        volumeClaimPolicies=[{"templates": [CLAIM]}],
    )
    st = run_to_end(backend, [rt, trainjob("init", "init-then-train")], tmp_path)
    assert condition(st, "Complete") is not None, st
    assert not Path("/workspace/dataset").exists(), "the host's /workspace must never be written"
    logs = "\n".join(backend.logs("init", "default", step="node", follow=False))
    assert "read 42" in logs
    assert [j["succeeded"] for j in st["jobsStatus"]] == [1, 1]


def test_failure_policy_restarts_the_jobset_once_then_completes(
    backend: LocalBackend, tmp_path: Path
) -> None:
    marker = tmp_path / "attempted"
    code = (
        f"import pathlib, sys; m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists():\n    m.write_text('1'); sys.exit(3)\nprint('second attempt ok')"
    )
    rt = runtime(
        "flaky",
        [rjob("node", [container(py(code))], ancestor="trainer", backoff_limit=0)],
        failurePolicy={"maxRestarts": 2},
    )
    st = run_to_end(backend, [rt, trainjob("flaky", "flaky")], tmp_path)
    assert condition(st, "Complete") is not None, st
    assert backend.restarts("flaky", "default") == 1
    events = [e.reason for e in backend.describe_trainjob("flaky", "default").events]
    assert "Restarting" in events


def test_always_failing_worker_ends_failed_reached_max_restarts(
    backend: LocalBackend, tmp_path: Path
) -> None:
    rt = runtime(
        "broken",
        [rjob("node", [container(py("raise SystemExit(1)"))], ancestor="trainer", backoff_limit=0)],
        failurePolicy={"maxRestarts": 2},
    )
    st = run_to_end(backend, [rt, trainjob("broken", "broken")], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "ReachedMaxRestarts"
    assert failed["message"] == "jobset failed due to reaching max number of restarts"
    assert backend.restarts("broken", "default") == 2


def test_without_failure_policy_a_failed_job_fails_the_jobset(backend: LocalBackend, tmp_path: Path) -> None:
    rt = runtime(
        "nofp", [rjob("node", [container(py("raise SystemExit(2)"))], ancestor="trainer", backoff_limit=1)]
    )
    st = run_to_end(backend, [rt, trainjob("nofp", "nofp")], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "FailedJobs"
    step = backend.describe_trainjob("nofp", "default").steps[0]
    # backoffLimit 1: one restart in place (restartPolicy OnFailure), then the Job fails.
    assert (step.state, step.restarts, step.exit_code) == ("Failed", 1, 2)


def test_gang_that_can_never_fit_fails_at_once_naming_the_resource(backend: LocalBackend, tmp_path: Path) -> None:
    big = container(py("print('never')"), resources={"requests": {"cpu": "512"}})
    rt = runtime(
        "huge",
        [rjob("node", [big], ancestor="trainer")],
        ml={"numNodes": 1},
        pod_group={"coscheduling": {"scheduleTimeoutSeconds": 600}},
    )
    st = run_to_end(backend, [rt, trainjob("huge", "huge")], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "Unschedulable", st
    assert failed["message"].startswith(
        "trainjob default/huge can never run on this machine: it needs 512 cpu at once (node: 1 pod × 512 cpu), this"
    ), failed["message"]
    steps = backend.describe_trainjob("huge", "default").steps
    assert [(s.state, s.exit_code) for s in steps] == [("Pending", None)], "no pod of the gang may start"


def test_depends_on_ready_waits_for_the_tcp_readiness_probe(backend: LocalBackend, tmp_path: Path) -> None:
    server = py(
        "import socket, time, os\ntime.sleep(0.5)\n"
        "s = socket.create_server((socket.gethostbyname(socket.gethostname()), 7000))\n"
        "c, _ = s.accept(); c.close()\n"
        "c, _ = s.accept(); c.sendall(b'hello'); c.close()"
    )
    client = py(
        "import socket\nc = socket.create_connection(('tj-server-0-0.tj', 7000))\n"
        "print('got', c.recv(5).decode())"
    )
    rt = runtime(
        "probe",
        [
            rjob("server", [container(server, readinessProbe={"tcpSocket": {"port": 7000}})]),
            rjob("client", [container(client)], ancestor="trainer", depends_on=[("server", "Ready")]),
        ],
    )
    st = run_to_end(backend, [rt, trainjob("tj", "probe")], tmp_path)
    assert condition(st, "Complete") is not None, st
    assert "got hello" in "\n".join(backend.logs("tj", "default", step="client", follow=False))


def test_success_policy_any_stops_the_other_pods(backend: LocalBackend, tmp_path: Path) -> None:
    rt = runtime(
        "any",
        [
            rjob("sleeper", [container(py("import time; time.sleep(600)"))]),
            rjob("node", [container(py("print('done')"))], ancestor="trainer"),
        ],
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["node"]},
    )
    st = run_to_end(backend, [rt, trainjob("any", "any")], tmp_path)
    assert condition(st, "Complete") is not None
    assert {s.name: s.state for s in backend.describe_trainjob("any", "default").steps} == {
        "sleeper-0-0": "Succeeded",
        "node-0-0": "Succeeded",
    }


def test_active_deadline(backend: LocalBackend, tmp_path: Path) -> None:
    rt = runtime("slow", [rjob("node", [container(py("import time; time.sleep(600)"))], ancestor="trainer")])
    st = run_to_end(backend, [rt, trainjob("slow", "slow", activeDeadlineSeconds=1)], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded"
    assert failed["message"] == "TrainJob exceeded its active deadline"


def test_suspend_then_resume(backend: LocalBackend, tmp_path: Path) -> None:
    rt = runtime("quick", [rjob("node", [container(py("print('ran')"))], ancestor="trainer")])
    backend.apply(
        [rt, trainjob("sus", "quick", suspend=True)], namespace="default", workdir=str(tmp_path), detach=False
    )
    sup = Supervisor(backend.store, "default", "sus")
    result: dict[str, object] = {}
    t = threading.Thread(target=lambda: result.update(sup.run()))
    t.start()
    try:
        deadline = time.monotonic() + 60  # a busy machine may take seconds to start a supervisor
        while (tj := backend.get_trainjob("sus", "default")).state != "Suspended" and time.monotonic() < deadline:
            t.join(0.05)
        assert tj.state == "Suspended"
        assert backend.describe_trainjob("sus", "default").steps[0].state == "Pending"
        backend.apply([trainjob("sus", "quick", suspend=False)], namespace="default", workdir=str(tmp_path))
        t.join(60)
    finally:
        sup.terminate("test cleanup")
        t.join(30)
    reasons = [(c["type"], c["reason"]) for c in result["conditions"]]  # type: ignore[union-attr]
    assert reasons == [("Suspended", "Resumed"), ("Complete", "AllJobsCompleted")]


def test_two_trainjobs_at_once_both_bind_the_same_port(kt_home: Path, tmp_path: Path) -> None:
    """Each TrainJob has its own network namespace, so both can use 29500 on the same hostname pattern."""
    code = (
        "import socket, time\ns = socket.create_server(('0.0.0.0', 29500))\n"
        "time.sleep(1.0)\nprint('bound 29500')"
    )
    rt = runtime("port", [rjob("node", [container(py(code))], ancestor="trainer")])
    from kubetrain.local.store.db import Store

    results: dict[str, dict[str, object]] = {}

    def one(name: str) -> None:
        b = LocalBackend(Store())
        b.apply([rt, trainjob(name, "port")], namespace="default", workdir=str(tmp_path), detach=False)
        results[name] = Supervisor(b.store, "default", name).run()

    threads = [threading.Thread(target=one, args=(n,)) for n in ("job-a", "job-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert all(condition(results[n], "Complete") for n in ("job-a", "job-b")), results


def test_a_missing_secret_keeps_the_pod_waiting_with_the_kubelets_reason(
    backend: LocalBackend, tmp_path: Path
) -> None:
    bad = container(
        py("print(1)"), env=[{"name": "T", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]
    )
    rt = runtime("badref", [rjob("node", [bad], ancestor="trainer")])
    # As on a cluster the pod waits for the Secret (nothing applies it here, so the deadline ends the wait).
    st = run_to_end(backend, [rt, trainjob("badref", "badref", activeDeadlineSeconds=2)], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and failed["reason"] == "DeadlineExceeded", st
    pod = backend.store.list_pods("default", "badref")[0]
    assert (pod.message is not None and pod.message.startswith("stopped")) or pod.state == "Pending", pod
    events = [(e.reason, e.message) for e in backend.store.list_events("default", "badref")]
    assert ("Failed", 'pod node-0-0: Error: secret "nope" not found (the pod waits until it exists: apply it '
            "with `kubetrain apply -f`, or mark the reference optional)") in events, events
    assert not any("Traceback" in m for _, m in events)


def test_gpu_nproc_without_gpus_is_a_clear_error(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_GPUS", "0")
    rt = runtime("tgpu", [rjob("node", [container(py("print(1)"))], ancestor="trainer")], ml={"torch": {}})
    st = run_to_end(backend, [rt, trainjob("tgpu", "tgpu", trainer={"numProcPerNode": "gpu"})], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and "numProcPerNode: 'gpu' needs GPUs" in failed["message"], st


def test_gpu_nproc_resolves_from_the_pods_gpus_not_the_machines(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_GPUS", "2")  # the machine has GPUs; the pods ask for none, so they see none
    rt = runtime("tgpu2", [rjob("node", [container(py("print(1)"))], ancestor="trainer")], ml={"torch": {}})
    st = run_to_end(backend, [rt, trainjob("tgpu2", "tgpu2", trainer={"numProcPerNode": "gpu"})], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None, st
    assert "pod node-0-0 asks for no nvidia.com/gpu, so it would see none" in failed["message"], st
    assert "spec.trainer.resourcesPerNode.limits" in failed["message"]


def test_exec_readiness_probe_runs_inside_the_pod(backend: LocalBackend, tmp_path: Path) -> None:
    """The probe sees the pod's own emptyDir at its mountPath, which exists nowhere on the host."""
    server = container(
        py(
            "import pathlib, time\ntime.sleep(0.5)\npathlib.Path('/kt-probe/ready').write_text('y')\ntime.sleep(600)"
        ),
        volumeMounts=[{"name": "scratch", "mountPath": "/kt-probe"}],
        readinessProbe={"exec": {"command": ["test", "-f", "/kt-probe/ready"]}},
    )
    rt = runtime(
        "execprobe",
        [
            rjob("server", [server], volumes=[{"name": "scratch", "emptyDir": {}}]),
            rjob(
                "node",
                [container(py("print('server ready')"))],
                ancestor="trainer",
                depends_on=[("server", "Ready")],
            ),
        ],
        successPolicy={"operator": "All", "targetReplicatedJobs": ["node"]},
    )
    st = run_to_end(backend, [rt, trainjob("ep", "execprobe")], tmp_path)
    assert condition(st, "Complete") is not None, st
    assert not Path("/kt-probe").exists()
    assert "server ready" in "\n".join(backend.logs("ep", "default", step="node", follow=False))


def test_running_the_same_trainjob_twice_is_refused(backend: LocalBackend, tmp_path: Path) -> None:
    rt = runtime(
        "sleepy", [rjob("node", [container(py("import time; time.sleep(600)"))], ancestor="trainer")]
    )
    backend.apply([rt, trainjob("twice", "sleepy")], namespace="default", workdir=str(tmp_path), detach=False)
    with pytest.raises(KubetrainError, match='"twice" already exists in namespace "default" and is running'):
        backend.apply([trainjob("twice", "sleepy")], namespace="default", workdir=str(tmp_path), detach=False)


def test_gpus_are_handed_out_per_pod_with_cuda_visible_devices(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBETRAIN_GPUS", "2")  # pretend two GPUs; nothing here touches a real device
    gpu = container(
        py("import os; print('gpus=' + os.environ['CUDA_VISIBLE_DEVICES'])"),
        resources={"limits": {"nvidia.com/gpu": 1}},
    )
    none = container(py("import os; print('gpus=' + repr(os.environ['CUDA_VISIBLE_DEVICES']))"), name="cpu")
    rt = runtime(
        "gpus",
        [rjob("node", [gpu], ancestor="trainer", parallelism=2), rjob("cpu", [none])],
    )
    st = run_to_end(backend, [rt, trainjob("gpus", "gpus")], tmp_path)
    assert condition(st, "Complete") is not None, st
    seen = {
        s: "\n".join(backend.logs("gpus", "default", step=s, follow=False))
        for s in ("node-0-0", "node-0-1", "cpu-0-0")
    }
    assert sorted([seen["node-0-0"], seen["node-0-1"]]) == ["gpus=0", "gpus=1"]
    assert seen["cpu-0-0"] == "gpus=''"


@pytest.mark.skipif(
    shutil.which("slirp4netns") is None or shutil.which("nft") is None,
    reason="slirp4netns and nft (nftables) not installed (make system-deps)",
)
def test_pods_reach_the_hosts_network_through_outbound_nat(backend: LocalBackend, tmp_path: Path) -> None:
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outbound interface address
        host_ip = probe.getsockname()[0]
    finally:
        probe.close()
    if host_ip.startswith("127."):
        pytest.skip("this machine has no non-loopback address")
    server = socket.create_server((host_ip, 0))
    port = server.getsockname()[1]
    accepted: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            accepted.append(conn.recv(16))

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    code = f"import socket\nsocket.create_connection(({host_ip!r}, {port}), timeout=10).sendall(b'from pod')"
    rt = runtime("outbound", [rjob("node", [container(py(code))], ancestor="trainer")])
    st = run_to_end(backend, [rt, trainjob("outbound", "outbound")], tmp_path)
    t.join(10)
    server.close()
    assert condition(st, "Complete") is not None, st
    assert accepted == [b"from pod"]


def test_jobset_the_local_backend_cannot_run_fails_with_the_field(
    backend: LocalBackend, tmp_path: Path
) -> None:
    from kubetrain.local.supervisor.controller import supervise

    r = rjob("node", [container(py("print(1)"))], ancestor="trainer")
    r["template"]["spec"]["completionMode"] = "NonIndexed"
    backend.apply(
        [runtime("nonidx", [r]), trainjob("nonidx", "nonidx")],
        namespace="default",
        workdir=str(tmp_path),
        detach=False,
    )
    with pytest.raises(KubetrainError, match=r"completionMode: only Indexed is supported locally"):
        supervise(backend.store, "default", "nonidx", install_signals=False)
    failed = backend.get_trainjob("nonidx", "default").condition("Failed")
    assert failed is not None and failed.reason == "PodStartFailed"


@pytest.mark.parametrize(
    ("setting", "value", "named"),
    [
        ("/proc/sys/kernel/unprivileged_userns_clone", "0", "kernel.unprivileged_userns_clone is 0"),
        ("/proc/sys/user/max_user_namespaces", "0", "user.max_user_namespaces is 0"),
    ],
)
def test_without_user_namespaces_nothing_runs_and_one_paragraph_names_the_setting(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, value: str, named: str
) -> None:
    from kubetrain.local.sandbox import namespaces

    real = namespaces._read
    monkeypatch.setattr(namespaces.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(namespaces, "_read", lambda path: value if path == setting else real(path))
    rt = runtime("any-rt", [rjob("node", [container(py("print(1)"))], ancestor="trainer")])
    with pytest.raises(KubetrainError) as err:
        backend.apply([rt, trainjob("nope", "any-rt")], namespace="default", workdir=str(tmp_path))
    text = str(err.value)
    assert named in text and "Fix: `sudo sysctl -w" in text and "or run kubetrain as root" in text
    assert "\n" not in text  # one paragraph
    assert backend.list_trainjobs("default") == []
