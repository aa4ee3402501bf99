"""The Flux policy: the cases of Kubeflow Trainer v2.3's Flux plugin tests (pkg/runtime/framework/plugins/flux), as
table tests on the compiled objects, plus the script text and the CURVE Secret byte for byte."""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from kubetrain.api import constants as c
from kubetrain.api.loader import load_text
from kubetrain.compiler import (
    CurveKeyPair,
    compile_trainjob,
    fixed_curve_keygen,
    fixed_keygen,
    uid_curve_keygen,
    validate_trainjob,
)
from kubetrain.compiler.keys import z85
from kubetrain.compiler.plugins import flux, flux_scripts
from tests.builders import RuntimeBuilder, TrainJobBuilder, compile_objects, container, jobset, rjob

Obj = dict[str, Any]

OWNER = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainJob",
    "name": "test-job",
    "uid": "test-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}


def flux_runtime(**policy: Any) -> RuntimeBuilder:
    return RuntimeBuilder().label(c.LABEL_FRAMEWORK, "flux").ml(flux=policy).trainer()


def make_job(**trainer: Any) -> TrainJobBuilder:
    tj = TrainJobBuilder(name="test-job")
    tj.obj["metadata"]["uid"] = "test-uid"
    return tj.trainer(**trainer)


def pod_spec(js: Obj, name: str = "node") -> Obj:
    return rjob(js, name)["template"]["spec"]["template"]["spec"]  # type: ignore[no-any-return]


# --- TestFlux: what EnforceMLPolicy and Build make ---


def test_no_action_when_the_flux_policy_is_nil() -> None:
    objects = compile_objects(make_job(numNodes=2).build(), RuntimeBuilder().trainer().build())
    assert not [k for k in objects if "flux" in k]
    assert "initContainers" not in pod_spec(objects["JobSet/test-job"])


def test_flux_mutations_are_applied_correctly() -> None:
    cm, curve = "test-job-flux-entrypoint", "test-job-flux-curve"
    objects = compile_objects(make_job(numNodes=2).build(), flux_runtime(numProcPerNode=1).build())
    pod = pod_spec(objects["JobSet/test-job"])
    assert pod["initContainers"] == [{
        "name": "flux-installer",
        "image": "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy",
        "command": ["/bin/bash", "/etc/flux-config/init.sh"],
        "volumeMounts": [
            {"name": "flux-install", "mountPath": "/mnt/flux"},
            {"name": cm, "mountPath": "/etc/flux-config", "readOnly": True},
        ],
    }]
    (node,) = pod["containers"]
    assert node["volumeMounts"] == [
        {"name": "flux-install", "mountPath": "/mnt/flux"},
        {"name": "spack-install", "mountPath": "/opt/software"},
        {"name": cm, "mountPath": "/etc/flux-config", "readOnly": True},
        {"name": "flux-curve", "mountPath": "/curve", "readOnly": True},
        {"name": "shared-memory", "mountPath": "/dev/shm", "readOnly": True},
    ]
    assert pod["volumes"] == [
        {"name": "spack-install", "emptyDir": {}},
        {"name": "flux-install", "emptyDir": {}},
        {"name": cm, "configMap": {"name": cm, "defaultMode": 0o755}},
        {"name": "shared-memory", "emptyDir": {"medium": "Memory"}},
        {"name": "flux-curve", "secret": {"secretName": curve, "defaultMode": 0o400}},
    ]
    assert "env" not in node  # Flux sets no env of its own
    config_map, secret = objects[f"ConfigMap/{cm}"], objects[f"Secret/{curve}"]
    for obj in (config_map, secret):
        assert obj["metadata"] == {"name": obj["metadata"]["name"], "namespace": "default", "ownerReferences": [OWNER]}
    assert sorted(config_map["data"]) == ["entrypoint.sh", "init.sh"]
    assert sorted(secret["data"]) == ["curve.cert"] and set(secret) == {"apiVersion", "kind", "metadata", "data"}
    # The ConfigMap and Secret come before the JobSet that mounts them.
    kinds = [f"{o['kind']}/{o['metadata']['name']}" for o in compile_trainjob(
        make_job(numNodes=2).build(), flux_runtime().build(), keygen=fixed_keygen())]
    assert kinds.index(f"ConfigMap/{cm}") < kinds.index(f"Secret/{curve}") < kinds.index("JobSet/test-job")


