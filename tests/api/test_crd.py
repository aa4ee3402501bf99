"""The generated CRDs: structural, accepted by Kubernetes' own schema, fresh on disk, and they admit
upstream's shipped runtimes."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from openapi_schema_validator import OAS30Validator

from kubetrain.api.crd import crd_filename, dump_yaml, generate_crds

ROOT = Path(__file__).resolve().parents[2]
CRD_DIR = ROOT / "manifests" / "base" / "crds"
UPSTREAM = Path("/work/shared/reference/upstream")
if not UPSTREAM.exists():  # CI clones main with shared/ beside it
    UPSTREAM = ROOT.parent / "shared" / "reference" / "upstream"

CRDS = {c["spec"]["names"]["kind"]: c for c in generate_crds()}


def schema_of(kind: str) -> dict[str, Any]:
    schema: dict[str, Any] = CRDS[kind]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def nodes(schema: Any, path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema node with its path (``.spec.trainer.env[]``)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from nodes(schema["additionalProperties"], f"{path}.*")
    if "items" in schema:
        yield from nodes(schema["items"], f"{path}[]")


def closed(schema: dict[str, Any]) -> dict[str, Any]:
    """A copy that rejects unknown fields wherever the CRD would prune them (finds unmodelled fields)."""
    out = copy.deepcopy(schema)
    for _, node in nodes(out):
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node["additionalProperties"] = False
    return out


def validator(kind: str, *, strict: bool = False) -> OAS30Validator:
    schema = schema_of(kind)
    return OAS30Validator(closed(schema) if strict else schema)


def errors(kind: str, obj: dict[str, Any], *, strict: bool = False) -> list[str]:
    return [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in validator(kind, strict=strict).iter_errors(obj)
    ]


# --- shape ---


def test_four_crds_with_names_scope_and_short_names() -> None:
    got = {
        k: (
            c["metadata"]["name"],
            c["spec"]["scope"],
            c["spec"]["names"]["plural"],
            c["spec"]["names"]["shortNames"],
        )
        for k, c in CRDS.items()
    }
    assert got == {
        "TrainJob": ("trainjobs.trainer.kubeflow.org", "Namespaced", "trainjobs", ["tj"]),
        "TrainingRuntime": (
            "trainingruntimes.trainer.kubeflow.org",
            "Namespaced",
            "trainingruntimes",
            ["tr"],
        ),
        "ClusterTrainingRuntime": (
            "clustertrainingruntimes.trainer.kubeflow.org",
            "Cluster",
            "clustertrainingruntimes",
            ["ctr"],
        ),
        "OptimizationJob": ("optimizationjobs.trainer.kubeflow.org", "Namespaced", "optimizationjobs", ["oj"]),
    }
    for crd in CRDS.values():
        (version,) = crd["spec"]["versions"]
        assert (crd["spec"]["group"], version["name"], version["served"], version["storage"]) == (
            "trainer.kubeflow.org",
            "v1alpha1",
            True,
            True,
        )


def test_only_trainjob_has_a_scale_subresource_and_only_the_jobs_a_status() -> None:
    assert CRDS["TrainJob"]["spec"]["versions"][0]["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.trainer.numNodes",
            "statusReplicasPath": ".status.numNodes",
            "labelSelectorPath": ".status.selector",
        },
    }
    assert "subresources" not in CRDS["TrainingRuntime"]["spec"]["versions"][0]
    assert "subresources" not in CRDS["ClusterTrainingRuntime"]["spec"]["versions"][0]
    assert CRDS["OptimizationJob"]["spec"]["versions"][0]["subresources"] == {"status": {}}


def test_printer_columns() -> None:
    cols = {
        k: [(c["name"], c["jsonPath"]) for c in v["spec"]["versions"][0]["additionalPrinterColumns"]]
        for k, v in CRDS.items()
    }
    assert cols["TrainJob"] == [
        ("State", ".status.conditions[-1:].type"),
        ("Progress %", ".status.trainerStatus.progressPercentage"),  # KEP-2779's column
        ("Runtime", ".spec.runtimeRef.name"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    framework = [
        ("Framework", ".metadata.labels.trainer\\.kubeflow\\.org/framework"),
        ("Age", ".metadata.creationTimestamp"),
    ]
    assert cols["TrainingRuntime"] == framework
    assert cols["ClusterTrainingRuntime"] == framework
    assert cols["OptimizationJob"] == [
        ("State", ".status.conditions[-1:].type"),
        ("Best Trial", ".status.result.trainJobName"),
        ("Trials", ".spec.numTrials"),
        ("Age", ".metadata.creationTimestamp"),
    ]


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_schema_is_structural(kind: str) -> None:
    """The API server's structural-schema rules (apiextensions 'structural'), checked node by node."""
    problems = []
    for path, node in nodes(schema_of(kind)):
        for banned in ("$ref", "$defs", "title", "const", "allOf", "oneOf", "not", "nullable"):
            if banned in node:
                problems.append(f"{path}: has {banned}")
        if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
            problems.append(f"{path}: anyOf outside int-or-string")
        if "type" not in node and not (
            node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
        ):
            problems.append(f"{path}: no type")
        if "properties" in node and "additionalProperties" in node:
            problems.append(f"{path}: properties and additionalProperties together")
        if node.get("additionalProperties") is False:
            problems.append(f"{path}: additionalProperties false")
        if "default" in node and node["default"] is None:
            problems.append(f"{path}: null default")
        if node.get("properties") == {}:
            problems.append(f"{path}: empty properties (the server drops them, so stored != applied)")
        if node.get("x-kubernetes-list-type") == "map":
            keys = node["x-kubernetes-list-map-keys"]
            required = node["items"].get("required", [])
            missing = [
                k for k in keys if k not in required and "default" not in node["items"]["properties"][k]
            ]
            if missing:
                problems.append(f"{path}: map keys {missing} neither required nor defaulted")
    assert problems == []


