"""The local backend as an ordinary user: a real 2 nodes x 2 processes DDP job, and pods that cannot write what
the user could not.

CI runs as root, so the test creates an unprivileged account and runs ``kubetrain`` as it, with this checkout's
virtualenv as its interpreter. When that interpreter lives below a directory other users cannot enter (a pyenv
under ``/root``), the test gives the account a private mount namespace in which only that directory is made
enterable (a tmpfs holding a read-only bind of it); nothing changes on the host.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from .conftest import needs_mpi, needs_torch

USER = "kt-rootless"

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creates a user account: needs root (CI runs as root)"),
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("useradd", "userdel", "setpriv", "unshare", "bwrap", "nsenter")),
        reason="needs useradd, userdel, setpriv, unshare (util-linux), bwrap and nsenter",
    ),
]

DDP_SCRIPT = """
import os, sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(8, 4) + rank
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
w = model.module.weight.detach().clone()
dist.all_reduce(w)
same = torch.allclose(w / world, model.module.weight.detach())
denied = []
for target in ("/etc/kt-rootless-probe", "/usr/kt-rootless-probe"):
    try:
        open(target, "w").write("x")
    except OSError:
        denied.append(target)
open(f"out-{rank}.txt", "w").write(str(os.getuid()))
sys.stdout.write(f"rank={rank} world={world} uid={os.getuid()} synced={same} denied={len(denied)}\\n")
sys.stdout.flush()
if rank == 0:  # the status endpoint, served inside the user-owned network namespace, takes the official SDK's report
    from kubeflow.trainer import update_trainjob_status
    print(f"progress-sent={update_trainjob_status(progress_percent=100, metrics={'synced': same})}", flush=True)
dist.barrier()
os._exit(0)
"""

TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: rootless-ddp}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    numProcPerNode: 2
    command: [torchrun, ddp.py]
    env: [{name: OMP_NUM_THREADS, value: "1"}]
"""


def _closed_ancestors(path: str, uid: int, gid: int) -> list[str]:
    """Directories on the way to ``path`` that the account may not enter."""
    out = []
    p = Path(os.path.realpath(path))
    for d in [*reversed(p.parents)]:
        st = d.stat()
        mode = st.st_mode
        ok = (
            (st.st_uid == uid and mode & 0o100)
            or (st.st_gid == gid and mode & 0o010)
            or mode & 0o001
        )
        if not ok:
            out.append(str(d))
    return out


@contextlib.contextmanager
def unprivileged_account(user: str) -> Iterator[pwd.struct_passwd]:
    """An unprivileged account (created, and removed afterwards, unless it exists) that can run this checkout's
    interpreter; skips the tests when there can be none."""
    created = False
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        r = subprocess.run(["useradd", "-m", "-s", "/bin/sh", user], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"cannot create a test account here: {r.stderr.strip()}")
        created = True
        pw = pwd.getpwnam(user)
    try:
        probe = as_user(pw, [sys.executable, "-c", "import kubetrain.cli.main"], env=user_env(pw), cwd="/")
        if probe.returncode != 0:
            pytest.skip(f"the test account cannot run this checkout's interpreter here: {probe.stderr.strip()}")
        yield pw
    finally:
        if created:
            subprocess.run(["userdel", "-r", user], check=False, capture_output=True)


@pytest.fixture(scope="module")
def account() -> Iterator[pwd.struct_passwd]:
    with unprivileged_account(USER) as pw:
        yield pw


