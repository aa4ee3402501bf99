"""The CRDs' CEL rules, evaluated with a real CEL implementation (cel-python) on objects the way the API
server applies them: each rule at its schema node with ``self`` (and ``oldSelf`` for transition rules)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubetrain.api.crd import generate_crds

celpy = pytest.importorskip("celpy", reason="cel-python not installed")

CRDS = {c["spec"]["names"]["kind"]: c for c in generate_crds()}
_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def _program(rule: str) -> Any:
    if rule not in _PROGRAMS:
        _PROGRAMS[rule] = _ENV.program(_ENV.compile(rule))
    return _PROGRAMS[rule]


def _check(schema: dict[str, Any], value: Any, old: Any, path: str, out: list[str]) -> None:
    for rule in schema.get("x-kubernetes-validations", []):
        transition = "oldSelf" in rule["rule"]
        if transition and old is None:
            continue  # transition rules only run on updates where the old value exists
        activation = {"self": celpy.json_to_cel(value)}
        if transition:
            activation["oldSelf"] = celpy.json_to_cel(old)
        try:
            ok = bool(_program(rule["rule"]).evaluate(activation))
        except celpy.CELEvalError:
            ok = False  # an evaluation error fails the rule, as on the API server
        if not ok:
            out.append(f"{path}: {rule['message']}")
    if isinstance(value, dict):
        for name, sub in schema.get("properties", {}).items():
            if name in value:
                _check(
                    sub, value[name], old.get(name) if isinstance(old, dict) else None, f"{path}.{name}", out
                )
    elif isinstance(value, list) and "items" in schema:
        keys = schema.get("x-kubernetes-list-map-keys")
        olds = {tuple(o.get(k) for k in keys): o for o in old or []} if keys else {}
        for i, item in enumerate(value):
            old_item = olds.get(tuple(item.get(k) for k in keys)) if keys else None
            _check(schema["items"], item, old_item, f"{path}[{i}]", out)


def cel(kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    out: list[str] = []
    _check(CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"], obj, old, "", out)
    return out


def trainjob(name: str = "job", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec}}


def runtime(**ml: Any) -> dict[str, Any]:
    return {"metadata": {"name": "r"}, "spec": {"mlPolicy": ml}}


TORCH_NPROC = (
    ".spec.mlPolicy.torch.numProcPerNode: NumProcPerNode must be equal to auto, cpu, gpu, or int value"
)


def test_a_plain_trainjob_passes() -> None:
    assert cel("TrainJob", trainjob()) == []


@pytest.mark.parametrize(
    ("name", "messages"),
    [
        ("Job", [": metadata.name must match RFC 1035 DNS label format"]),
        ("1job", [": metadata.name must match RFC 1035 DNS label format"]),
        ("job-", [": metadata.name must match RFC 1035 DNS label format"]),
        ("a" * 64, [": metadata.name must be no more than 63 characters"]),
        ("a" * 63, []),
        ("my-job-2", []),
    ],
)
def test_trainjob_name(name: str, messages: list[str]) -> None:
    assert cel("TrainJob", trainjob(name)) == messages


@pytest.mark.parametrize(
    ("uri", "ok"),
    [("", True), ("hf://org/model", True), ("s3://b/k", True), ("org/model", False), ("hf://", False)],
)
def test_storage_uri(uri: str, ok: bool) -> None:
    got = cel("TrainJob", trainjob(initializer={"model": {"storageUri": uri}}))
    assert got == (
        []
        if ok
        else [
            ".spec.initializer.model.storageUri: storageUri may be empty, or it must be a valid URI (scheme://...)"
        ]
    )


@pytest.mark.parametrize(
    ("value", "messages"),
    [
        ("trainer.kubeflow.org/trainjob-controller", []),
        ("kueue.x-k8s.io/multikueue", []),
        (
            "example.com/mine",
            [
                ".spec.managedBy: ManagedBy must be trainer.kubeflow.org/trainjob-controller or "
                "kueue.x-k8s.io/multikueue if set"
            ],
        ),
    ],
)
def test_managed_by(value: str, messages: list[str]) -> None:
    assert cel("TrainJob", trainjob(managedBy=value)) == messages


@pytest.mark.parametrize(
    ("value", "messages"),
    [
        (4, []),
        ("auto", []),
        ("gpu", []),
        (0, [".spec.trainer.numProcPerNode: numProcPerNode must be greater than or equal to 1"]),
        (
            "many",
            [".spec.trainer.numProcPerNode: numProcPerNode must be an integer or one of auto, cpu, gpu"],
        ),
    ],
)
def test_trainer_num_proc_per_node(value: Any, messages: list[str]) -> None:
    assert cel("TrainJob", trainjob(trainer={"numProcPerNode": value})) == messages


@pytest.mark.parametrize(
    "field",
    [
        ("runtimeRef", {"name": "other"}),
        ("initializer", {"dataset": {"storageUri": "hf://x/y"}}),
        ("activeDeadlineSeconds", 60),
        ("managedBy", "kueue.x-k8s.io/multikueue"),
    ],
    ids=lambda f: f[0],
)
def test_immutable_on_update(field: tuple[str, Any]) -> None:
    name, new_value = field
    old = trainjob(
        initializer={"dataset": {"storageUri": "hf://a/b"}},
        trainer={"numNodes": 1},
        activeDeadlineSeconds=30,
        managedBy="trainer.kubeflow.org/trainjob-controller",
    )
    new = copy.deepcopy(old)
    new["spec"][name] = new_value
    assert cel("TrainJob", new, old) == [f".spec.{name}: field is immutable"]
    assert cel("TrainJob", copy.deepcopy(old), old) == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"image": "x:2"}, "image"),
        ({"command": ["python"]}, "command"),
        ({"env": []}, "env"),
        ({"numProcPerNode": 4}, "numProcPerNode"),
        ({"resourcesPerNode": {"limits": {"cpu": "2"}}}, "resourcesPerNode"),
        ({"args": ["--x"]}, "args"),  # added: absent before
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_trainer_is_immutable_but_num_nodes(change: dict[str, Any], field: str) -> None:
    old = trainjob(trainer={"numNodes": 2, "image": "x:1", "command": ["torchrun"], "env": [{"name": "A"}],
                            "numProcPerNode": 2})
    new = copy.deepcopy(old)
    new["spec"]["trainer"].update(change)
    assert cel("TrainJob", new, old) == [
        f".spec.trainer: field is immutable: {field} cannot change (only numNodes may, for an elastic runtime)"
    ]
    scaled = copy.deepcopy(old)
    scaled["spec"]["trainer"]["numNodes"] = 5  # what the scale subresource writes; the webhook checks the range
    assert cel("TrainJob", scaled, old) == []
    del scaled["spec"]["trainer"]["numNodes"]
    assert cel("TrainJob", scaled, old) == []


def test_suspend_and_patches_stay_mutable_but_a_patch_manager_does_not_change() -> None:
    old = trainjob(suspend=True, runtimePatches=[{"manager": "acme.io/m"}])
    new = trainjob(suspend=False, runtimePatches=[{"manager": "acme.io/m"}, {"manager": "acme.io/n"}])
    assert cel("TrainJob", new, old) == []


def test_setting_an_unset_immutable_field_is_not_a_transition() -> None:
    # Transition rules only compare values that exist on both sides (the API server's semantics).
    assert cel("TrainJob", trainjob(trainer={"numNodes": 2}), trainjob()) == []


def test_one_ml_policy() -> None:
    assert cel("ClusterTrainingRuntime", runtime(torch={})) == []
    assert cel("ClusterTrainingRuntime", runtime(torch={}, mpi={})) == [
        ".spec.mlPolicy: Only one of the policy can be configured"
    ]
    assert cel("TrainingRuntime", runtime(jax={}, xgboost={}, flux={})) == [
        ".spec.mlPolicy: Only one of the policy can be configured"
    ]
    assert cel("ClusterTrainingRuntime", runtime(tensorflow={})) == []
    assert cel("ClusterTrainingRuntime", runtime(tensorflow={}, xgboost={})) == [
        ".spec.mlPolicy: Only one of the policy can be configured"
    ]


def test_elastic_policy_excludes_num_nodes() -> None:
    got = cel("ClusterTrainingRuntime", runtime(numNodes=2, torch={"elasticPolicy": {"maxNodes": 4}}))
    assert got == [".spec.mlPolicy: numNodes should not be set if torch.elasticPolicy is configured"]


@pytest.mark.parametrize(
    ("policy", "value", "messages"),
    [
        ("torch", "auto", []),
        ("torch", 2, []),
        (
            "torch",
            0,
            [TORCH_NPROC],
        ),
        (
            "torch",
            "many",
            [TORCH_NPROC],
        ),
        ("mpi", 0, [".spec.mlPolicy.mpi.numProcPerNode: NumProcPerNode in mpiPolicy must be >= 1"]),
        ("flux", 0, [".spec.mlPolicy.flux.numProcPerNode: NumProcPerNode in fluxPolicy must be >= 1"]),
        ("mpi", 1, []),
    ],
)
def test_policy_num_proc_per_node(policy: str, value: Any, messages: list[str]) -> None:
    assert cel("ClusterTrainingRuntime", runtime(**{policy: {"numProcPerNode": value}})) == messages


def test_env_injection_may_not_target_the_node_container() -> None:
    target = {"jobName": "launcher", "containerNames": ["sidecar", "node"]}
    got = cel("ClusterTrainingRuntime", runtime(torch={"envInjection": {"targets": [target]}}))
    assert got == [
        ".spec.mlPolicy.torch.envInjection.targets[0].containerNames: containerNames must not include the "
        "main node container because PET_* envs are always injected into it"
    ]


def test_jobset_policies_of_a_runtime_are_immutable() -> None:
    old = {
        "spec": {"template": {"spec": {"network": {"publishNotReadyAddresses": True}, "replicatedJobs": []}}}
    }
    new = copy.deepcopy(old)
    new["spec"]["template"]["spec"]["network"]["publishNotReadyAddresses"] = False
    assert cel("TrainingRuntime", new, old) == [".spec.template.spec.network: Value is immutable"]