def correlatable_nodes(
    schema: dict[str, Any], path: str = "", ok: bool = True
) -> Iterator[tuple[str, bool, Any]]:
    """Nodes with whether the API server can pair them with their old value (not inside a non-map list)."""
    yield path, ok, schema
    for name, sub in schema.get("properties", {}).items():
        yield from correlatable_nodes(sub, f"{path}.{name}", ok)
    if "items" in schema:
        keyed = schema.get("x-kubernetes-list-type") == "map"
        yield from correlatable_nodes(schema["items"], f"{path}[]", ok and keyed)
    if isinstance(schema.get("additionalProperties"), dict):
        yield from correlatable_nodes(schema["additionalProperties"], f"{path}.*", ok)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_transition_rules_are_on_correlatable_fields(kind: str) -> None:
    """The API server rejects a CRD whose oldSelf rule sits inside an atomic or set list."""
    bad = [
        path
        for path, ok, node in correlatable_nodes(schema_of(kind))
        if not ok and any("oldSelf" in r["rule"] for r in node.get("x-kubernetes-validations", []))
    ]
    assert bad == []


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_defaults_satisfy_their_own_schema(kind: str) -> None:
    """The API server rejects a CRD whose defaults would fail its own validation."""
    for path, node in nodes(schema_of(kind)):
        if "default" in node:
            sub = {k: v for k, v in node.items() if k not in ("default", "x-kubernetes-validations")}
            assert list(OAS30Validator(sub).iter_errors(node["default"])) == [], path


def test_root_metadata_is_left_to_the_api_server() -> None:
    for kind in CRDS:
        assert schema_of(kind)["properties"]["metadata"] == {"type": "object"}


def test_explain_text_for_user_facing_fields() -> None:
    """`kubectl explain trainjob.spec.<field>` shows something for every spec field, down to the trainer's."""
    spec = schema_of("TrainJob")["properties"]["spec"]
    undocumented = [f"spec.{n}" for n, sub in spec["properties"].items() if not sub.get("description")] + [
        f"spec.trainer.{n}"
        for n, sub in spec["properties"]["trainer"]["properties"].items()
        if not sub.get("description")
    ]
    assert undocumented == []
    rt_spec = schema_of("ClusterTrainingRuntime")["properties"]["spec"]
    assert all(sub.get("description") for sub in rt_spec["properties"].values())
    for kind in CRDS:
        assert schema_of(kind)["description"]


def test_int_or_string_fields() -> None:
    spec = schema_of("TrainJob")["properties"]["spec"]
    nproc = spec["properties"]["trainer"]["properties"]["numProcPerNode"]
    assert nproc["x-kubernetes-int-or-string"] is True
    assert nproc["anyOf"] == [{"type": "integer"}, {"type": "string"}]
    torch = schema_of("ClusterTrainingRuntime")["properties"]["spec"]["properties"]["mlPolicy"]["properties"][
        "torch"
    ]
    assert torch["properties"]["numProcPerNode"]["default"] == "auto"