def test_the_integration_case_wraps_command_and_args_and_sizes_the_job() -> None:
    """Upstream's controller integration test: runtime and TrainJob both run ``trainjob`` with arg ``trainjob``."""
    rt = RuntimeBuilder().ml(numNodes=2, flux={"numProcPerNode": 1}).trainer(
        image="test:trainjob", command=["trainjob"], args=["trainjob"]).build()
    tj = make_job(numNodes=2, image="test:trainjob", command=["trainjob"], args=["trainjob"]).build()
    js = jobset(tj, rt)
    node = container(js, "node")
    assert node["image"] == "test:trainjob"
    assert node["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", "trainjob trainjob"]
    # Upstream drops the TrainJob's args (they are in the command); the runtime's args stay on the container.
    assert node["args"] == ["trainjob"]
    spec = rjob(js, "node")
    assert (spec["replicas"], spec["template"]["spec"]["parallelism"], spec["template"]["spec"]["completions"]) == (
        1, 2, 2)


@pytest.mark.parametrize(("trainer", "runtime_container", "want"), [
    # upstream's TestGetOriginalCommand
    ({"command": ["python"], "args": ["train.py", "--epochs", "10"]}, {}, "python train.py --epochs 10"),
    ({"command": ["  python  "], "args": [" script.py "]}, {}, "python    script.py"),
    # the runtime's command when the TrainJob gives none; the TrainJob's args follow it
    ({}, {"command": ["lmp", "-in", "in.lj"]}, "lmp -in in.lj"),
    ({"args": ["-v", "x"]}, {"command": ["lmp"]}, "lmp -v x"),
    ({}, {}, ""),
])
def test_original_command(trainer: Obj, runtime_container: Obj, want: str) -> None:
    rt = RuntimeBuilder().ml(flux={}).trainer(**runtime_container).build()
    node = container(jobset(make_job(numNodes=1, **trainer).build(), rt), "node")
    assert node["command"] == ["/bin/bash", "/etc/flux-config/entrypoint.sh", want]


# --- the scripts ---


def scripts(tj: TrainJobBuilder, rt: RuntimeBuilder) -> Obj:
    objects = compile_objects(tj.build(), rt.build())
    return objects[f"ConfigMap/{tj.obj['metadata']['name']}-flux-entrypoint"]["data"]  # type: ignore[no-any-return]


def test_templates_are_upstreams_byte_for_byte() -> None:
    """SHA-256 of kubeflow/trainer v2.3.0 pkg/runtime/framework/plugins/flux/templates/*: a changed template would
    make every Flux TrainJob's ConfigMap differ from the one Kubeflow Trainer writes."""
    digests = {name: hashlib.sha256(text.encode()).hexdigest() for name, text in (
        ("broker.toml", flux_scripts.BROKER_TOML), ("entrypoint.sh", flux_scripts.ENTRYPOINT_SH),
        ("init.sh", flux_scripts.INIT_SH))}
    assert digests == {
        "broker.toml": "d376bed489b1b3872c5b3430836639450c35e1fbac99a080b078e4f3a733717f",
        "entrypoint.sh": "eafc5adfc066a45ce41a4ac4135e5338cdb5b578f6a5785d28edb0ac8e6f0528",
        "init.sh": "0688b50e09faf7df7cd11438a175e1ec64a08ea5846aa64dd25660695dcde222",
    }


def test_entrypoint_for_cpus_and_gpus() -> None:
    cpu = scripts(make_job(numNodes=2, numProcPerNode=4), flux_runtime())["entrypoint.sh"]
    assert cpu == flux_scripts.fill(flux_scripts.ENTRYPOINT_SH, "--cores=0-3", "test-job-node-0-0", "-N 2 -n 8")
    assert "flux R encode --hosts=${hosts} --cores=0-3 > /tmp/R\n" in cpu
    assert 'mainHost="test-job-node-0-0"\n' in cpu and 'flags="-N 2 -n 8  "\n' in cpu
    # GPUs per node from the runtime's node container, else resourcesPerNode; -g is GPUs per task
    rt = RuntimeBuilder().ml(flux={"numProcPerNode": 2}).trainer(resources={"limits": {"nvidia.com/gpu": 2}})
    gpu = scripts(make_job(numNodes=3), rt)["entrypoint.sh"]
    assert "--cores=0-1 --gpu=0-1 > /tmp/R\n" in gpu and 'flags="-N 3 -n 6 -g 2  "\n' in gpu
    one = scripts(make_job(numNodes=1).resources(limits={"nvidia.com/gpu": 1}), flux_runtime())["entrypoint.sh"]
    assert "--cores=0 --gpu=0 > /tmp/R\n" in one and 'flags="-N 1 -n 1 -g 1  "\n' in one


