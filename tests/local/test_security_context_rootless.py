"""securityContext as an ordinary user: the ids a pod sees are mapped to the user's own inside the pod's user
namespace, capabilities exist only there, and the refusals (runAsNonRoot, privileged, hostPath) read the same.

CI runs as root, so the test creates an unprivileged account and runs ``kubetrain`` as it (see test_rootless).
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.local.sandbox import security_context as sc

from .test_rootless import as_user, unprivileged_account, user_env, userns_usable
from .test_security_context_pods import PROBE, runtime_with

USER = "kt-secctx"
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="creates a user account: needs root (CI runs as root)"),
    pytest.mark.skipif(
        not all(shutil.which(t) for t in ("useradd", "userdel", "setpriv", "unshare", "bwrap", "nsenter")),
        reason="needs useradd, userdel, setpriv, unshare (util-linux), bwrap and nsenter",
    ),
]


@pytest.fixture(scope="module")
def account() -> Iterator[pwd.struct_passwd]:
    with unprivileged_account(USER) as pw:
        problem = userns_usable(pw)
        if problem:
            pytest.skip(f"unprivileged user namespaces are not available here: {problem}")
        yield pw


def job_dir(pw: pwd.struct_passwd, name: str, docs: list[dict[str, Any]]) -> Path:
    job = Path(pw.pw_dir) / name
    shutil.rmtree(job, ignore_errors=True)
    job.mkdir()
    (job / "job.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    for p in (job, *job.iterdir()):
        os.chown(p, pw.pw_uid, pw.pw_gid)
    return job


def tj(name: str, runtime: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": runtime}, "activeDeadlineSeconds": 120},
    }


def own_userns_bounding(pw: pwd.struct_passwd) -> frozenset[str]:
    """The capabilities the account holds inside a user namespace of its own (bounded like its processes)."""
    r = as_user(pw, ["grep", "CapBnd", "/proc/self/status"], env={"PATH": "/usr/bin:/bin"}, cwd="/")
    return sc.cap_mask(r.stdout, "CapBnd")


def mask(caps: frozenset[str]) -> str:
    return f"{sum(1 << sc.ALL_CAPS.index(c) for c in caps):016x}"


def test_ids_capabilities_and_files_as_an_unprivileged_user(account: pwd.struct_passwd) -> None:
    pw = account
    check = 'test "$(id -u)" = 1000 && grep -q "^CapEff:[[:space:]]*0000000000000000" /proc/self/status'
    pod = {
        "securityContext": {"runAsUser": 1000, "runAsGroup": 3000, "fsGroup": 2000, "supplementalGroups": [4000]},
        "volumes": [{"name": "data", "emptyDir": {}}, {"name": "cache", "persistentVolumeClaim": {"claimName": "c"}}],
        "containers": [
            {
                "name": "node",
                "image": "python",
                "command": [sys.executable, "-c", PROBE + "\nimport time; time.sleep(1)\n",
                            "/tmp/kt-secctx-probe", "/etc/kt-secctx-probe", "/data/f", "/cache/f", "wd-f"],
                "securityContext": {
                    "readOnlyRootFilesystem": True,
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
                },
                "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "cache", "mountPath": "/cache"}],
                # Runs inside the pod as the container does: uid 1000, no effective capabilities.
                "readinessProbe": {"exec": {"command": ["sh", "-c", check]}},
            },
            {
                # uid 0 inside the pod is still the user outside: capabilities only within the pod's namespace.
                "name": "root",
                "image": "python",
                "command": [sys.executable, "-c", PROBE, "/etc/kt-secctx-probe", "wd-root"],
                "securityContext": {"runAsUser": 0},
            },
        ],
    }
    rt = runtime_with(pod, "secctx")
    # A second job waits for the first to be Ready: it starts only if the exec probe passed as uid 1000.
    after = json.loads(json.dumps(rt["spec"]["template"]["spec"]["replicatedJobs"][0]))
    after["name"] = "after"
    after["dependsOn"] = [{"name": "node", "status": "Ready"}]
    after["template"]["spec"]["template"]["spec"] = {
        "containers": [{"name": "after", "image": "python", "command": ["true"]}]
    }
    after["template"]["metadata"] = {}
    rt["spec"]["template"]["spec"]["replicatedJobs"].append(after)
    rt["spec"]["template"]["spec"]["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["after"]}
    job = job_dir(pw, "secctx-job", [rt, tj("secctx", "secctx")])
    env = user_env(pw)
    r = as_user(pw, [*KUBETRAIN, "run", "-f", "job.yaml"], env=env, cwd=str(job), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    # `run` shows each pod's default container; every container's output is in its own log.
    r = as_user(pw, [*KUBETRAIN, "logs", "secctx", "--all-containers"], env=env, cwd=str(job), timeout=60)
    got = [json.loads(line.partition("PROBE ")[2]) for line in r.stdout.splitlines() if "PROBE {" in line]
    node = next(g for g in got if g["uid"] == 1000)
    assert (node["gid"], node["NoNewPrivs"]) == (3000, "1")
    assert node["CapEff"] == "0" * 16 and node["CapBnd"] == mask(frozenset({"NET_BIND_SERVICE"}))
    assert node["wrote"] == {
        "/tmp/kt-secctx-probe": "Read-only file system",
        "/etc/kt-secctx-probe": "Read-only file system",
        "/data/f": "ok",
        "/cache/f": "ok",
        "wd-f": "Read-only file system",
    }
    root = next(g for g in got if g["uid"] == 0)
    default = mask(sc.DEFAULT_CAPS & own_userns_bounding(pw))
    assert (root["CapEff"], root["CapBnd"]) == (default, default)
    assert root["wrote"] == {"/etc/kt-secctx-probe": "Permission denied", "wd-root": "ok"}
    assert not Path("/etc/kt-secctx-probe").exists() and not Path("/tmp/kt-secctx-probe").exists()
    # On the host every file the pods wrote is the user's, whatever id the pod saw.
    home = Path(env["KUBETRAIN_HOME"])
    written = [job / "wd-root", home / "volumes" / "default" / "secctx" / "c" / "f"]
    written += list((home / "trainjobs").glob("default/secctx-*/pods/node-0-0/attempt-0/volumes/data/f"))
    assert len(written) == 3
    assert all((p.stat().st_uid, p.stat().st_gid) == (pw.pw_uid, pw.pw_gid) for p in written), written
    desc = as_user(pw, [*KUBETRAIN, "describe", "trainjob", "secctx"], env={**env, "COLUMNS": "400"}, cwd="/")
    text = " ".join(desc.stdout.split())
    assert "GroupsNotMapped pod node-0-0 container node: fsGroup/supplementalGroups 2000, 4000 are not among" in text


@pytest.mark.parametrize(
    ("case", "pod", "flags", "expected"),
    [
        (
            "nonroot",
            {
                "securityContext": {"runAsNonRoot": True},
                "containers": [
                    {"name": "node", "image": "p", "command": ["true"], "securityContext": {"runAsUser": 0}}
                ],
            },
            [],
            "step node-0-0: Pending (CreateContainerConfigError: container's runAsUser breaks non-root policy (pod:",
        ),
        (
            "privileged",
            {
                "containers": [
                    {"name": "node", "image": "p", "command": ["true"], "securityContext": {"privileged": True}}
                ]
            },
            ["--allow-privileged"],
            "securityContext.privileged: privileged containers need root, and kubetrain runs as uid",
        ),
        (
            "hostpath",
            {
                "volumes": [{"name": "etc", "hostPath": {"path": "/etc"}}],
                "containers": [{"name": "node", "image": "p", "command": ["true"]}],
            },
            [],
            "volumes[0].hostPath.path: volume 'etc' mounts /etc from this machine, which is not below a directory "
            "allowed for hostPath volumes",
        ),
    ],
)
def test_refusals_as_an_unprivileged_user(
    account: pwd.struct_passwd, case: str, pod: dict[str, Any], flags: list[str], expected: str
) -> None:
    rt = runtime_with(pod, f"r-{case}")
    job = job_dir(account, f"refuse-{case}", [rt, tj(case, f"r-{case}")])
    r = as_user(account, [*KUBETRAIN, "run", "-f", "job.yaml", *flags], env=user_env(account), cwd=str(job))
    assert r.returncode == 1, r.stdout + r.stderr
    assert expected in " ".join(r.stderr.split()), r.stderr
    assert "Traceback" not in r.stderr