def test_pod_templates_are_typed_down_to_every_field() -> None:
    """The pod spec is Kubernetes' own PodSpec, so the API server prunes and type-checks it without the webhook."""
    rjob = schema_of("TrainingRuntime")["properties"]["spec"]["properties"]["template"]["properties"]["spec"][
        "properties"
    ]["replicatedJobs"]["items"]
    job_spec = rjob["properties"]["template"]["properties"]["spec"]
    pod_spec = job_spec["properties"]["template"]["properties"]["spec"]
    assert pod_spec["required"] == ["containers"]
    container = pod_spec["properties"]["containers"]["items"]
    assert container["properties"]["resources"]["properties"]["limits"]["additionalProperties"][
        "x-kubernetes-int-or-string"
    ]
    assert container["properties"]["ports"]["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert job_spec["properties"]["template"]["properties"]["metadata"]["properties"].keys() == {
        "annotations", "finalizers", "labels", "name", "namespace"
    }  # fmt: skip


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_nothing_is_left_untyped(kind: str) -> None:
    """No x-kubernetes-preserve-unknown-fields: every field the server stores is one the schema describes."""
    assert [path for path, node in nodes(schema_of(kind)) if "x-kubernetes-preserve-unknown-fields" in node] == []


def test_patches_do_not_require_what_they_patch() -> None:
    spec = schema_of("TrainJob")["properties"]["spec"]["properties"]
    override = spec["podTemplateOverrides"]["items"]["properties"]["spec"]
    patch = spec["runtimePatches"]["items"]["properties"]["trainingRuntimeSpec"]["properties"]["template"][
        "properties"
    ]["spec"]["properties"]["replicatedJobs"]["items"]["properties"]["template"]["properties"]["spec"][
        "properties"
    ]["template"]["properties"]["spec"]
    for pod_spec in (override, patch):
        assert "required" not in pod_spec
        assert "containers" in pod_spec["properties"]
        assert pod_spec["properties"]["containers"]["items"]["required"] == ["name"]  # the merge key stays


def test_a_quantity_or_a_typo_is_caught_by_the_schema_alone() -> None:
    pod = {"containers": [{"name": "node", "image": "x", "resources": {"limits": {"cpu": "2 cores"}}}]}
    doc = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "r"},
        "spec": {"template": {"spec": {"replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": {"spec": pod}}}}
        ]}}},
    }  # fmt: skip
    assert [e.split(":")[0] for e in errors("ClusterTrainingRuntime", doc)] == [
        "spec.template.spec.replicatedJobs.0.template.spec.template.spec.containers.0.resources.limits.cpu"
    ]
    pod["containers"][0] = {"name": "node", "image": "x", "comand": ["python"]}
    assert errors("ClusterTrainingRuntime", doc) == []  # the server would prune it ...
    assert errors("ClusterTrainingRuntime", doc, strict=True)  # ... because the schema does not have it


def test_defaults_from_the_models_are_advertised() -> None:
    spec = schema_of("TrainJob")["properties"]["spec"]["properties"]
    assert spec["suspend"]["default"] is False
    assert spec["managedBy"]["default"] == "trainer.kubeflow.org/trainjob-controller"
    assert spec["runtimeRef"]["properties"]["kind"]["default"] == "ClusterTrainingRuntime"
    mpi = schema_of("ClusterTrainingRuntime")["properties"]["spec"]["properties"]["mlPolicy"]["properties"][
        "mpi"
    ]
    assert {k: v.get("default") for k, v in mpi["properties"].items()} == {
        "numProcPerNode": 1,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
    }


# --- Kubernetes accepts them, files are fresh, CLI ---


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_crd_objects_pass_kubernetes_schema(kind: str) -> None:
    kubernetes_validate = pytest.importorskip(
        "kubernetes_validate", reason="kubernetes-validate not installed"
    )
    kubernetes_validate.validate(CRDS[kind], "1.37.0", strict=True)