def as_user(
    pw: pwd.struct_passwd, argv: list[str], *, env: dict[str, str], cwd: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the account, in a private mount namespace where the interpreter is reachable."""
    checkout = str(Path(__file__).resolve().parents[2])
    needed = [sys.executable, os.path.realpath(sys.executable), sys.base_prefix, checkout]
    closed = sorted({d for p in needed for d in _closed_ancestors(p, pw.pw_uid, pw.pw_gid)})
    script = ["set -e"]
    for i, d in enumerate(closed):
        # Keep what lies below the closed directory on the way to each needed path, hide the rest.
        keep = sorted(
            {
                os.path.relpath(os.path.realpath(p), d).split(os.sep)[0]
                for p in needed
                if os.path.realpath(p).startswith(d + os.sep)
            }
        )
        stash = f"/tmp/.kt-rootless-stash-{os.getpid()}-{i}"
        script.append(f"mkdir -p {stash}")
        for k in keep:
            script.append(f"mkdir -p {stash}/{k} && mount --bind {shlex.quote(os.path.join(d, k))} {stash}/{k}")
        script.append(f"mount -t tmpfs -o mode=755 tmpfs {shlex.quote(d)}")
        for k in keep:
            inside = shlex.quote(os.path.join(d, k))
            script.append(f"mkdir -p {inside} && mount --move {stash}/{k} {inside}")
    envs = " ".join(shlex.quote(f"{k}={v}") for k, v in env.items())
    script.append(
        f"cd {shlex.quote(cwd)} && exec setpriv --reuid={pw.pw_uid} --regid={pw.pw_gid} --init-groups "
        f"env -i {envs} {shlex.join(argv)}"
    )
    # A private mount namespace only when something must be made reachable (it needs CAP_SYS_ADMIN).
    wrapper = ["unshare", "--mount", "--propagation", "private"] if closed else []
    return subprocess.run(
        [*wrapper, "sh", "-c", "\n".join(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def user_env(pw: pwd.struct_passwd) -> dict[str, str]:
    """The account's environment, with a fresh KUBETRAIN_HOME each time it is asked for."""
    home = Path(pw.pw_dir) / ".kubetrain"
    shutil.rmtree(home, ignore_errors=True)
    return {
        "HOME": pw.pw_dir,
        "USER": pw.pw_name,
        "PATH": f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin",
        "KUBETRAIN_HOME": str(home),
        "LANG": "C.UTF-8",
    }


def userns_usable(pw: pwd.struct_passwd) -> str | None:
    probe = ["bwrap", "--unshare-user", "--unshare-net", "--ro-bind", "/", "/", "true"]
    r = as_user(pw, probe, env=user_env(pw), cwd="/")
    return None if r.returncode == 0 else r.stderr.strip()


KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


@pytest.fixture
def pod_user(account: pwd.struct_passwd) -> pwd.struct_passwd:
    """The account, when it may run pods: unprivileged user namespaces work here (otherwise the test skips)."""
    problem = userns_usable(account)
    if problem:
        pytest.skip(f"unprivileged user namespaces are not available here: {problem}")
    return account


def job_dir(account: pwd.struct_passwd, name: str, files: dict[str, str] | None = None, *,
            copy_of: Path | None = None) -> Path:
    """A fresh folder in the account's home holding ``files`` (or a copy of ``copy_of``), owned by the account."""
    job = Path(account.pw_dir) / name
    shutil.rmtree(job, ignore_errors=True)
    if copy_of is not None:
        shutil.copytree(copy_of, job)
    else:
        job.mkdir()
    for file, text in (files or {}).items():
        (job / file).write_text(text)
    for p in (job, *job.iterdir()):
        os.chown(p, account.pw_uid, account.pw_gid)
    return job


@needs_torch
@pytest.mark.slow
def test_ddp_2_nodes_x_2_procs_as_an_unprivileged_user(pod_user: pwd.struct_passwd) -> None:
    account, kubetrain = pod_user, KUBETRAIN
    job = job_dir(account, "ddp-job", {"ddp.py": DDP_SCRIPT, "trainjob.yaml": TRAINJOB})
    r = as_user(account, [*kubetrain, "run", "-f", "trainjob.yaml"], env=user_env(account), cwd=str(job))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "needs root" not in r.stderr
    lines = sorted(line.split("] ", 1)[1] for line in r.stdout.splitlines() if "rank=" in line)
    uid = account.pw_uid
    assert lines == [f"rank={i} world=4 uid={uid} synced=True denied=2" for i in range(4)], r.stdout
    if importlib.util.find_spec("kubeflow") is not None:
        assert "progress-sent=True" in r.stdout, r.stdout
        assert "progress [########################] 100% · synced=True" in r.stderr, r.stderr
    for i in range(4):
        out = job / f"out-{i}.txt"
        assert out.read_text() == str(uid) and out.stat().st_uid == uid, "pods write as the invoking user"
    assert not Path("/etc/kt-rootless-probe").exists() and not Path("/usr/kt-rootless-probe").exists()
    home = Path(account.pw_dir) / ".kubetrain"
    assert home.stat().st_uid == uid and (home / "state.db").stat().st_uid == uid


def test_unwritable_kubetrain_home_is_one_clear_error(account: pwd.struct_passwd) -> None:
    base = Path(tempfile.mkdtemp(prefix="kt-rootless-"))
    os.chmod(base, 0o755)
    root_owned = base / "root-owned-home"
    root_owned.mkdir(mode=0o755)
    try:
        _check_unwritable_home(account, root_owned)
    finally:
        shutil.rmtree(base)


def _check_unwritable_home(account: pwd.struct_passwd, root_owned: Path) -> None:
    env = {**user_env(account), "KUBETRAIN_HOME": str(root_owned)}
    r = as_user(account, [sys.executable, "-m", "kubetrain.cli.main", "get", "trainjobs"], env=env, cwd="/")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    text = " ".join(r.stderr.split())
    assert f"KUBETRAIN_HOME {root_owned} is owned by root and not writable by you (uid {account.pw_uid})" in text
    assert "sudo chown -R" in text and "or set KUBETRAIN_HOME to a directory you own" in text
    assert list(root_owned.iterdir()) == [], "nothing was written"
    missing_parent = root_owned / "sub" / "home"
    r = as_user(
        account,
        [sys.executable, "-m", "kubetrain.cli.main", "get", "trainjobs"],
        env={**env, "KUBETRAIN_HOME": str(missing_parent)},
        cwd="/",
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "cannot be created: Permission denied" in " ".join(r.stderr.split())


def test_the_userns_paragraph_is_what_a_user_sees_when_namespaces_are_off() -> None:
    """The message names the setting; the behaviour without namespaces is covered in test_supervisor."""
    from kubetrain.local.sandbox.namespaces import userns_help

    text = userns_help()
    assert text.startswith("Without root, kubetrain gives each TrainJob's pods their own user, mount, PID and")
    assert "Fix:" in text and "Pods are never run without isolation." in text
    assert textwrap.dedent(text) == text and "\n" not in text


PROBES = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: rootless-probes}
spec:
  template:
    spec:
      replicatedJobs:
      - name: server
        template:
          spec:
            template:
              spec:
                volumes: [{name: scratch, emptyDir: {}}]
                containers:
                - name: server
                  image: python
                  volumeMounts: [{name: scratch, mountPath: /kt-probe}]
                  command:
                  - python
                  - -c
                  - |
                    import socket, pathlib, time
                    time.sleep(0.3)
                    pathlib.Path('/kt-probe/ok').write_text('y')
                    s = socket.create_server((socket.gethostbyname(socket.gethostname()), 7000))
                    c, _ = s.accept(); c.close()
                    c, _ = s.accept(); c.sendall(b'hi'); c.close(); time.sleep(60)
                  readinessProbe: {tcpSocket: {port: 7000}}
                - name: sidecar
                  image: python
                  volumeMounts: [{name: scratch, mountPath: /kt-probe}]
                  command: [sleep, "60"]
                  readinessProbe: {exec: {command: [test, -f, /kt-probe/ok]}}
      - name: node
        dependsOn: [{name: server, status: Ready}]
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            template:
              spec:
                containers:
                - name: node
                  image: python
                  command:
                  - python
                  - -c
                  - |
                    import socket, os
                    c = socket.create_connection(('probes-server-0-0.probes', 7000))
                    print('got', c.recv(2).decode(), 'as', os.getuid())
      successPolicy: {operator: All, targetReplicatedJobs: [node]}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: probes}
