"""GPUs as a kubelet gives them, without a GPU: a fake ``nvidia-smi`` on PATH (its real output formats), the
driver's ``information`` files and device nodes in a temporary directory standing in for ``/proc`` and ``/dev``."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.local.backend import LocalBackend
from kubetrain.local.sandbox import gpus, namespaces

from ..conftest import condition, container, needs_namespaces, py, rjob, run_to_end, runtime, trainjob

UUIDS = ["GPU-1c2e6a4b-0d5f-4b8e-9a61-3f7c2d9e8b10", "GPU-9f0a7e3c-62d1-4c55-b1e4-8a2f6d0c7e21"]
# What `nvidia-smi --query-gpu=index,uuid,name,memory.total --format=csv,noheader` and `nvidia-smi -L` print.
QUERY_OUT = "".join(f"{i}, {u}, NVIDIA H100 80GB HBM3, 81559 MiB\n" for i, u in enumerate(UUIDS))
LIST_OUT = "".join(f"GPU {i}: NVIDIA H100 80GB HBM3 (UUID: {u})\n" for i, u in enumerate(UUIDS))


@pytest.fixture
def fake_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Two H100s. Their device minors are the other way round from nvidia-smi's indices, as the driver may number
    them, so a pod must be given ``/dev/nvidia<minor>``, not ``/dev/nvidia<index>``."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    smi = bin_ / "nvidia-smi"
    smi.write_text(
        "#!/bin/sh\n"
        f'case "$*" in\n  *--query-gpu=index,uuid,name,memory.total*) printf %s "{QUERY_OUT}" ;;\n'
        f'  -L) printf %s "{LIST_OUT}" ;;\n  *) exit 6 ;;\nesac\n'
    )
    smi.chmod(0o755)
    proc = tmp_path / "proc-gpus"
    for i, uuid in enumerate(UUIDS):
        d = proc / f"0000:{0x18 + i:02x}:00.0"
        d.mkdir(parents=True)
        (d / "information").write_text(f"Model: \t\t NVIDIA H100\nGPU UUID: \t {uuid}\nDevice Minor: \t {1 - i}\n")
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (dev / name).write_text(name)
    monkeypatch.setenv("PATH", f"{bin_}:{os.environ['PATH']}")
    monkeypatch.delenv(gpus.FAKE_COUNT_ENV, raising=False)
    monkeypatch.setattr(gpus, "PROC_GPUS", str(proc))
    monkeypatch.setattr(gpus, "DEV", str(dev))
    gpus._detected.cache_clear()
    yield dev
    gpus._detected.cache_clear()


def test_the_real_output_formats_are_read() -> None:
    assert gpus.parse_query(QUERY_OUT) == [
        gpus.Gpu(0, UUIDS[0], "NVIDIA H100 80GB HBM3", "81559 MiB"),
        gpus.Gpu(1, UUIDS[1], "NVIDIA H100 80GB HBM3", "81559 MiB"),
    ]
    mig = LIST_OUT + "  MIG 1g.10gb     Device  0: (UUID: MIG-5c8d1f0e-1111-2222-3333-444455556666)\n"
    assert [(g.index, g.uuid) for g in gpus.parse_list(mig)] == [(0, UUIDS[0]), (1, UUIDS[1])]


def test_capacity_and_devices_come_from_nvidia_smi_and_the_driver(fake_gpus: Path) -> None:
    from kubetrain.local.scheduling.resources import Capacity

    assert Capacity.of_machine().gpus == 2
    assert [(g.index, g.uuid, g.minor) for g in gpus.machine_gpus()] == [(0, UUIDS[0], 1), (1, UUIDS[1], 0)]


def test_a_pod_sees_its_gpus_by_uuid_and_only_its_trainjobs_device_nodes(fake_gpus: Path) -> None:
    assert gpus.visible_env((1,)) == {"NVIDIA_VISIBLE_DEVICES": UUIDS[1], "CUDA_VISIBLE_DEVICES": UUIDS[1]}
    assert gpus.visible_env(()) == {"CUDA_VISIBLE_DEVICES": ""}
    own = gpus.device_view(gpus.Grant(own=(0,)))
    assert own is not None
    assert dict(own.nodes) == {
        str(fake_gpus / "nvidia1"): "/dev/nvidia1",  # GPU 0's minor
        str(fake_gpus / "nvidiactl"): "/dev/nvidiactl",
        str(fake_gpus / "nvidia-uvm"): "/dev/nvidia-uvm",
    }
    assert own.hide == {"/dev/nvidia0"}
    with_peer = gpus.device_view(gpus.Grant(own=(0,), peers=(1,)))
    assert with_peer is not None and "/dev/nvidia0" in dict(with_peer.nodes).values() and not with_peer.hide
    none = gpus.device_view(gpus.Grant(own=()))
    assert none is not None and not none.nodes and len(none.hide) == 4


def test_nccl_treats_the_pods_of_a_machine_as_one_host_unless_they_share_a_gpu(tmp_path: Path) -> None:
    env = gpus.nccl_env(gpus.Grant(own=(0,)), str(tmp_path))
    boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert env == {"NCCL_HOSTID": boot_id, "NCCL_CUMEM_ENABLE": "0"}, "no NCCL version found: legacy IPC"
    site = tmp_path / "lib" / "python3.12" / "site-packages"
    (site / "nvidia_nccl_cu13-2.29.2.dist-info").mkdir(parents=True)
    assert gpus.nccl_env(gpus.Grant(own=(0,)), str(tmp_path)) == {
        "NCCL_HOSTID": boot_id,
        "NCCL_IPC_USE_ABSTRACT_SOCKET": "0",
    }
    assert gpus.nccl_env(gpus.Grant(own=(0,), shared=True), str(tmp_path)) == {}
    assert gpus.nccl_env(gpus.Grant(own=()), str(tmp_path)) == {}


REPORT = r"""
import json, os
keys = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "NCCL_HOSTID")
print("SEEN " + json.dumps({
    "env": {k: os.environ.get(k) for k in keys},
    "nvidia": sorted(e for e in os.listdir("/dev") if e.startswith("nvidia")),
    "dev_ok": os.path.exists("/dev/null") and os.path.isdir("/dev/shm"),
}), flush=True)
"""


def _seen(backend: LocalBackend, name: str, step: str) -> dict[str, object]:
    lines = backend.logs(name, "default", step=step, follow=False)
    found = [json.loads(line.split("SEEN ", 1)[1]) for line in lines if "SEEN " in line]
    assert found, lines
    out: dict[str, object] = found[0]
    return out


@needs_namespaces
def test_pods_get_their_own_gpus_device_nodes_and_one_nccl_host(
    backend: LocalBackend, tmp_path: Path, fake_gpus: Path
) -> None:
    gpu = container(py(REPORT), resources={"limits": {"nvidia.com/gpu": 1}})
    rt = runtime("gpus", [rjob("node", [gpu], ancestor="trainer", parallelism=2), rjob("cpu", [container(
        py(REPORT), name="cpu")])])
    st = run_to_end(backend, [rt, trainjob("gpus", "gpus")], tmp_path)
    assert condition(st, "Complete") is not None, st
    a, b, cpu = (_seen(backend, "gpus", s) for s in ("node-0-0", "node-0-1", "cpu-0-0"))
    envs = [a["env"], b["env"]]
    assert sorted(e["NVIDIA_VISIBLE_DEVICES"] for e in envs) == UUIDS  # type: ignore[index]
    assert all(e["CUDA_VISIBLE_DEVICES"] == e["NVIDIA_VISIBLE_DEVICES"] for e in envs)  # type: ignore[index]
    assert a["env"]["NCCL_HOSTID"] == b["env"]["NCCL_HOSTID"] is not None  # type: ignore[index]
    # Each node pod: the control nodes and the GPUs of its TrainJob (its own and its peer's, for NCCL's P2P).
    assert a["nvidia"] == b["nvidia"] == ["nvidia-uvm", "nvidia0", "nvidia1", "nvidiactl"]
    assert cpu == {"env": {"NVIDIA_VISIBLE_DEVICES": None, "CUDA_VISIBLE_DEVICES": "", "NCCL_HOSTID": None},
                   "nvidia": [], "dev_ok": True}
    assert a["dev_ok"] and b["dev_ok"]


@needs_namespaces
def test_a_pod_never_sees_a_gpu_its_trainjob_was_not_given(
    backend: LocalBackend, tmp_path: Path, fake_gpus: Path
) -> None:
    gpu = container(py(REPORT), resources={"limits": {"nvidia.com/gpu": 1}})
    rt = runtime("one", [rjob("node", [gpu], ancestor="trainer")])
    st = run_to_end(backend, [rt, trainjob("one", "one")], tmp_path)
    assert condition(st, "Complete") is not None, st
    seen = _seen(backend, "one", "node-0-0")
    assert seen["env"]["NVIDIA_VISIBLE_DEVICES"] == UUIDS[0]  # type: ignore[index]
    assert seen["nvidia"] == ["nvidia-uvm", "nvidia1", "nvidiactl"]  # GPU 0 is /dev/nvidia1 (its minor)


@needs_namespaces
def test_the_sandbox_leaves_hidden_device_nodes_out_of_the_machines_dev(tmp_path: Path) -> None:
    """What ``device_view`` hides is absent from the pod's ``/dev`` (here ``/dev/zero`` stands for another pod's
    GPU), the rest of the machine's ``/dev`` stays, and the bound nodes appear."""
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n")
    node = tmp_path / "nvidia7"
    node.write_text("x")
    view = gpus.DeviceView(hide=frozenset({"/dev/zero"}), nodes=((str(node), "/dev/nvidia7"),))
    argv = namespaces.bwrap_argv(
        enter=[], hostname="t", binds=[], hosts_file=str(hosts), chdir="/", command=["ls", "-a", "/dev"],
        devices=view,
    )
    seen = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()
    assert "zero" not in seen
    assert {"null", "shm", "pts", "nvidia7"} <= set(seen), seen