def test_committed_crds_are_fresh() -> None:
    expected = {crd_filename(c): dump_yaml([c]) for c in CRDS.values()}
    on_disk = {p.name: p.read_text() for p in CRD_DIR.glob("*.yaml") if p.name != "kustomization.yaml"}
    stale = sorted(n for n in expected if on_disk.get(n) != expected[n])
    extra = sorted(set(on_disk) - set(expected))
    assert (stale, extra) == ([], []), (
        "manifests/base/crds is stale: run `kubetrain crds --output-dir manifests/base/crds`"
    )


def test_cli_prints_all_four_as_multi_doc_yaml() -> None:
    from kubetrain.cli.main import cli

    result = CliRunner().invoke(cli, ["crds"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.output))
    assert [d["spec"]["names"]["kind"] for d in docs] == [
        "TrainJob",
        "TrainingRuntime",
        "ClusterTrainingRuntime",
        "OptimizationJob",
    ]
    assert docs == [CRDS[k] for k in ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime", "OptimizationJob")]


def test_cli_kind_filter_and_output_dir(tmp_path: Path) -> None:
    from kubetrain.cli.main import cli

    result = CliRunner().invoke(cli, ["crds", "--kind", "TrainJob", "--output-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert [p.name for p in tmp_path.iterdir()] == ["trainer.kubeflow.org_trainjobs.yaml"]
    assert yaml.safe_load((tmp_path / "trainer.kubeflow.org_trainjobs.yaml").read_text()) == CRDS["TrainJob"]


def test_cli_help_has_an_example() -> None:
    from kubetrain.cli.main import cli

    result = CliRunner().invoke(cli, ["crds", "--help"])
    assert result.exit_code == 0
    assert "kubetrain crds | kubectl apply" in result.output


# --- objects in and out ---


def upstream_runtime_docs() -> list[Any]:
    params = []
    for version in ("v2.1", "v2.3"):
        for path in sorted((UPSTREAM / "runtimes" / version).glob("*.yaml")):
            for i, doc in enumerate(yaml.safe_load_all(path.read_text())):
                if doc:
                    params.append(pytest.param(doc, id=f"{version}/{path.stem}/{i}"))
    return params


@pytest.mark.skipif(not UPSTREAM.exists(), reason="shared/reference/upstream not present")
@pytest.mark.parametrize("doc", upstream_runtime_docs())
def test_upstream_runtimes_validate(doc: dict[str, Any]) -> None:
    """Every runtime upstream ships is accepted, and every field it uses is one our schema models."""
    assert doc["kind"] == "ClusterTrainingRuntime"
    assert errors("ClusterTrainingRuntime", doc, strict=True) == []
    as_namespaced = {**doc, "kind": "TrainingRuntime"}
    assert errors("TrainingRuntime", as_namespaced, strict=True) == []


def _without_descriptions(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _without_descriptions(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_without_descriptions(v) for v in node]
    return node


@pytest.mark.skipif(not UPSTREAM.exists(), reason="shared/reference/upstream not present")
def test_trainer_status_schema_is_upstreams() -> None:
    """status.trainerStatus (KEP-2779) is typed exactly as upstream v2.3 types it: the server itself checks the
    progress range, the int32 seconds, the RFC 3339 time and the metric bounds, whoever writes the status."""
    upstream = yaml.safe_load((UPSTREAM / "crds" / "v2.3" / "trainer.kubeflow.org_trainjobs.yaml").read_text())

    def trainer_status(crd: dict[str, Any]) -> Any:
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        return _without_descriptions(schema["properties"]["status"]["properties"]["trainerStatus"])

    ours = trainer_status(CRDS["TrainJob"])
    assert ours == trainer_status(upstream)
    assert "x-kubernetes-preserve-unknown-fields" not in str(ours)


def trainjob(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "job"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, **spec},
    }


def test_a_full_trainjob_validates() -> None:
    obj = trainjob(
        initializer={
            "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "A", "value": "1"}]}
        },
        trainer={
            "image": "pytorch/pytorch:2.13.0",
            "command": ["torchrun", "train.py"],
            "numNodes": 2,
            "numProcPerNode": "auto",
            "resourcesPerNode": {"limits": {"nvidia.com/gpu": 1, "memory": "4Gi"}},
        },
        runtimePatches=[
            {
                "manager": "kueue.x-k8s.io/manager",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ],
        suspend=True,
        activeDeadlineSeconds=3600,
        managedBy="kueue.x-k8s.io/multikueue",
    )
    obj["status"] = {
        "conditions": [
            {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "TrainJob is suspended"}
        ],
        "jobsStatus": [
            {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 2}
        ],
    }
    assert errors("TrainJob", obj, strict=True) == []


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"runtimeRef": {}}, "spec.runtimeRef"),
        ({"runtimeRef": {"name": ""}}, "spec.runtimeRef.name"),
        ({"trainer": {"numNodes": -1}}, "spec.trainer.numNodes"),
        ({"trainer": {"numProcPerNode": 1.5}}, "spec.trainer.numProcPerNode"),
        ({"trainer": {"command": "python"}}, "spec.trainer.command"),
        ({"activeDeadlineSeconds": 0}, "spec.activeDeadlineSeconds"),
        ({"runtimePatches": [{"manager": ""}]}, "spec.runtimePatches.0.manager"),
        ({"suspend": "yes"}, "spec.suspend"),
    ],
)
def test_schema_rejects(spec: dict[str, Any], where: str) -> None:
    obj = trainjob(**spec)
    got = errors("TrainJob", obj)
    assert got and all(e.startswith(where) for e in got), got