def test_init_script_and_broker_config() -> None:
    tj = TrainJobBuilder(name="lammps", namespace="hpc").trainer(numNodes=4)
    init = scripts(tj, flux_runtime())["init.sh"]
    broker = flux_scripts.fill(flux_scripts.BROKER_TOML, "tcp://eth0:%p", "tcp://%h.lammps.hpc.svc.cluster.local:%p",
                               "lammps-node-0-[0-3]", "fcfs")
    assert init == flux_scripts.fill(flux_scripts.INIT_SH, "/opt/view", "lammps-0", "lammps-node-0-[0-3]", broker)
    assert '{ host="lammps-node-0-[0-3]"},\n' in init


def test_settings_from_the_runtime_env_then_the_trainjob_env() -> None:
    rt = RuntimeBuilder().ml(flux={}).trainer(env=[
        {"name": "FLUX_NETWORK_DEVICE", "value": "ib0"},
        {"name": "FLUX_QUEUE_POLICY", "value": "easy"},
        {"name": "FLUX_VIEW_IMAGE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},  # not a value
        {"name": "OTHER", "value": "x"},
    ])
    rocky = "ghcr.io/converged-computing/flux-view-rocky:tag-9"
    tj = make_job(numNodes=2, env=[{"name": "FLUX_VIEW_IMAGE", "value": rocky},
                                   {"name": "FLUX_QUEUE_POLICY", "value": "conservative"}])
    objects = compile_objects(tj.build(), rt.build())
    init = objects["ConfigMap/test-job-flux-entrypoint"]["data"]["init.sh"]
    assert 'default_bind = "tcp://ib0:%p"' in init and 'queue-policy = "conservative"' in init
    installer = container(objects["JobSet/test-job"], "node", "flux-installer", init=True)
    assert installer["image"] == rocky


def test_only_the_job_named_node_gets_flux() -> None:
    rt = RuntimeBuilder().ml(flux={}).rjob("prepare", containers=[{"name": "node", "image": "i"}]).trainer()
    js = jobset(make_job(numNodes=1).build(), rt.build())
    assert "initContainers" not in pod_spec(js, "prepare") and "volumes" not in pod_spec(js, "prepare")
    assert [x["name"] for x in pod_spec(js)["initContainers"]] == ["flux-installer"]


def test_runtime_init_containers_stay_first() -> None:
    rt = RuntimeBuilder().ml(flux={}).rjob("node", ancestor="trainer", containers=[{"name": "node", "image": "i"}],
                                           init_containers=[{"name": "warmup", "image": "i"}])
    js = jobset(make_job(numNodes=1).build(), rt.build())
    assert [x["name"] for x in pod_spec(js)["initContainers"]] == ["warmup", "flux-installer"]


# --- TestValidate ---


def errors(tj: TrainJobBuilder, rt: RuntimeBuilder) -> list[tuple[str, str]]:
    return [(f.path, f.message) for f in validate_trainjob(tj.build(), rt.build()).errors]


def test_valid_when_the_flux_policy_is_present_or_nil() -> None:
    assert errors(make_job(numNodes=2), flux_runtime()) == []
    assert errors(make_job(numNodes=2), RuntimeBuilder().trainer()) == []


def test_invalid_when_the_runtime_num_proc_per_node_is_below_one() -> None:
    text = """
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata: {name: flux}
spec:
  mlPolicy: {flux: {numProcPerNode: 0}}
"""
    loaded = load_text(text, "rt.yaml")
    assert [(f.path, f.message) for f in loaded.result.errors] == [
        ("spec.mlPolicy.flux.numProcPerNode", "must be greater than or equal to 1, got 0")]


def test_invalid_when_the_trainjob_num_proc_per_node_is_below_one() -> None:
    assert ("spec.trainer.numProcPerNode", "must be greater than or equal to 1 for Flux TrainJob, got 0") in errors(
        make_job(numNodes=2, numProcPerNode=0), flux_runtime(numProcPerNode=1))


def test_invalid_when_the_node_job_has_the_reserved_installer() -> None:
    rt = RuntimeBuilder().ml(flux={}).rjob("node", ancestor="trainer", containers=[{"name": "node", "image": "i"}],
                                           init_containers=[{"name": "flux-installer", "image": "ubuntu:22.04"}])
    found = validate_trainjob(make_job(numNodes=1).build(), rt.build()).errors
    assert [(f.path, f.message) for f in found] == [(
        "spec.trainer.initContainers",
        "InitContainer 'flux-installer' is reserved: the Flux runtime adds it to replicated job \"node\"",
    )]
    assert "rename the init container" in (found[0].fix or "")


def test_the_reserved_installer_added_by_a_patch_is_invalid_too() -> None:
    rt = RuntimeBuilder().ml(flux={}).trainer()
    tj = make_job(numNodes=1).spec(podTemplateOverrides=[{
        "targetJobs": [{"name": "node"}], "spec": {"initContainers": [{"name": "flux-installer", "image": "x"}]}}])
    assert [p for p, _ in errors(tj, rt)] == ["spec.trainer.initContainers"]


@pytest.mark.parametrize(("trainer", "want"), [
    # Kubeflow Trainer's plugin dereferences these unguarded (its reconcile fails); kubetrain says so at admission.
    ({}, ("spec.trainer.numNodes", 'must be set for Flux runtime "test-runtime": the Flux brokers\' host list is '
                                   "made from it")),
    ({"numNodes": 2, "numProcPerNode": "auto"}, ("spec.trainer.numProcPerNode",
                                                 "must be an integer for a Flux runtime, got 'auto'")),
])
def test_what_upstream_cannot_compile_is_refused(trainer: Obj, want: tuple[str, str]) -> None:
    tj = TrainJobBuilder(name="test-job").trainer(**trainer) if trainer else TrainJobBuilder(name="test-job")
    assert errors(tj, flux_runtime()) == [want]


def test_flux_and_another_policy_are_refused() -> None:
    from kubetrain.api.validation import validate_runtime_object

    both = RuntimeBuilder().ml(flux={}, torch={}).trainer().build()
    assert [f.path for f in validate_runtime_object(both).errors] == ["spec.mlPolicy"]
    assert validate_runtime_object(flux_runtime().build()).errors == []


# --- the CURVE certificate (TestDeterministicCurve, TestBuildCurveSecret, TestEncodeZ85) ---


def curve_cert(uid: str, name: str = "test-job", **kw: Any) -> str:
    tj = TrainJobBuilder(name=name)
    tj.obj["metadata"]["uid"] = uid
    objects = compile_trainjob(tj.trainer(numNodes=1).build(), flux_runtime().build(), keygen=fixed_keygen(), **kw)
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    return base64.b64decode(secret["data"]["curve.cert"]).decode()


def test_the_certificate_is_derived_from_the_uid() -> None:
    cert = curve_cert("12345-67890")
    assert cert == curve_cert("12345-67890")
    assert cert != curve_cert("different-uid")
    keys = uid_curve_keygen("12345-67890")
    assert cert == (
        "#  ZeroMQ CURVE Secret Certificate\n#  Generated by Kubeflow Trainer\n\nmetadata\n"
        f'    name = "test-job"\ncurve\n    public-key = "{keys.public_z85}"\n    secret-key = "{keys.secret_z85}"\n'
    )
    assert keys.secret_z85 == z85(hashlib.sha256(b"12345-67890").digest()) and len(keys.public_z85) == 40


def test_the_curve_keygen_is_injected() -> None:
    pair = CurveKeyPair(public_z85="p" * 40, secret_z85="s" * 40)
    cert = curve_cert("any", curve_keygen=fixed_curve_keygen(pair))
    assert f'    public-key = "{"p" * 40}"\n    secret-key = "{"s" * 40}"\n' in cert


def test_x25519_public_key_is_rfc_7748s() -> None:
    """RFC 7748 section 6.1: Alice's key pair, through the same derivation (the seed is taken as is)."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    secret = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    public = X25519PrivateKey.from_private_bytes(secret).public_key().public_bytes_raw()
    assert public.hex() == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a"


@pytest.mark.parametrize(("data", "want"), [
    (bytes(32), "0" * 40),
    (bytes([1, 2, 3]), ""),  # not a multiple of 4: Z85 cannot encode it
    (bytes(4), "00000"),
    (bytes.fromhex("864FD26FB559F75B"), "HelloWorld"),  # RFC 32's test vector
])
def test_z85(data: bytes, want: str) -> None:
    assert z85(data) == want


# --- small functions (TestGenerateRange, TestGenerateHostlist) ---


@pytest.mark.parametrize(("size", "start", "want"), [(1, 0, "0"), (4, 0, "0-3"), (3, 10, "10-12")])
def test_span(size: int, start: int, want: str) -> None:
    assert flux.span(size, start) == want


@pytest.mark.parametrize(("prefix", "size", "want"), [
    ("lammps-job", 1, "lammps-job-node-0-[0]"),
    ("flux-cluster", 4, "flux-cluster-node-0-[0-3]"),
    ("", 2, "-node-0-[0-1]"),
])
def test_hostlist(prefix: str, size: int, want: str) -> None:
    assert flux.hostlist(prefix, size) == want


def test_fill_takes_values_with_percent_signs() -> None:
    assert flux_scripts.fill("a=%s b=%s", "%p", "%s") == "a=%p b=%s"
    with pytest.raises(ValueError, match="2 markers, got 1"):
        flux_scripts.fill("%s%s", "x")
