"""Pods in their real image, end to end on this machine (as root here; ``test_rootless`` runs one as an ordinary
user): the image's root filesystem with a writable layer per container, its Env/WorkingDir/User and
Entrypoint/Cmd by the kubelet's rules, the files a kubelet writes, readOnlyRootFilesystem, runAsNonRoot against the
image's user, and a pod that waits for its image (ErrImageNeverPull) and starts once it is loaded."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from kubetrain.local.backend import LocalBackend
from kubetrain.local.pod_objects import pod_status_column
from kubetrain.local.store.db import Store
from kubetrain.local.supervisor.controller import Supervisor

from ..conftest import condition, needs_namespaces, rjob, run_to_end, runtime, trainjob
from ..images.conftest import load
from ..images.testimage import SmallImage

pytestmark = needs_namespaces
IMAGE = "localhost/kubetrain-test:1"


def _in_image(name: str, pods: int = 1, **container: Any) -> list[dict[str, Any]]:
    c = {"name": "node", "image": IMAGE, **container}
    return [runtime(f"rt-{name}", [rjob("node", [c], ancestor="trainer", parallelism=pods)]),
            trainjob(name, f"rt-{name}")]


def _log(backend: LocalBackend, name: str) -> str:
    return "\n".join(backend.logs(name, "default", step=None, follow=False))


def test_the_images_cmd_env_and_working_directory(backend: LocalBackend, image_archive: Path, tmp_path: Path) -> None:
    load(image_archive)
    status = run_to_end(backend, _in_image("cmd"), tmp_path)
    assert condition(status, "Complete"), status
    assert "default-cmd" in _log(backend, "cmd")
    events = [e for e in backend.store.list_events("default", "cmd") if e.reason == "LocalImages"]
    assert events and f"{IMAGE}: the image (" in events[0].message


def test_inside_the_image(backend: LocalBackend, image_archive: Path, tmp_path: Path) -> None:
    stored = load(image_archive)
    script = (
        'echo "id=$(id -u):$(id -g) pwd=$(pwd) home=$HOME greeting=$GREETING arg=$0 host=$(cat /etc/hostname)"; '
        "ls /opt/old; test -e /etc/removed && echo WHITEOUT-BROKEN; grep -c svc.cluster.local /etc/hosts; "
        "head -1 /etc/resolv.conf; echo layer > /etc/written && cat /etc/written; test -e /usr/bin/python3 || "
        "echo no-host-files; /app/hello.sh"
    )
    manifests = _in_image("inside", pods=2, command=["sh", "-c", script, "$(GREETING)"],
                          env=[{"name": "GREETING", "value": "from-the-pod"}])
    status = run_to_end(backend, manifests, tmp_path)
    assert condition(status, "Complete"), status
    out = _log(backend, "inside")
    lines = [x.split("] ", 1)[-1] for x in out.splitlines()]
    assert "id=0:0 pwd=/app home=/root greeting=from-the-pod arg=from-the-pod host=inside-node-0-0" in out
    assert "c" in lines and "a" not in lines and "WHITEOUT-BROKEN" not in out
    assert "search default.svc.cluster.local svc.cluster.local cluster.local" in out
    assert "layer" in out and "no-host-files" in out and "hello from the image: from-the-pod" in out
    # What a container writes lands in its own writable layer: the image's layers and the other pod are untouched.
    assert not any((d / "etc" / "written").exists() for d in stored.layer_dirs())
    uppers = sorted((backend.logs_dir("inside", "default").parent / "pods").glob("*/attempt-0/rootfs/node/upper"))
    assert len(uppers) == 2 and all((u / "etc" / "written").read_text() == "layer\n" for u in uppers)


def test_read_only_root_filesystem_and_run_as_non_root_against_the_images_user(
    backend: LocalBackend, image_archive: Path, tmp_path: Path
) -> None:
    load(image_archive)
    ro = {"readOnlyRootFilesystem": True}
    status = run_to_end(backend, _in_image("ro", command=["sh", "-c", "touch /x || echo read-only"],
                                           securityContext=ro), tmp_path)
    assert condition(status, "Complete") and "read-only" in _log(backend, "ro")
    status = run_to_end(backend, _in_image("nonroot", securityContext={"runAsNonRoot": True}), tmp_path)
    message = condition(status, "Failed")["message"]  # type: ignore[index]
    assert "CreateContainerConfigError: container has runAsNonRoot and image will run as root" in message


def test_the_images_named_user_and_a_non_numeric_user_with_run_as_non_root(
    backend: LocalBackend, tmp_path: Path, kt_home: Path
) -> None:
    load(SmallImage(config={"User": "trainer"}).docker_archive(tmp_path / "u.tar"))
    status = run_to_end(backend, _in_image("named", command=["sh", "-c", "echo $(id -u):$(id -G) $HOME"]), tmp_path)
    assert condition(status, "Complete") and "1000:1000 50 /home/trainer" in _log(backend, "named")
    status = run_to_end(backend, _in_image("named2", securityContext={"runAsNonRoot": True}), tmp_path)
    message = condition(status, "Failed")["message"]  # type: ignore[index]
    assert "image has non-numeric user (trainer), cannot verify user is non-root" in message


def test_a_pod_waits_for_its_image_and_starts_once_it_is_loaded(
    backend: LocalBackend, image_archive: Path, tmp_path: Path, kt_home: Path
) -> None:
    (kt_home / "images.yaml").write_text(f'"{IMAGE}": image\n')
    names = backend.apply(_in_image("waits", imagePullPolicy="Never"), namespace="default", workdir=str(tmp_path),
                          detach=False)
    assert "trainjob/waits created" in names
    result: dict[str, Any] = {}
    worker = threading.Thread(target=lambda: result.update(Supervisor(Store(), "default", "waits").run()))
    worker.start()
    try:
        deadline = time.monotonic() + 60
        pod = None
        while time.monotonic() < deadline:
            pod = next(iter(backend.store.list_pods("default", "waits")), None)
            if pod is not None and (pod.message or "").startswith("ErrImageNeverPull"):
                break
            time.sleep(0.1)
        assert pod is not None and pod.state == "Pending", pod
        assert f'Container image "{IMAGE}" is not present with pull policy of Never' in (pod.message or "")
        described = backend.describe_trainjob("waits", "default")
        assert "ErrImageNeverPull" in str(described)
        assert pod_status_column(pod) == "ErrImageNeverPull"  # kubectl get pods' STATUS
        load(image_archive)
    finally:
        worker.join(120)
    assert condition(result, "Complete"), result


def test_a_program_the_image_lacks_is_exit_127_naming_the_image(
    backend: LocalBackend, image_archive: Path, tmp_path: Path
) -> None:
    load(image_archive)
    status = run_to_end(backend, _in_image("nopython", command=["python3", "-c", "pass"]), tmp_path)
    assert condition(status, "Failed")
    pod = backend.store.list_pods("default", "nopython")[0]
    assert pod.exit_code == 127 and (pod.message or "").startswith("StartError: ")
    assert 'exec: "python3": executable file not found in $PATH (the image localhost/kubetrain-test:1 does not ' \
           "have it in any of /bin" in (pod.message or ""), pod.message


def test_exec_readiness_probes_run_inside_the_image(backend: LocalBackend, image_archive: Path, tmp_path: Path) -> None:
    load(image_archive)
    server = {"name": "server", "image": IMAGE, "command": ["sh", "-c", "touch /tmp/ready; sleep 2"],
              "readinessProbe": {"exec": {"command": ["test", "-e", "/tmp/ready"]}}}
    node = {"name": "node", "image": IMAGE, "command": ["sh", "-c", "echo after-ready"]}
    rt = runtime("rt-probe", [rjob("server", [server]),
                              rjob("node", [node], ancestor="trainer", depends_on=[("server", "Ready")])])
    status = run_to_end(backend, [rt, trainjob("probe", "rt-probe")], tmp_path)
    assert condition(status, "Complete"), status
    assert "after-ready" in _log(backend, "probe")
