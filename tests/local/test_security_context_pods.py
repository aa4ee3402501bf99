"""securityContext on real pods, as root: the ids, groups and capabilities a process ends up with, read-only
root filesystems, runAsNonRoot refusals shown like the kubelet's, privileged and hostPath admission, exec probes
run as the container, and the restricted torch runtime training with all of it applied.

As root, ``runAsUser`` is the real host uid (what a kubelet does): the process has exactly that user's rights.
The ordinary-user side (ids inside the pod's user namespace) is in ``test_security_context_rootless``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api.logtext import lines_of
from kubetrain.api.views import LogOptions
from kubetrain.local.backend import LocalBackend
from kubetrain.local.sandbox import security_context as sc
from kubetrain.local.supervisor.controller import Supervisor

from .conftest import condition, needs_namespaces, needs_torch, trainjob

pytestmark = [
    needs_namespaces,
    pytest.mark.skipif(os.geteuid() != 0, reason="root-mode securityContext (host ids): needs root (CI runs as root)"),
]

UID = 54321  # no passwd entry: default gid 0, no /etc/group memberships, HOME "/"

# Prints what the process is: ids, capabilities, and which paths it could write.
PROBE = textwrap.dedent(
    """
    import json, os, sys
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    wrote = {}
    for p in sys.argv[1:]:
        try:
            with open(p, "w") as f:
                f.write("x")
            wrote[p] = "ok"
        except OSError as e:
            wrote[p] = e.strerror
    print("PROBE " + json.dumps({
        "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": sorted(os.getgroups()),
        "CapEff": status["CapEff"].strip(), "CapBnd": status["CapBnd"].strip(),
        "NoNewPrivs": status["NoNewPrivs"].strip(), "home": os.environ.get("HOME"), "wrote": wrote,
    }))
    """
)


def cmd(*paths: str) -> list[str]:
    return [sys.executable, "-c", PROBE, *paths]


def runtime_with(pod: dict[str, Any], name: str = "sc") -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                                "spec": {"backoffLimit": 0, "template": {"spec": pod}},
                            },
                        }
                    ]
                }
            }
        },
    }


def workdir(tmp_path: Path) -> Path:
    """A working directory any uid may read, as an image's files are (pytest's own are 0700)."""
    wd = tmp_path / "wd"
    wd.mkdir(mode=0o755)
    wd.chmod(0o755)
    return wd


def run(backend: LocalBackend, pod: dict[str, Any], wd: Path, name: str = "sc") -> dict[str, Any]:
    backend.apply([runtime_with(pod, name), trainjob(name, name)], namespace="default", workdir=str(wd), detach=False)
    return Supervisor(backend.store, "default", name).run()


def probes(backend: LocalBackend, name: str = "sc") -> list[dict[str, Any]]:
    """What each container printed (each container has its own log: all of them are read)."""
    stream = backend.log_stream(name, "default", LogOptions(all_containers=True))
    return [json.loads(line.partition("PROBE ")[2]) for line in lines_of(stream) if "PROBE {" in line]


def mask(caps: frozenset[str]) -> str:
    return f"{sum(1 << sc.ALL_CAPS.index(c) for c in caps):016x}"


def own_bounding() -> frozenset[str]:
    return sc.cap_mask(Path("/proc/self/status").read_text(), "CapBnd")


def test_run_as_user_groups_capabilities_and_read_only_root(backend: LocalBackend, tmp_path: Path) -> None:
    wd = workdir(tmp_path)
    pod = {
        "securityContext": {"runAsUser": UID, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000]},
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "persistentVolumeClaim": {"claimName": "c"}}],
        "containers": [
            {
                "name": "node",
                "image": "python",
                "command": cmd("/tmp/kt-sc-probe", "/etc/kt-sc-probe", "/data/f", "/cache/f", f"{wd}/f"),
                "securityContext": {
                    "readOnlyRootFilesystem": True,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                },
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cache", "mountPath": "/cache"}],
            },
            # The container's runAsUser wins over the pod's; without readOnlyRootFilesystem the root is writable
            # as far as that uid may write (not /etc).
            {
                "name": "side",
                "image": "python",
                "command": cmd("/etc/kt-sc-probe"),
                "securityContext": {"runAsUser": UID + 1},
            },
        ],
    }
    status = run(backend, pod, wd)
    assert condition(status, "Complete") is not None, status
    got = probes(backend)
    node = next(v for v in got if v["uid"] == UID)
    assert {k: node[k] for k in ("uid", "euid", "gid", "groups", "home")} == {
        "uid": UID, "euid": UID, "gid": 3000, "groups": [2000, 4000], "home": "/",
    }
    assert node["CapEff"] == "0" * 16, "a non-root process has no effective capabilities"
    assert node["CapBnd"] == mask(frozenset({"NET_BIND_SERVICE"}))
    assert node["NoNewPrivs"] == "1"
    assert node["wrote"] == {
        "/tmp/kt-sc-probe": "Read-only file system",  # /tmp is the root filesystem unless it is a volume
        "/etc/kt-sc-probe": "Read-only file system",
        "/data/f": "ok",
        "/cache/f": "ok",  # fsGroup: the claim is group-writable
        f"{wd}/f": "Read-only file system",
    }
    side = next(v for v in got if v["uid"] == UID + 1)
    assert side["gid"] == 3000 and side["wrote"] == {"/etc/kt-sc-probe": "Permission denied"}
    assert side["CapEff"] == "0" * 16 and side["CapBnd"] == mask(sc.DEFAULT_CAPS & own_bounding())
    assert not Path("/tmp/kt-sc-probe").exists() and not Path("/etc/kt-sc-probe").exists()
    # On the host: files belong to the pod's uid and, through the setgid volume, to its fsGroup.
    claim = kt_path(backend) / "volumes" / "default" / "sc" / "c"
    st = (claim / "f").stat()
    assert (st.st_uid, st.st_gid) == (UID, 2000)
    assert claim.stat().st_mode & 0o7777 == 0o2775 and claim.stat().st_gid == 2000
    empty = next((kt_path(backend) / "trainjobs").glob("default/sc-*/pods/node-0-0/attempt-0/volumes/data"))
    assert empty.stat().st_mode & 0o7777 == 0o2777 and (empty / "f").stat().st_uid == UID


def kt_path(backend: LocalBackend) -> Path:
    return Path(os.environ["KUBETRAIN_HOME"])


def test_a_pod_without_security_context_runs_as_root_with_the_runtime_default_capabilities(
    backend: LocalBackend, tmp_path: Path
) -> None:
    pod = {"containers": [{"name": "node", "image": "python", "command": cmd()}]}
    assert condition(run(backend, pod, workdir(tmp_path)), "Complete") is not None
    (got,) = probes(backend)
    assert (got["uid"], got["gid"]) == (0, 0)
    default = mask(sc.DEFAULT_CAPS & own_bounding())
    assert (got["CapEff"], got["CapBnd"], got["NoNewPrivs"]) == (default, default, "1")


def test_run_as_non_root_is_a_create_container_config_error(backend: LocalBackend, tmp_path: Path) -> None:
    pod = {"securityContext": {"runAsNonRoot": True}, "containers": [{"name": "node", "image": "p", "command": cmd()}]}
    status = run(backend, pod, workdir(tmp_path), name="nonroot")
    uid = backend.store.get_trainjob("default", "nonroot").uid  # type: ignore[union-attr]
    kubelet = (
        f'container has runAsNonRoot and image will run as root (pod: "nonroot-node-0-0_default({uid})", '
        "container: node)"
    )
    failed = condition(status, "Failed")
    assert failed is not None and failed["reason"] == "PodStartFailed"
    assert failed["message"] == f"pod node-0-0: CreateContainerConfigError: {kubelet}"
    d = backend.describe_trainjob("nonroot", "default")
    (step,) = d.steps
    assert (step.state, step.reason, step.message) == ("Pending", "CreateContainerConfigError", kubelet)
    assert any(e.reason == "Failed" and e.message == f"pod node-0-0: Error: {kubelet}" for e in d.events)
    assert not probes(backend, "nonroot"), "the container never started"


def test_run_as_non_root_in_get_and_describe(tmp_path: Path, kt_home: Path) -> None:
    wd = workdir(tmp_path)
    pod = {
        "securityContext": {"runAsNonRoot": True},
        "containers": [{"name": "node", "image": "p", "command": cmd(), "securityContext": {"runAsUser": 0}}],
    }
    (wd / "job.yaml").write_text(yaml.safe_dump_all([runtime_with(pod, "nr0"), trainjob("nr0", "nr0")]))
    kt = [sys.executable, "-m", "kubetrain.cli.main"]
    r = subprocess.run([*kt, "run", "-f", "job.yaml"], cwd=wd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    policy = "container's runAsUser breaks non-root policy"
    assert f"step node-0-0: Pending (CreateContainerConfigError: {policy}" in r.stderr
    get = subprocess.run([*kt, "get", "trainjobs", "-o", "wide"], capture_output=True, text=True, timeout=60)
    row = next(line for line in get.stdout.splitlines() if line.startswith("nr0 "))
    assert "Failed" in row and "PodStartFailed" in row and f"CreateContainerConfigError: {policy}" in row
    desc = subprocess.run([*kt, "describe", "trainjob", "nr0"], capture_output=True, text=True, timeout=60)
    steps = desc.stdout.split("Steps:")[1].split("Conditions:")[0]
    assert "Pending" in steps and f"CreateContainerConfigError: {policy}" in " ".join(steps.split())


def test_privileged_is_refused_at_submit_unless_allowed(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sc.PRIVILEGED_ENV, raising=False)
    pod = {
        "containers": [
            {
                "name": "node",
                "image": "p",
                "command": [*cmd(), "--", "/sys/kernel/kt-sc-probe"],
                "securityContext": {"privileged": True},
            }
        ]
    }
    with pytest.raises(sc.SecurityContextError) as e:
        run(backend, pod, workdir(tmp_path), name="priv")
    assert "containers[node].securityContext.privileged: privileged containers are refused by default" in str(e.value)
    assert backend.store.get_trainjob("default", "priv") is None, "nothing is recorded"
    monkeypatch.setenv(sc.PRIVILEGED_ENV, "1")  # what `kubetrain run --allow-privileged` sets
    status = run(backend, pod, tmp_path / "wd", name="priv")
    assert condition(status, "Complete") is not None, status
    (got,) = probes(backend, "priv")
    assert got["CapBnd"] == got["CapEff"] == mask(own_bounding())


def test_allow_privileged_flag_of_run(tmp_path: Path, kt_home: Path) -> None:
    wd = workdir(tmp_path)
    pod = {"containers": [{"name": "node", "image": "p", "command": cmd(), "securityContext": {"privileged": True}}]}
    (wd / "job.yaml").write_text(yaml.safe_dump_all([runtime_with(pod, "pf"), trainjob("pf", "pf")]))
    kt = [sys.executable, "-m", "kubetrain.cli.main"]
    env = {k: v for k, v in os.environ.items() if k != sc.PRIVILEGED_ENV}
    r = subprocess.run([*kt, "run", "-f", "job.yaml"], cwd=wd, capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 1 and "pass --allow-privileged to `kubetrain run`" in " ".join(r.stderr.split())
    r = subprocess.run(
        [*kt, "run", "-f", "job.yaml", "--allow-privileged"], cwd=wd, capture_output=True, text=True, timeout=120,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr


def test_host_path_only_below_allowed_directories(backend: LocalBackend, tmp_path: Path, kt_home: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "in.txt").write_text("from the host")
    pod = {
        "volumes": [{"name": "host", "hostPath": {"path": str(data), "type": "Directory"}}],
        "containers": [
            {
                "name": "node",
                "image": "p",
                "command": [sys.executable, "-c", "print('PROBE', open('/in/in.txt').read())"],
                "volumeMounts": [{"name": "host", "mountPath": "/in"}],
            }
        ],
    }
    with pytest.raises(sc.SecurityContextError) as e:
        run(backend, pod, workdir(tmp_path), name="hp")
    text = str(e.value)
    assert f"volumes[0].hostPath.path: volume 'host' mounts {data} from this machine" in text
    assert f"(security.allowedHostPaths in {kt_home / 'config.yaml'}: none)" in text
    assert backend.store.get_trainjob("default", "hp") is None
    (kt_home / "config.yaml").write_text(f"security:\n  allowedHostPaths: [{tmp_path}]\n")
    status = run(backend, pod, tmp_path / "wd", name="hp")
    assert condition(status, "Complete") is not None, status
    assert any("PROBE from the host" in line for line in backend.logs("hp", "default", step=None, follow=False))


def test_a_working_directory_the_uid_cannot_read_is_named(backend: LocalBackend, tmp_path: Path) -> None:
    wd = tmp_path / "private"
    wd.mkdir(mode=0o700)
    pod = {"securityContext": {"runAsUser": UID}, "containers": [{"name": "node", "image": "p", "command": cmd()}]}
    status = run(backend, pod, wd, name="wd")
    failed = condition(status, "Failed")
    assert failed is not None and failed["reason"] == "PodStartFailed"
    assert (
        f"containers[node]: the container runs as uid {UID} (securityContext.runAsUser), which may not read its "
        f"working directory {wd} (owned by root, mode 0700)" in failed["message"]
    )
    assert f"Fix: `chmod o+rx {wd}`" in failed["message"]


def test_a_working_directory_under_a_volume_stays_visible(backend: LocalBackend, tmp_path: Path) -> None:
    # An emptyDir at a parent of the manifest's directory (restricted runtimes mount one at /tmp): the pod still
    # starts in its working directory and reads the files beside the manifest, and the volume is still empty.
    wd = workdir(tmp_path)
    (wd / "train.py").write_text("print('the script beside the manifest')")
    code = (
        "import os; print(open('train.py').read()); "
        f"print('volume holds', sorted(e for e in os.listdir({str(tmp_path)!r}) if e != 'wd'))"
    )
    pod = {
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "containers": [{"name": "node", "image": "p", "command": [sys.executable, "-c", code],
                        "volumeMounts": [{"name": "tmp", "mountPath": str(tmp_path)}]}],
    }
    st = run(backend, pod, wd, name="covered")
    assert condition(st, "Complete") is not None, st
    out = "\n".join(backend.logs("covered", "default", step="node", follow=False))
    assert "print('the script beside the manifest')" in out and "volume holds []" in out, out


def test_the_python_environment_under_a_volume_stays_visible(backend: LocalBackend, tmp_path: Path) -> None:
    # A checkout (and its .venv) under /tmp with a runtime mounting an emptyDir at /tmp: the environment standing
    # in for the image is bound again on top of the volume, which otherwise stays empty.
    parent = os.path.dirname(os.path.realpath(sys.prefix))
    code = (
        "import json, os, sys; print('python', sys.prefix); "
        f"print('beside it', json.dumps(sorted(os.listdir({parent!r}))))"
    )
    pod = {
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "containers": [{"name": "node", "image": "p", "command": ["python3", "-c", code],
                        "volumeMounts": [{"name": "tmp", "mountPath": parent}]}],
    }
    st = run(backend, pod, workdir(tmp_path), name="envcovered")
    assert condition(st, "Complete") is not None, st
    out = "\n".join(backend.logs("envcovered", "default", step="node", follow=False))
    assert f"python {sys.prefix}" in out, out
    beside = next(line for line in out.splitlines() if line.startswith("beside it"))
    seen = set(json.loads(beside.removeprefix("beside it ")))
    # Only what stands in for the image (the environment, and kubetrain's own code when it lives there).
    assert os.path.basename(os.path.realpath(sys.prefix)) in seen, out
    assert seen <= {os.path.basename(os.path.realpath(sys.prefix)), "src"}, out


def test_a_volume_at_the_working_directory_itself_is_named(backend: LocalBackend, tmp_path: Path) -> None:
    wd = workdir(tmp_path)
    pod = {
        "volumes": [{"name": "tmp", "emptyDir": {}}],
        "containers": [{"name": "node", "image": "p", "command": cmd(),
                        "volumeMounts": [{"name": "tmp", "mountPath": str(wd)}]}],
    }
    failed = condition(run(backend, pod, wd, name="covered"), "Failed")
    assert failed is not None and failed["reason"] == "PodStartFailed"
    assert (
        f"its working directory defaults to the manifest's directory {wd}, and the volume 'tmp' is mounted at "
        f"exactly that path inside the pod. Fix: keep the manifest (and the files it runs) in a directory below or "
        f"beside {wd}, or set workingDir"
    ) in failed["message"]


def test_exec_probes_run_as_the_container(backend: LocalBackend, tmp_path: Path) -> None:
    check = 'test "$(id -u)" = 54321 && grep -q "^CapEff:[[:space:]]*0000000000000000" /proc/self/status'
    server = {
        "name": "server",
        "template": {
            "spec": {
                "template": {
                    "spec": {
                        "securityContext": {"runAsUser": UID},
                        "containers": [
                            {
                                "name": "server",
                                "image": "p",
                                "command": ["sleep", "60"],
                                "readinessProbe": {"exec": {"command": ["sh", "-c", check]}},
                            }
                        ],
                    }
                }
            }
        },
    }
    node = runtime_with({"containers": [{"name": "node", "image": "p", "command": ["true"]}]})
    node["spec"]["template"]["spec"]["replicatedJobs"][0]["dependsOn"] = [{"name": "server", "status": "Ready"}]
    node["spec"]["template"]["spec"]["replicatedJobs"].insert(0, server)
    node["spec"]["template"]["spec"]["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["node"]}
    tj = trainjob("probe", "sc", activeDeadlineSeconds=60)
    backend.apply([node, tj], namespace="default", workdir=str(workdir(tmp_path)), detach=False)
    status = Supervisor(backend.store, "default", "probe").run()
    assert condition(status, "Complete") is not None, "the probe passed as uid 54321 without capabilities"


@needs_torch
@pytest.mark.slow
def test_the_restricted_runtime_trains_with_its_security_context_applied(tmp_path: Path, kt_home: Path) -> None:
    # Below /tmp on purpose: the runtime's emptyDir covers /tmp inside the pod, and the script beside the
    # manifest (on a cluster it would be in the image) must stay visible and read-only there.
    wd = Path(tempfile.mkdtemp(prefix="restricted-", dir="/tmp"))
    wd.chmod(0o755)
    try:
        _train_restricted(wd)
    finally:
        shutil.rmtree(wd, ignore_errors=True)


def _train_restricted(wd: Path) -> None:
    (wd / "train.py").write_text(
        textwrap.dedent(
            """
            import os, torch, torch.distributed as dist
            dist.init_process_group("gloo")
            rank = dist.get_rank()
            t = torch.ones(1) * (rank + 1)
            dist.all_reduce(t)
            status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
            tries = {}
            for p in ("/tmp/ok", "/etc/no", "out.txt"):
                try:
                    open(p, "w").write("x"); tries[p] = "ok"
                except OSError as e:
                    tries[p] = e.strerror
            print(f"rank={rank} sum={t.item():g} uid={os.getuid()} gid={os.getgid()} groups={sorted(os.getgroups())} "
                  f"eff={status['CapEff'].strip()} bnd={status['CapBnd'].strip()} nnp={status['NoNewPrivs'].strip()} "
                  f"tries={tries}", flush=True)
            dist.barrier()
            os._exit(0)
            """
        )
    )
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "restricted"},
        "spec": {
            "runtimeRef": {"name": "torch-distributed-restricted"},
            "activeDeadlineSeconds": 240,
            "trainer": {
                "numNodes": 2,
                "numProcPerNode": 1,
                "command": ["torchrun", "train.py"],
                "env": [{"name": "OMP_NUM_THREADS", "value": "1"}],
            },
        },
    }
    (wd / "trainjob.yaml").write_text(yaml.safe_dump(job))
    r = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", "trainjob.yaml"],
        cwd=wd, capture_output=True, text=True, timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = sorted(line.split("] ", 1)[1] for line in r.stdout.splitlines() if "rank=" in line)
    tries = {"/tmp/ok": "ok", "/etc/no": "Read-only file system", "out.txt": "Read-only file system"}
    assert lines == [
        f"rank={i} sum=3 uid=1000 gid=1000 groups=[1000] eff={'0' * 16} bnd={'0' * 16} nnp=1 tries={tries}"
        for i in range(2)
    ], r.stdout