spec:
  runtimeRef: {name: rootless-probes}
"""


def test_readiness_probes_and_pod_hostnames_as_an_unprivileged_user(pod_user: pwd.struct_passwd) -> None:
    account, kubetrain = pod_user, KUBETRAIN
    job = job_dir(account, "probes-job", {"probes.yaml": PROBES})
    r = as_user(account, [*kubetrain, "run", "-f", "probes.yaml"], env=user_env(account), cwd=str(job), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"[node-0/0] got hi as {account.pw_uid}" in r.stdout, r.stdout
    assert not Path("/kt-probe").exists()


@needs_mpi
def test_mpi_example_as_an_unprivileged_user(pod_user: pwd.struct_passwd) -> None:
    account, kubetrain = pod_user, KUBETRAIN
    job = job_dir(account, "mpi-job", copy_of=Path(__file__).resolve().parents[2] / "examples" / "mpi")
    r = as_user(account, [*kubetrain, "run", "-f", "trainjob.yaml"], env=user_env(account), cwd=str(job), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("sum of ranks = 6") == 4, r.stdout



NETWORK = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: net, labels: {trainer.kubeflow.org/framework: torch}}
spec:
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
          spec:
            template:
              spec:
                containers:
                - {name: node, image: python, command: [python3, net.py], env: [{name: HOST_SERVER, value: HOSTSERVER}]}
---
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: net}
spec:
  runtimeRef: {name: net, kind: TrainingRuntime}
"""
NET_PY = """
import os, socket, subprocess, time
print("I=" + subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.strip())
if os.environ.get("HOST_SERVER"):  # the host's network, through the TrainJob's outbound NAT
    host, port = os.environ["HOST_SERVER"].split(":")
    socket.create_connection((host, int(port)), timeout=10).sendall(b"rootless pod")
t = time.monotonic()
try:
    socket.getaddrinfo("no-such-host.invalid", 80)
except OSError:
    pass
print(f"lookup took {time.monotonic() - t:.1f}s")
"""


