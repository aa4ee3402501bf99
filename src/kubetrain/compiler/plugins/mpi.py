"""MPI: hostfile, SSH key Secret, launcher env for OpenMPI, Intel MPI and MPICH."""

from __future__ import annotations

import base64
import copy
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.runtime import MPIPolicy
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler import env as e
from kubetrain.compiler.framework import object_meta
from kubetrain.compiler.info import Info, PodSet
from kubetrain.compiler.keys import KeyGen

_RSH_ARGS = "-o ConnectionAttempts=10"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def applies(info: Info) -> bool:
    return info.ml_policy is not None and info.ml_policy.mpi is not None


def policy(info: Info) -> MPIPolicy:
    assert info.ml_policy is not None and info.ml_policy.mpi is not None
    return info.ml_policy.mpi


def implementation(info: Info) -> str:
    return policy(info).mpi_implementation or "OpenMPI"


def worker_pod_set(info: Info) -> PodSet | None:
    """The rjob named ``node``; for runtimes converted from other APIs, the one non-launcher rjob."""
    found = info.by_name(c.NODE)
    if found is not None:
        return found
    others = [p for p in info.pod_sets if p.name != c.LAUNCHER]
    return others[0] if len(others) == 1 and info.by_name(c.LAUNCHER) is not None else None


def ssh_container(ps: PodSet) -> dict[str, Any] | None:
    """Where the SSH keys are mounted: the ``node`` container (Kubeflow Trainer's rule), else the pod's first
    container, as mpi-operator does, so workers whose container has another name can still be reached."""
    found = ps.container(c.NODE)
    if found is not None:
        return found
    containers = ps.pod_spec.get("containers")
    first = containers[0] if isinstance(containers, list) and containers else None
    return first if isinstance(first, dict) else None


def slots(info: Info) -> int:
    tj = info.trainjob.spec.trainer
    if tj is not None and isinstance(tj.num_proc_per_node, int):
        return tj.num_proc_per_node
    value = policy(info).num_proc_per_node or 1
    gpus = info.gpu_count()
    return gpus if value == 1 and gpus > 1 else value


def hostfile(info: Info) -> str:
    n = slots(info)
    hydra = implementation(info) != "OpenMPI"
    fmt = "{host}:{n}\n" if hydra else "{host} slots={n}\n"
    worker = worker_pod_set(info)
    lines = []
    for ps in info.pod_sets:
        if ps is worker:
            lines += [fmt.format(host=h, n=n) for h in ps.endpoints]
        elif ps.name == c.LAUNCHER and policy(info).run_launcher_as_node:
            # Hydra starts the ranks of a host without ssh only when it knows the host for its own: Intel MPI when
            # the name is its hostname, MPICH when the name resolves to its address, which the JobSet's DNS
            # record does only seconds after the pod starts. The launcher runs no sshd, so it is listed by the
            # hostname JobSet gives its pod (in its /etc/hosts from the start), not by <hostname>.<subdomain>.
            lines += [fmt.format(host=h.split(".")[0] if hydra else h, n=n) for h in ps.endpoints]
    return "".join(lines)