@needs_namespaces
def test_a_pod_in_its_image_gets_its_gpu_nodes_and_the_machines_shm(tmp_path: Path) -> None:
    """In its image a pod has a container's minimal ``/dev``: its GPUs' nodes are bound into it, and a pod with GPUs
    of its own shares the machine's ``/dev/shm`` (NCCL's SHM transport between pods); others keep their own."""
    root = tmp_path / "root"
    for d in ("bin", "usr", "lib", "lib64", "etc", "proc", "dev", "sys", "tmp"):
        (root / d).mkdir(parents=True)
    node = tmp_path / "nvidia7"
    node.write_text("x")
    marker = Path("/dev/shm") / f"kubetrain-test-{os.getpid()}"
    marker.write_text("host shm")
    view = gpus.DeviceView(nodes=((str(node), "/dev/nvidia7"),))
    binds = [namespaces.Bind(d, d, True) for d in ("/bin", "/usr", "/lib", "/lib64") if os.path.isdir(d)]
    try:
        def seen(**kw: object) -> list[str]:
            argv = namespaces.bwrap_image_argv(
                merged=str(root), hostname="t", binds=binds, chdir="/", make_chdir=False,
                command=["sh", "-c", "ls -a /dev /dev/shm"], **kw,  # type: ignore[arg-type]
            )
            return subprocess.run(argv, capture_output=True, text=True, check=True).stdout.split()

        with_gpu = seen(devices=view, shared_shm=True)
        assert "nvidia7" in with_gpu and marker.name in with_gpu, with_gpu
        without = seen()
        assert "nvidia7" not in without and marker.name not in without, without
    finally:
        marker.unlink()