def test_pod_network_and_name_lookups_as_an_unprivileged_user(pod_user: pwd.struct_passwd) -> None:
    """Rootless: each pod has its own address, and a name that resolves nowhere fails at once (with outbound
    network or without): it never waits out a resolver's timeout."""
    account, kubetrain = pod_user, KUBETRAIN
    outbound = shutil.which("slirp4netns") is not None and shutil.which("nft", path="/usr/sbin:/sbin") is not None
    accepted: list[bytes] = []
    server = None
    if outbound:
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.connect(("192.0.2.1", 9))  # picks the outbound interface's address; sends nothing
        host_ip = probe.getsockname()[0]
        probe.close()
        server = socket.create_server((host_ip, 0))
        threading.Thread(target=lambda: accepted.append(server.accept()[0].recv(32)), daemon=True).start()
    where = f"{server.getsockname()[0]}:{server.getsockname()[1]}" if server is not None else ""
    job = job_dir(account, "net-job", {"net.yaml": NETWORK.replace("HOSTSERVER", f'"{where}"'), "net.py": NET_PY})
    env = user_env(account)
    r = as_user(account, [*kubetrain, "run", "-f", "net.yaml"], env=env, cwd=str(job), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "[node-0/0] I=10.250.0." in r.stdout, r.stdout
    took = float(r.stdout.split("lookup took ")[1].split("s")[0])
    described = as_user(account, [*kubetrain, "describe", "trainjob", "net"], env=env, cwd=str(job)).stdout
    assert took < 3.0, r.stdout + described
    if server is not None:
        server.close()
        assert "NoOutboundNetwork" not in described, described
        assert accepted == [b"rootless pod"], r.stdout + described


@needs_torch
@pytest.mark.slow
def test_the_quickstart_learning_rate_tuned_as_an_unprivileged_user(pod_user: pwd.struct_passwd) -> None:
    """examples/quickstart/tune-lr.yaml (6 trials of real DDP training, 2 at a time) applied by an ordinary user: the
    search's controller and every trial run as that user."""
    import json
    import time

    account, kubetrain = pod_user, KUBETRAIN
    job = job_dir(account, "tune-lr", copy_of=Path(__file__).resolve().parents[2] / "examples" / "quickstart")
    env = user_env(account)
    r = as_user(account, [*kubetrain, "apply", "-f", "tune-lr.yaml"], env=env, cwd=str(job))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "optimizationjob.trainer.kubeflow.org/quickstart-lr created" in r.stdout
    deadline = time.monotonic() + 900
    while True:
        shown = as_user(account, [*kubetrain, "describe", "oj", "quickstart-lr", "-o", "json"], env=env, cwd=str(job))
        assert shown.returncode == 0, shown.stderr
        view = json.loads(shown.stdout)
        if view["state"]["state"] in ("Complete", "Failed"):
            break
        assert time.monotonic() < deadline, view["state"]
        time.sleep(3)
    assert (view["state"]["state"], view["state"]["reason"]) == ("Complete", "MaxTrialsReached"), view["state"]
    assert len(view["trials"]) == 6 and {t["state"] for t in view["trials"]} == {"Complete"}
    assert view["best"] == view["trials"][0]["name"]
    home = Path(account.pw_dir) / ".kubetrain"
    assert (home / "state.db").stat().st_uid == account.pw_uid

IMAGE_TRAINJOB = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: in-image}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    image: localhost/kubetrain-test:1
    numNodes: 2
    command: [sh, -c, 'echo "in-image uid=$(id -u) pwd=$(pwd) $(cat /app/marker)"; echo x > /etc/mine && echo wrote']