def launcher_env(info: Info) -> list[tuple[str, str]]:
    impl, n = implementation(info), str(slots(info))
    if impl == "Intel":
        return [
            ("I_MPI_HYDRA_HOST_FILE", c.MPI_HOSTFILE_PATH),
            ("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", _RSH_ARGS),
            ("I_MPI_PERHOST", n),
        ]
    if impl == "MPICH":
        return [("HYDRA_HOST_FILE", c.MPI_HOSTFILE_PATH), ("HYDRA_LAUNCH_EXTRA_ARGS", _RSH_ARGS)]
    return [
        ("OMPI_MCA_orte_default_hostfile", c.MPI_HOSTFILE_PATH),
        ("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        ("OMPI_MCA_orte_set_default_slots", n),
        ("OMPI_MCA_plm_rsh_args", _RSH_ARGS),
    ]


def reserved_env(impl: str) -> tuple[str, ...]:
    return {"Intel": (*c.INTEL_MPI_ENV, "I_MPI_PERHOST"), "MPICH": c.MPICH_ENV}.get(impl, c.OPENMPI_ENV)


class MPI:
    name = "MPI"

    def enforce_ml_policy(self, info: Info) -> None:
        if not applies(info):
            return
        pol = policy(info)
        worker = worker_pod_set(info)
        launcher = info.by_name(c.LAUNCHER)
        tj = info.trainjob.spec.trainer
        assert info.ml_policy is not None
        num_nodes = tj.num_nodes if tj is not None and tj.num_nodes is not None else info.ml_policy.num_nodes
        if launcher is not None:
            launcher.count = 1
        if worker is not None and (num_nodes is not None or launcher is not None):
            n = num_nodes if num_nodes is not None else 1
            worker.count = max(n - 1, 1) if pol.run_launcher_as_node else n

        mount = pol.ssh_auth_mount_path or "/root/.ssh"
        ssh_volume = {
            "name": c.MPI_SSH_AUTH_VOLUME,
            "secret": {
                "secretName": f"{info.name}-mpi-ssh-auth",
                "defaultMode": 0o400,
                "items": [
                    {"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                    {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                    {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644},
                ],
            },
        }
        for ps in (worker, launcher):
            if ps is None:
                continue
            e.add_volume(ps.pod_spec, copy.deepcopy(ssh_volume))
            main = ssh_container(ps)
            if main is not None:
                e.add_mount(main, c.MPI_SSH_AUTH_VOLUME, mount)
        if launcher is not None:
            e.add_volume(
                launcher.pod_spec,
                {
                    "name": c.MPI_HOSTFILE_VOLUME,
                    "configMap": {
                        "name": f"{info.name}-mpi-hostfile",
                        "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
                    },
                },
            )
            node = launcher.container(c.NODE)
            if node is not None:
                e.add_mount(node, c.MPI_HOSTFILE_VOLUME, c.MPI_HOSTFILE_DIR)
                for name, value in launcher_env(info):
                    e.set_env(node, name, value)
        if worker is not None and implementation(info) in ("Intel", "MPICH"):
            # Intel MPI's proxies on the workers connect back to the launcher by its hostname, the bare name JobSet
            # gives the pod, which resolves only inside the JobSet's headless service: mpi-operator's search domain,
            # for Intel MPI and MPICH alike.
            e.add_dns_search(worker.pod_spec, f"{info.subdomain}.{info.namespace}.svc.{c.CLUSTER_DOMAIN}")

    def build(self, info: Info, keygen: KeyGen) -> list[dict[str, Any]]:
        if not applies(info):
            return []
        keys = keygen()
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": object_meta(info, f"{info.name}-mpi-ssh-auth"),
            "type": "kubernetes.io/ssh-auth",
            "immutable": True,
            "data": {"ssh-privatekey": _b64(keys.private_pem), "ssh-publickey": _b64(keys.public_openssh)},
        }
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": object_meta(info, f"{info.name}-mpi-hostfile"),
            "data": {"hostfile": hostfile(info)},
        }
        return [secret, config_map]

    def validate(self, info: Info, old: TrainJob | None) -> Result:
        result = Result()
        if not applies(info):
            return result
        pol = policy(info)
        tj = info.trainjob.spec.trainer
        if (
            tj is not None
            and (tj.num_nodes or 0) >= 2
            and pol.run_launcher_as_node
            and (info.by_name(c.LAUNCHER) is None or info.by_name(c.NODE) is None)
        ):
            result.error(
                "spec.trainer.numNodes",
                "must have 1 when MPI trainingRuntime with enabled runLauncherAsNode does not have either "
                "launcher and node",
                "add `launcher` and `node` replicated jobs to the runtime, or set numNodes: 1",
            )
        if tj is not None and isinstance(tj.num_proc_per_node, str):
            result.error(
                "spec.trainer.numProcPerNode",
                f"must be an integer for MPI runtimes, got {tj.num_proc_per_node!r}",
                "set the number of MPI slots per node, e.g. numProcPerNode: 2",
            )
        result.add(e.reserved_env(tj.env if tj else None, reserved_env(implementation(info)),
                                  "remove them: the MPI runtime sets them from the hostfile"))
        _workers(info, result)
        return result


def _workers(info: Info, result: Result) -> None:
    """Say where the hostfile's workers and the SSH keys go when that differs from Kubeflow Trainer's rule."""
    worker = worker_pod_set(info)
    others = [p.name for p in info.pod_sets if p.name != c.LAUNCHER]
    if worker is None:
        if others and not policy(info).run_launcher_as_node:
            result.warn(
                "spec.runtimeRef",
                f"runtime {info.runtime.name!r} has no MPI worker job: no replicated job is named 'node' (found "
                f"{', '.join(others)}), so the hostfile lists no workers and every rank runs on the launcher",
                "name the MPI worker replicated job 'node'",
            )
        return
    main = ssh_container(worker)
    if worker.name != c.NODE or (main is not None and main.get("name") != c.NODE):
        cname = main.get("name") if main is not None else None
        result.warn(
            "spec.runtimeRef",
            f"MPI workers are replicated job {worker.name!r} with container {cname!r}: kubetrain lists its pods in "
            "the hostfile and mounts the SSH keys into that container (mpi-operator's rule); Kubeflow Trainer does "
            "both only for a job and a container named 'node'",
            "name the worker replicated job and its container 'node' so the runtime works the same everywhere",
        )
