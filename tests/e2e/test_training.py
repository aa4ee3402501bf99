"""Real training on the bed, submitted the way a user would: the README quickstart (DDP with torchrun over gloo, 2
nodes x 2 processes) through ``kubetrain run``, and an MPI job (OpenMPI over SSH, 2 nodes x 2 slots) on the built-in
``deepspeed-distributed`` runtime.

The built-in runtimes name upstream's images, which the bed does not have; the jobs map them to the bed's training
image as a user on an offline cluster would: ``spec.trainer.image`` and a runtime patch (docs/images.md says what an
image must contain for each runtime). Code comes from ConfigMaps."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    IMAGE,
    REPO,
    DeployedOperator,
    call,
    kubectl,
    kubetrain,
    pod_log,
    pods_of,
    wait_finished,
)

pytestmark = pytest.mark.e2e
EXAMPLES = REPO / "examples"


def test_the_quickstart_trains_on_two_nodes(fresh_namespace: str, operator: DeployedOperator, tmp_path: Path) -> None:
    ns = fresh_namespace
    kubectl("create", "configmap", "quickstart-code", f"--from-file={EXAMPLES / 'quickstart' / 'train.py'}", "-n", ns)
    tj = yaml.safe_load((EXAMPLES / "quickstart" / "cluster.yaml").read_text())
    tj["spec"]["trainer"]["image"] = IMAGE
    path = tmp_path / "quickstart.yaml"
    path.write_text(yaml.safe_dump(tj))
    done = kubetrain("run", "-f", str(path), "-n", ns, timeout=900, check=False)
    print(done.stdout, done.stderr)
    assert done.returncode == 0, done.stderr
    assert "[node-0/0] training on 4 processes (2 nodes)" in done.stdout
    losses = [float(x) for x in re.findall(r"\[node-0/0\] epoch \d+/5 loss ([0-9.]+)", done.stdout)]
    assert len(losses) == 5, done.stdout
    assert losses[-1] < losses[0] / 5, losses  # it learns
    assert done.stderr.rstrip().endswith(
        f"trainjob {ns}/quickstart: Complete (AllJobsCompleted: jobset completed successfully)"
    )


# What an image needs for the MPI runtimes (docs/images.md): sshd started by the node pods as mpiuser on port 2222
# with the TrainJob's key as host key and authorized key, and an ssh client that uses that port. The bed's training
# image has sshd and OpenMPI but not these two files, so this job brings them in a ConfigMap.
SSHD_CONFIG = textwrap.dedent(
    """\
    Port 2222
    HostKey /home/mpiuser/.ssh/id_rsa
    AuthorizedKeysFile /home/mpiuser/.ssh/authorized_keys
    PidFile /tmp/sshd.pid
    PasswordAuthentication no
    KbdInteractiveAuthentication no
    UsePAM no
    StrictModes no
    SetEnv PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin
    """
)
SSH_CONFIG = textwrap.dedent(
    """\
    Host *
        Port 2222
        StrictHostKeyChecking no
        UserKnownHostsFile /dev/null
        LogLevel ERROR
    """
)


def mpi_configmaps(ns: str) -> None:
    """What :func:`mpi_patch` mounts: ``examples/mpi/allreduce.py`` (ConfigMap ``mpi-code``) and the SSH
    configuration above (``mpi-ssh``)."""
    kubectl("create", "configmap", "mpi-code", f"--from-file={EXAMPLES / 'mpi' / 'allreduce.py'}", "-n", ns)
    ssh = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mpi-ssh", "namespace": ns},
           "data": {"sshd_config": SSHD_CONFIG, "ssh_config": SSH_CONFIG}}  # fmt: skip
    call(lambda c: c.create(ssh))


def mpi_patch(image: str = IMAGE) -> dict[str, Any]:
    """A runtime patch that runs the ``node`` and ``launcher`` pods on ``image`` with :func:`mpi_configmaps`."""

    def pod(workdir: bool, sshd: bool) -> dict[str, Any]:
        mounts = [
            {"name": "code", "mountPath": "/code", "readOnly": True},
            {"name": "ssh", "mountPath": "/etc/ssh/ssh_config.d/mpi.conf", "subPath": "ssh_config"},
        ]
        if sshd:
            mounts.append({"name": "ssh", "mountPath": "/home/mpiuser/.sshd_config", "subPath": "sshd_config"})
        container: dict[str, Any] = {"name": "node", "image": image, "volumeMounts": mounts}
        if workdir:
            container["workingDir"] = "/code"
        volumes = [
            {"name": "code", "configMap": {"name": "mpi-code"}},
            {"name": "ssh", "configMap": {"name": "mpi-ssh"}},
        ]
        return {"template": {"spec": {"template": {"spec": {"volumes": volumes, "containers": [container]}}}}}

    return {
        "manager": "mpi.example.com/image",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {"name": "node", **pod(workdir=True, sshd=True)},
                        {"name": "launcher", **pod(workdir=True, sshd=False)},
                    ]
                }
            }
        },
    }


def allreduce_hosts(text: str, size: int = 4) -> set[str]:
    """The pods the ranks of ``examples/mpi/allreduce.py`` ran on (its launcher's log ``text``), once every one of
    ``size`` ranks printed the sum of all ranks."""
    lines = sorted(line for line in text.splitlines() if line.startswith("rank "))
    assert [line.split(":")[0].split(" on ")[0] for line in lines] == [f"rank {i}/{size}" for i in range(size)], text
    assert all(line.endswith(f"sum of ranks = {size * (size - 1) // 2}") for line in lines), text
    return {line.split(" on ")[1].split(":")[0] for line in lines}


def test_an_mpi_job_runs_openmpi_over_ssh(fresh_namespace: str, operator: DeployedOperator) -> None:
    ns = fresh_namespace
    mpi_configmaps(ns)
    tj = yaml.safe_load((EXAMPLES / "mpi" / "trainjob.yaml").read_text())
    tj["metadata"]["namespace"] = ns
    tj["spec"]["runtimePatches"] = [mpi_patch()]
    call(lambda c: c.create(tj))
    name = tj["metadata"]["name"]
    done = wait_finished(name, ns, 600)
    launcher = next(p for p in pods_of(name, ns) if p["metadata"]["labels"].get(
        "jobset.sigs.k8s.io/replicatedjob-name") == "launcher")  # fmt: skip
    text = pod_log(launcher["metadata"]["name"], ns)
    print(text)
    assert done["type"] == "Complete", (done, text)
    hosts = allreduce_hosts(text)
    assert hosts == {f"{name}-launcher-0-0", f"{name}-node-0-0"}, hosts  # two pods, two ranks each
    assert (call(lambda c: c.get(r.SECRET, f"{name}-mpi-ssh-auth", ns)))["type"] == "kubernetes.io/ssh-auth"