"""


def test_a_pod_in_its_image_as_an_unprivileged_user(pod_user: pwd.struct_passwd, image_archive: Path) -> None:
    """``kubetrain images load`` and a 2-node TrainJob in the loaded image, as an ordinary user: the layers are
    mounted (overlayfs in a user namespace of the pod's own), the pod is root inside its namespaces only, and what
    it writes to its root filesystem goes to its own writable layer, owned by the user."""
    account = pod_user
    job = job_dir(account, "image-job", {"trainjob.yaml": IMAGE_TRAINJOB})
    shutil.copy(image_archive, job / "image.tar")
    os.chown(job / "image.tar", account.pw_uid, account.pw_gid)
    kt = shlex.join(KUBETRAIN)
    script = f"{kt} images load -i image.tar && {kt} run -f trainjob.yaml"
    env = user_env(account)
    r = as_user(account, ["sh", "-c", script], env=env, cwd=str(job), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Loaded image: localhost/kubetrain-test:1" in r.stdout
    assert sorted(line.split("] ", 1)[1] for line in r.stdout.splitlines() if "in-image" in line) == [
        "in-image uid=0 pwd=/app v1"
    ] * 2, r.stdout
    home = Path(account.pw_dir) / ".kubetrain"
    written = list(home.glob("trainjobs/default/in-image-*/pods/*/attempt-0/rootfs/node/upper/etc/mine"))
    assert len(written) == 2 and all(p.stat().st_uid == account.pw_uid for p in written)
    layers = list((home / "images" / "layers").glob("*/"))
    assert layers and all(p.stat().st_uid == account.pw_uid for p in layers)
    # Deleting the TrainJob removes its files, overlayfs's mode-0000 work directories included, as the user.
    r = as_user(account, [*KUBETRAIN, "delete", "trainjob", "in-image"], env=env, cwd=str(job))
    assert r.returncode == 0, r.stderr
    assert not list(home.glob("trainjobs/default/in-image-*")), list(home.glob("trainjobs/default/in-image-*/**"))