def test_spec_is_required_on_trainjob() -> None:
    obj = trainjob()
    del obj["spec"]
    assert errors("TrainJob", obj) == [": 'spec' is a required property"]


def test_runtime_enums() -> None:
    doc = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "r"},
        "spec": {"mlPolicy": {"numNodes": 0, "mpi": {"mpiImplementation": "LAM"}}},
    }
    got = errors("ClusterTrainingRuntime", doc)
    assert sorted(e.split(":")[0] for e in got) == [
        "spec.mlPolicy.mpi.mpiImplementation",
        "spec.mlPolicy.numNodes",
    ]


def test_a_rule_for_a_renamed_field_fails_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    from kubetrain.api import crd
    from kubetrain.api.trainjob import Trainer

    monkeypatch.setitem(crd.tables.FIELD_RULES, (Trainer, "num_gpus"), [{"rule": "true", "message": "x"}])
    with pytest.raises(LookupError):
        crd.generate_crds()


def test_description_precedence() -> None:
    """A model's own description= wins, then the CRD table, then the docstring of the field's class."""
    trainer = schema_of("TrainJob")["properties"]["spec"]["properties"]["trainer"]["properties"]
    assert trainer["resourcesPerNode"]["description"].startswith("Compute resources of each node")  # table
    torch = schema_of("ClusterTrainingRuntime")["properties"]["spec"]["properties"]["mlPolicy"]["properties"][
        "torch"
    ]["properties"]
    assert (
        torch["numProcPerNode"]["description"] == "Processes per node: auto, cpu, gpu or a positive integer."
    )
    elastic = torch["elasticPolicy"]
    assert elastic["description"] == "Elastic training limits (torchrun --nnodes=min:max)."
    assert (
        elastic["properties"]["maxRestarts"]["description"] == "Restarts of the worker group before failing."
    )


def test_repository_examples_validate() -> None:
    """Every TrainJob and runtime under examples/ is accepted by the CRDs (no field the CRD would prune)."""
    docs = [
        (p, d)
        for p in sorted((ROOT / "examples").rglob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if isinstance(d, dict) and str(d.get("apiVersion", "")).startswith("trainer.kubeflow.org/")
    ]
    assert docs, "no examples found"
    for path, doc in docs:
        assert errors(doc["kind"], doc, strict=True) == [], path


def test_every_cel_rule_compiles() -> None:
    celpy = pytest.importorskip("celpy", reason="cel-python not installed")
    env = celpy.Environment()
    rules = [
        r["rule"]
        for kind in CRDS
        for _, node in nodes(schema_of(kind))
        for r in node.get("x-kubernetes-validations", [])
    ]
    assert len(rules) > 20
    for rule in rules:
        env.compile(rule)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_bounds_are_numbers_the_api_server_reads(kind: str) -> None:
    """The API server reads schema bounds as float64: an int64 bound written out (-2**63) is no longer an integer of
    format int64 there, and every object is then refused at validation (seen on the bed, not by its schema check)."""
    for path, node in nodes(schema_of(kind)):
        for key in ("minimum", "maximum"):
            if key in node:
                assert abs(node[key]) <= 2**53, f"{path}.{key} = {node[key]}"
