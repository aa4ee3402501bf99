"""MPI plugin: hostfiles, env and volumes for OpenMPI, Intel MPI and MPICH (§9.1 cases 11-13)."""

from __future__ import annotations

import base64

import pytest

from kubetrain.compiler import validate_trainjob
from tests.builders import RuntimeBuilder, TrainJobBuilder, compile_objects, container, env, rjob

HOSTFILE = "ConfigMap/alpha-mpi-hostfile"


def mpi_runtime(impl: str = "OpenMPI", slots: int = 8, launcher_as_node: bool = False) -> RuntimeBuilder:
    return (
        RuntimeBuilder(kind="TrainingRuntime", namespace="default")
        .ml(numNodes=1, mpi={"numProcPerNode": slots, "mpiImplementation": impl, "sshAuthMountPath": "/root/.ssh",
                             "runLauncherAsNode": launcher_as_node})
        .trainer("launcher")
        .rjob("node", containers=[{"name": "node", "image": "img"}])
    )


def test_openmpi_two_nodes() -> None:
    tj = TrainJobBuilder(name="alpha", kind="TrainingRuntime").trainer(
        numNodes=2, env=[{"name": "TRAIN_JOB", "value": "value"}])
    objs = compile_objects(tj.build(), mpi_runtime().build())
    js = objs["JobSet/alpha"]
    assert rjob(js, "node")["template"]["spec"]["parallelism"] == 2
    assert rjob(js, "launcher")["template"]["spec"]["parallelism"] == 1
    launcher = container(js, "launcher")
    assert {m["name"]: m["mountPath"] for m in launcher["volumeMounts"]} == {
        "mpi-ssh-auth": "/root/.ssh", "mpi-hostfile": "/etc/mpi"}
    assert env(launcher) == {
        "TRAIN_JOB": "value",
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "8",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
    }
    node = container(js, "node")
    assert [m["name"] for m in node["volumeMounts"]] == ["mpi-ssh-auth"]
    assert "env" not in node
    assert objs[HOSTFILE]["data"]["hostfile"] == "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n"
    secret = objs["Secret/alpha-mpi-ssh-auth"]
    assert secret["type"] == "kubernetes.io/ssh-auth" and secret["immutable"] is True
    assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}
    assert base64.b64decode(secret["data"]["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    volumes = {v["name"]: v for v in rjob(js, "node")["template"]["spec"]["template"]["spec"]["volumes"]}
    assert volumes["mpi-ssh-auth"]["secret"]["defaultMode"] == 0o400


def test_gpu_count_becomes_slots_and_trainjob_overrides() -> None:
    rt = mpi_runtime(slots=1).build()
    tj = TrainJobBuilder(name="alpha", kind="TrainingRuntime").resources(limits={"nvidia.com/gpu": 5})
    objs = compile_objects(tj.build(), rt)
    assert "slots=5" in objs[HOSTFILE]["data"]["hostfile"]
    assert env(container(objs["JobSet/alpha"], "launcher"))["OMPI_MCA_orte_set_default_slots"] == "5"
    objs = compile_objects(tj.trainer(numProcPerNode=3).build(), rt)
    assert "slots=3" in objs[HOSTFILE]["data"]["hostfile"]


def test_launcher_as_node_counts_and_hostfile_order() -> None:
    tj = TrainJobBuilder(name="alpha", kind="TrainingRuntime").trainer(numNodes=10)
    objs = compile_objects(tj.build(), mpi_runtime(slots=1, launcher_as_node=True).build())
    assert rjob(objs["JobSet/alpha"], "node")["template"]["spec"]["parallelism"] == 9
    lines = objs[HOSTFILE]["data"]["hostfile"].splitlines()
    assert lines[0] == "alpha-launcher-0-0.alpha slots=1"
    assert lines[1:] == [f"alpha-node-0-{i}.alpha slots=1" for i in range(9)]


@pytest.mark.parametrize(
    ("impl", "line", "expected_env"),
    [
        ("Intel", "alpha-node-0-0.alpha:2", {"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile", "I_MPI_PERHOST": "2"}),
        ("MPICH", "alpha-node-0-0.alpha:2", {"HYDRA_HOST_FILE": "/etc/mpi/hostfile"}),
    ],
)
def test_intel_and_mpich_hostfiles(impl: str, line: str, expected_env: dict[str, str]) -> None:
    tj = TrainJobBuilder(name="alpha", kind="TrainingRuntime").trainer(numNodes=2)
    objs = compile_objects(tj.build(), mpi_runtime(impl=impl, slots=2).build())
    assert objs[HOSTFILE]["data"]["hostfile"].splitlines()[0] == line
    launcher_env = env(container(objs["JobSet/alpha"], "launcher"))
    for k, v in expected_env.items():
        assert launcher_env[k] == v
    assert not any(k.startswith("OMPI_") for k in launcher_env)


@pytest.mark.parametrize("impl", ["Intel", "MPICH"])
def test_hydra_lists_the_launcher_as_node_by_its_hostname(impl: str) -> None:
    """Hydra starts the launcher's own ranks without ssh only for a name it knows as its own (the launcher runs no
    sshd): the pod's hostname, not the <hostname>.<subdomain> the workers are listed by."""
    tj = TrainJobBuilder(name="alpha", kind="TrainingRuntime").trainer(numNodes=3)
    objs = compile_objects(tj.build(), mpi_runtime(impl=impl, slots=2, launcher_as_node=True).build())
    assert objs[HOSTFILE]["data"]["hostfile"].splitlines() == [
        "alpha-launcher-0-0:2", "alpha-node-0-0.alpha:2", "alpha-node-0-1.alpha:2"]


@pytest.mark.parametrize(("impl", "searches"), [("OpenMPI", None), ("Intel", ["alpha.default.svc.cluster.local"]),
                                                ("MPICH", ["alpha.default.svc.cluster.local"])])
def test_hydra_workers_resolve_the_launcher_hostname(impl: str, searches: list[str] | None) -> None:
    """Intel MPI's proxies on the workers connect back to the launcher by its bare hostname: the worker pods (only
    they) search the JobSet's headless service, for Intel MPI and MPICH alike, as mpi-operator's do. OpenMPI's
    launcher only connects out, by the hostfile's names."""
    tj = TrainJobBuilder(name="alpha", kind="TrainingRuntime").trainer(numNodes=2)
    js = compile_objects(tj.build(), mpi_runtime(impl=impl, slots=2).build())["JobSet/alpha"]
    pod = {name: rjob(js, name)["template"]["spec"]["template"]["spec"] for name in ("node", "launcher")}
    assert (pod["node"].get("dnsConfig") or {}).get("searches") == searches
    assert "dnsConfig" not in pod["launcher"]
    # a runtime that already searches there (e.g. written for mpi-operator's pods) keeps one entry
    own = {"dnsConfig": {"searches": ["alpha.default.svc.cluster.local"]}}
    rt = mpi_runtime(impl=impl, slots=2)
    rt.obj["spec"]["template"]["spec"]["replicatedJobs"].pop()
    js = compile_objects(tj.build(), rt.rjob("node", pod=own).build())["JobSet/alpha"]
    assert rjob(js, "node")["template"]["spec"]["template"]["spec"]["dnsConfig"] == own["dnsConfig"]


def test_deepspeed_builtin_shape() -> None:
    from kubetrain.runtimes import builtin_runtime

    rt = builtin_runtime("deepspeed-distributed")
    assert rt is not None
    tj = TrainJobBuilder(name="ds", runtime="deepspeed-distributed").trainer(
        numNodes=3, command=["mpirun", "python", "train.py"], env=[{"name": "X", "value": "1"}])
    objs = compile_objects(tj.build(), rt)
    js = objs["JobSet/ds"]
    assert rjob(js, "node")["template"]["spec"]["parallelism"] == 2
    assert container(js, "node")["command"] == ["/usr/sbin/sshd"]  # image/command untouched on sshd nodes
    assert env(container(js, "node"))["X"] == "1"  # env and resources do reach them (runLauncherAsNode)
    assert container(js, "launcher")["command"] == ["mpirun", "python", "train.py"]
    assert objs["ConfigMap/ds-mpi-hostfile"]["data"]["hostfile"] == (
        "ds-node-0-0.ds slots=1\nds-node-0-1.ds slots=1\nds-launcher-0-0.ds slots=1\n")
    assert container(js, "node")["volumeMounts"][0]["mountPath"] == "/home/mpiuser/.ssh"


def test_validation_rules() -> None:
    rt = RuntimeBuilder().ml(mpi={"runLauncherAsNode": True}).trainer("launcher").build()
    tj = TrainJobBuilder().trainer(numNodes=2, numProcPerNode="auto",
                                   env=[{"name": "OMPI_MCA_plm_rsh_args", "value": "x"}]).build()
    errors = {e.path: e.message for e in validate_trainjob(tj, rt).errors}
    assert errors["spec.trainer.numNodes"].startswith("must have 1 when MPI trainingRuntime with enabled")
    assert "must be an integer for MPI" in errors["spec.trainer.numProcPerNode"]
    assert errors["spec.trainer.env"] == "must not have reserved envs, invalid envs configured: [OMPI_MCA_plm_rsh_args]"


def test_intel_mpi_reads_its_hostfile_variable() -> None:
    objs = compile_objects(TrainJobBuilder(name="alpha", kind="TrainingRuntime").trainer(numNodes=2).build(),
                           mpi_runtime("Intel").build())
    launcher = env(container(objs["JobSet/alpha"], "launcher"))
    assert launcher["I_MPI_HYDRA_HOST_FILE"] == "/etc/mpi/hostfile"  # Intel's name (mpi-operator sets the same)
    assert "I_MPI_HYDRA_HOSTFILE" not in launcher


def ome_runtime() -> RuntimeBuilder:
    """Seed 003's OME MPI snippet: workers named `worker` with a container named `mpi-worker`."""
    return (
        RuntimeBuilder("mpi-horovod", kind="TrainingRuntime", namespace="default")
        .ml(numNodes=4, mpi={"numProcPerNode": 4})
        .trainer("launcher")
        .rjob("worker", parallelism=4, containers=[{"name": "mpi-worker", "image": "hv",
                                                     "command": ["/usr/sbin/sshd", "-D"]}])
    )


def test_ssh_keys_reach_workers_whatever_their_names() -> None:
    tj = TrainJobBuilder(name="hv", runtime="mpi-horovod", kind="TrainingRuntime").build()
    objs = compile_objects(tj, ome_runtime().build())
    worker = container(objs["JobSet/hv"], "worker", name="mpi-worker")
    assert {"name": "mpi-ssh-auth", "mountPath": "/root/.ssh"} in worker["volumeMounts"]
    assert objs["ConfigMap/hv-mpi-hostfile"]["data"]["hostfile"].startswith("hv-worker-0-0.hv slots=4\n")
    (warning,) = [w for w in validate_trainjob(tj, ome_runtime().build()).warnings if w.path == "spec.runtimeRef"]
    assert warning.message.startswith("MPI workers are replicated job 'worker' with container 'mpi-worker': kubetrain "
                                      "lists its pods in the hostfile and mounts the SSH keys into that container")


def test_no_worker_job_is_a_warning() -> None:
    rt = mpi_runtime().rjob("extra", containers=[{"name": "x", "image": "x"}]).build()
    rt.spec.template.spec.replicated_jobs = [r for r in rt.spec.template.spec.replicated_jobs if r.name != "node"]
    rt.spec.template.spec.replicated_jobs.append(rt.spec.template.spec.replicated_jobs[-1].model_copy(
        update={"name": "more"}))
    tj = TrainJobBuilder(name="alpha", kind="TrainingRuntime").build()
    messages = [w.message for w in validate_trainjob(tj, rt).warnings]
    assert any(m.startswith("runtime 'test-runtime' has no MPI worker job: no replicated job is named 'node' (found "
                            "extra, more)") for m in messages), messages
