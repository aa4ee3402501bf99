"""The kustomize install tree: generated parts in sync with the code, every object valid for Kubernetes 1.37,
the pieces wired to each other (Service -> pods, webhooks -> Service, RBAC -> ServiceAccount), and the two
installs docs/install.md applies in turn: the manager (everything but the built-in runtimes), then the runtimes,
once their CRD is Established."""

from __future__ import annotations

import os
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubetrain
from kubetrain.api.crd import crd_filename, dump_yaml, generate_crds
from kubetrain.k8s.webhook import names, webhook_configurations
from tests.k8s.manifests.conftest import (
    BASE,
    MANAGER,
    MANIFESTS,
    NAMESPACE,
    RUNTIMES,
    kustomize_build,
    load_docs,
    schema_errors,
)

UPDATE = os.environ.get("KUBETRAIN_UPDATE_MANIFESTS") == "1"
_HEADER = "# Generated from kubetrain.k8s.webhook.webhook_configurations(); do not edit.\n"
_RUNTIMES_KUSTOMIZATION_HEAD = """\
# Copies of the built-in runtimes (src/kubetrain/runtimes, package data), kept equal by tests/k8s/manifests.
# Installed by ../../overlays/runtimes, after the manager install. Labelled webhook-validation=disabled (as
# upstream's overlay does), so installing them does not wait for the operator to serve the webhook.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
labels:
- pairs:
    trainer.kubeflow.org/webhook-validation: disabled
  includeSelectors: false
resources:
"""


def expected_generated() -> dict[Path, str]:
    """Every generated file under manifests/base and its content."""
    out: dict[Path, str] = {}
    for crd in generate_crds():
        out[BASE / "crds" / crd_filename(crd)] = dump_yaml([crd])
    validating, mutating = webhook_configurations(names.DEFAULT_SERVICE, NAMESPACE)
    out[BASE / "webhook" / "validating.yaml"] = _HEADER + dump_yaml([validating])
    out[BASE / "webhook" / "mutating.yaml"] = _HEADER + dump_yaml([mutating])
    runtime_files = sorted(
        (e for e in resources.files("kubetrain.runtimes").iterdir() if e.name.endswith(".yaml")),
        key=lambda e: e.name,
    )
    for entry in runtime_files:
        out[BASE / "runtimes" / entry.name] = entry.read_text(encoding="utf-8")
    out[BASE / "runtimes" / "kustomization.yaml"] = _RUNTIMES_KUSTOMIZATION_HEAD + "".join(
        f"- {e.name}\n" for e in runtime_files
    )
    return out


def test_generated_manifests_are_in_sync() -> None:
    expected = expected_generated()
    if UPDATE:
        for path, text in expected.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    stale = sorted(
        str(p.relative_to(MANIFESTS))
        for p, text in expected.items()
        if not p.exists() or p.read_text() != text
    )
    runtime_dir = BASE / "runtimes"
    extra = sorted(p.name for p in runtime_dir.glob("*.yaml") if p not in expected)
    assert (stale, extra) == ([], []), "regenerate: KUBETRAIN_UPDATE_MANIFESTS=1 pytest tests/k8s/manifests"


def all_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.rglob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("path", all_files(), ids=lambda p: str(p.relative_to(MANIFESTS)))
def test_each_file_is_valid_for_kubernetes(path: Path) -> None:
    docs = load_docs(path.read_text())
    assert docs, f"{path} is empty"
    for doc in docs:
        assert schema_errors(doc) == [], f"{doc.get('kind')} {doc['metadata'].get('name')}"


def test_every_file_is_listed_in_a_kustomization() -> None:
    listed = set()
    for k in MANIFESTS.rglob("kustomization.yaml"):
        for res in yaml.safe_load(k.read_text()).get("resources", []):
            listed.add((k.parent / res).resolve())
    unlisted = [str(p.relative_to(MANIFESTS)) for p in all_files() if p.resolve() not in listed]
    assert unlisted == []


def test_public_configmap_matches_the_sdk_and_our_version() -> None:
    (cm,) = load_docs((BASE / "public" / "configmap.yaml").read_text())
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == (
        "kubeflow-trainer-public",
        "kubeflow-system",
    )
    assert cm["data"]["kubeflow_trainer_version"] == kubetrain.__version__
    assert cm["data"]["kubetrain_version"] == kubetrain.__version__


def test_operator_image_tag_is_our_version() -> None:
    k = yaml.safe_load((BASE / "operator" / "kustomization.yaml").read_text())
    assert k["images"] == [{"name": "ghcr.io/kubetrain/kubetrain", "newTag": kubetrain.__version__}]


# --- the built tree ---


@pytest.fixture(scope="module")
def manager() -> list[dict[str, Any]]:
    return kustomize_build(MANAGER)


@pytest.fixture(scope="module")
def runtimes() -> list[dict[str, Any]]:
    return kustomize_build(RUNTIMES)


@pytest.fixture(scope="module")
def built(manager: list[dict[str, Any]], runtimes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The whole install: both steps."""
    return manager + runtimes


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_build_is_valid_and_labelled(built: list[dict[str, Any]]) -> None:
    for doc in built:
        assert schema_errors(doc) == [], f"{doc['kind']} {doc['metadata']['name']}"
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "kubetrain"


def test_build_contents(built: list[dict[str, Any]]) -> None:
    kinds = sorted({d["kind"] for d in built})
    assert kinds == [
        "ClusterRole",
        "ClusterRoleBinding",
        "ClusterTrainingRuntime",
        "ConfigMap",
        "CustomResourceDefinition",
        "Deployment",
        "MutatingWebhookConfiguration",
        "Namespace",
        "PodDisruptionBudget",
        "Role",
        "RoleBinding",
        "Service",
        "ServiceAccount",
        "ValidatingWebhookConfiguration",
    ]
    assert len(by_kind(built, "CustomResourceDefinition")) == 4


def key(doc: dict[str, Any]) -> tuple[str, str, str]:
    return doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"]


def test_each_base_is_in_exactly_one_of_the_two_installs() -> None:
    used: Counter[Path] = Counter()
    for overlay in (MANAGER, RUNTIMES):
        for res in yaml.safe_load((overlay / "kustomization.yaml").read_text())["resources"]:
            used[(overlay / res).resolve()] += 1
    assert used == Counter({d.resolve(): 1 for d in BASE.iterdir() if d.is_dir()})
    assert yaml.safe_load((RUNTIMES / "kustomization.yaml").read_text())["resources"] == ["../../base/runtimes"]


def test_there_is_no_one_apply_install_of_everything() -> None:
    """`kubectl apply -k manifests/` would race the runtimes against their CRDs on a fresh cluster; it fails with
    kustomize's "unable to find one of 'kustomization.yaml'..." instead of half-installing."""
    assert not [p for p in ("kustomization.yaml", "kustomization.yml", "Kustomization") if (MANIFESTS / p).exists()]


def test_the_manager_install_holds_no_runtime(manager: list[dict[str, Any]]) -> None:
    """Step 1 creates the CRDs: an object of their kinds in the same apply could reach the API server before it
    serves the kind (`no matches for kind "ClusterTrainingRuntime"`)."""
    assert [key(d) for d in manager if d["apiVersion"].startswith("trainer.kubeflow.org/")] == []
    assert {d["metadata"]["name"] for d in by_kind(manager, "CustomResourceDefinition")} == {
        f"{plural}.trainer.kubeflow.org"
        for plural in ("trainjobs", "trainingruntimes", "clustertrainingruntimes", "optimizationjobs")
    }
    assert by_kind(manager, "Deployment") and by_kind(manager, "ValidatingWebhookConfiguration")


def test_the_runtimes_install_is_the_built_in_runtimes_only(runtimes: list[dict[str, Any]]) -> None:
    assert {d["kind"] for d in runtimes} == {"ClusterTrainingRuntime"}
    shipped = [
        yaml.safe_load(e.read_text(encoding="utf-8"))["metadata"]["name"]
        for e in resources.files("kubetrain.runtimes").iterdir()
        if e.name.endswith(".yaml")
    ]
    assert sorted(d["metadata"]["name"] for d in runtimes) == sorted(shipped)


def test_the_two_installs_together_are_every_object_once(
    manager: list[dict[str, Any]], runtimes: list[dict[str, Any]]
) -> None:
    """Nothing lost in the split, nothing installed twice: the two builds hold exactly the objects of the files
    under manifests/base, as the single tree did."""
    files = [d for p in BASE.rglob("*.yaml") if p.name != "kustomization.yaml" for d in load_docs(p.read_text())]
    assert sorted(key(d) for d in manager + runtimes) == sorted(key(d) for d in files)
    assert len({key(d) for d in manager + runtimes}) == len(manager) + len(runtimes)
    assert len(runtimes) == len(list((BASE / "runtimes").glob("*.yaml"))) - 1  # one file each, bar kustomization


def test_namespaces(built: list[dict[str, Any]]) -> None:
    cluster_scoped = {
        "Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
        "ClusterTrainingRuntime",
        "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
    }  # fmt: skip
    for doc in built:
        ns = doc["metadata"].get("namespace")
        assert ns == (None if doc["kind"] in cluster_scoped else NAMESPACE), (
            doc["kind"],
            doc["metadata"]["name"],
        )


def test_runtimes_installed_with_webhook_validation_disabled(built: list[dict[str, Any]]) -> None:
    runtimes = by_kind(built, "ClusterTrainingRuntime")
    assert {r["metadata"]["name"] for r in runtimes} >= {"torch-distributed", "deepspeed-distributed"}
    for r in runtimes:
        assert r["metadata"]["labels"]["trainer.kubeflow.org/webhook-validation"] == "disabled"
        assert r["metadata"]["labels"]["trainer.kubeflow.org/framework"]


def test_service_reaches_the_operator_pods(built: list[dict[str, Any]]) -> None:
    (svc,) = by_kind(built, "Service")
    (dep,) = by_kind(built, "Deployment")
    pod = dep["spec"]["template"]
    assert svc["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert dep["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    webhook = next(p for p in svc["spec"]["ports"] if p["name"] == "webhook")
    assert (webhook["port"], ports[webhook["targetPort"]]) == (443, names.DEFAULT_PORT)
    assert f"--webhook-port={names.DEFAULT_PORT}" in container["args"]
    assert f"--webhook-cert-dir={names.DEFAULT_CERT_DIR}" in container["args"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["KUBETRAIN_WEBHOOK_SERVICE"] == svc["metadata"]["name"] == names.DEFAULT_SERVICE
    assert env["KUBETRAIN_WEBHOOK_SECRET"] == names.DEFAULT_SECRET
    assert env["KUBETRAIN_WEBHOOK_CERT_MODE"] == "self-signed"
    assert pod["spec"]["serviceAccountName"] == by_kind(built, "ServiceAccount")[0]["metadata"]["name"]
    # The certificate directory must be writable under a read-only root filesystem.
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert any(names.DEFAULT_CERT_DIR.startswith(m["mountPath"] + "/") for m in container["volumeMounts"])


def test_admission_stays_up_through_restarts_upgrades_and_drains(built: list[dict[str, Any]]) -> None:
    """docs/webhook.md#availability: the webhooks fail closed, so the install must never leave them without a
    Ready endpoint: two replicas, a surge-first rolling update, a PDB, preferred spread, readiness on /readyz,
    and a pod that keeps serving until its endpoint is gone."""
    from kubetrain.k8s.operator.settings import OperatorSettings

    (dep,) = by_kind(built, "Deployment")
    spec = dep["spec"]
    pod = spec["template"]["spec"]
    labels = spec["template"]["metadata"]["labels"]
    assert spec["replicas"] >= 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    (pdb,) = by_kind(built, "PodDisruptionBudget")
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert 1 <= pdb["spec"]["maxUnavailable"] < spec["replicas"]
    assert pdb["spec"]["unhealthyPodEvictionPolicy"] == "AlwaysAllow"  # a crash-looping pod never blocks a drain
    spread = pod["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for c in spread:
        # Preferred only: a one-node cluster must still schedule every replica.
        assert c["whenUnsatisfiable"] == "ScheduleAnyway"
        assert c["labelSelector"]["matchLabels"].items() <= labels.items()
        assert c["matchLabelKeys"] == ["pod-template-hash"]  # count only the current ReplicaSet's pods
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in str(pod.get("affinity", {}))
    (container,) = pod["containers"]
    probe = container["readinessProbe"]
    assert probe["httpGet"] == {"path": "/readyz", "port": "health"}
    assert probe["periodSeconds"] <= 2 and probe["timeoutSeconds"] >= 2
    delay = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert delay >= 3
    assert pod["terminationGracePeriodSeconds"] >= delay + OperatorSettings().shutdown_grace


def test_webhooks_point_at_the_service_on_upstream_paths(built: list[dict[str, Any]]) -> None:
    (svc,) = by_kind(built, "Service")
    hooks = (
        by_kind(built, "ValidatingWebhookConfiguration")[0]["webhooks"]
        + by_kind(built, "MutatingWebhookConfiguration")[0]["webhooks"]
    )
    assert {h["name"]: h["clientConfig"]["service"]["path"] for h in hooks} == {
        "validator.clustertrainingruntime.trainer.kubeflow.org": names.VALIDATE_CLUSTER_TRAINING_RUNTIME,
        "validator.trainingruntime.trainer.kubeflow.org": names.VALIDATE_TRAINING_RUNTIME,
        "validator.trainjob.trainer.kubeflow.org": names.VALIDATE_TRAINJOB,
        "validator.optimizationjob.trainer.kubeflow.org": names.VALIDATE_OPTIMIZATIONJOB,
        "defaulter.trainjob.trainer.kubeflow.org": names.MUTATE_TRAINJOB,
    }
    for h in hooks:
        ref = h["clientConfig"]["service"]
        assert (ref["name"], ref["namespace"], ref["port"]) == (svc["metadata"]["name"], NAMESPACE, 443)
        # Validators record shortened warnings as Events (never on a dry run); the defaulter writes nothing.
        side_effects = "None" if h["name"].startswith("defaulter.") else "NoneOnDryRun"
        assert (h["failurePolicy"], h["sideEffects"], h["admissionReviewVersions"]) == (
            "Fail",
            side_effects,
            ["v1"],
        )
        assert h["rules"][0]["operations"] == ["CREATE", "UPDATE"]
        if "runtime" in h["name"]:
            assert h["objectSelector"] == {
                "matchExpressions": [
                    {
                        "key": "trainer.kubeflow.org/webhook-validation",
                        "operator": "NotIn",
                        "values": ["disabled"],
                    }
                ]
            }
        else:
            assert "objectSelector" not in h


def rules(doc: dict[str, Any]) -> dict[tuple[str, str], set[str]]:
    out: dict[tuple[str, str], set[str]] = {}
    for rule in doc["rules"]:
        for group in rule["apiGroups"]:
            for res in rule["resources"]:
                out.setdefault((group, res), set()).update(rule["verbs"])
    return out


def test_operator_rbac_is_what_it_needs_and_no_more(built: list[dict[str, Any]]) -> None:
    """tests/k8s/test_operator_rbac.py proves these are exactly the calls the operator makes."""
    (role,) = [r for r in by_kind(built, "ClusterRole") if r["metadata"]["name"] == "kubetrain-operator"]
    read = {"get", "list", "watch"}
    assert rules(role) == {
        # TrainJobs: also created and applied, as an OptimizationJob's trials.
        ("trainer.kubeflow.org", "trainjobs"): read | {"create", "patch"},
        ("trainer.kubeflow.org", "trainjobs/status"): {"patch"},
        ("trainer.kubeflow.org", "trainjobs/finalizers"): {"update"},
        ("trainer.kubeflow.org", "optimizationjobs"): {"list", "watch"},
        ("trainer.kubeflow.org", "optimizationjobs/status"): {"patch"},
        ("trainer.kubeflow.org", "optimizationjobs/finalizers"): {"update"},
        ("trainer.kubeflow.org", "trainingruntimes"): read | {"patch"},
        ("trainer.kubeflow.org", "clustertrainingruntimes"): read | {"patch"},
        ("jobset.x-k8s.io", "jobsets"): read | {"create", "update", "patch", "delete"},
        ("autoscaling", "horizontalpodautoscalers"): {"list", "watch", "create", "patch"},
        # Pods: an elastic job's trainer pod failures, the status endpoint's reporting pod, and the pod watch
        # that records failed runs on their TrainJob with their last log lines; the failed Job's reason.
        ("", "pods"): {"list", "watch"},
        ("", "pods/log"): {"get"},
        ("batch", "jobs"): {"list"},
        ("scheduling.x-k8s.io", "podgroups"): {"list", "watch", "create", "patch"},
        ("scheduling.volcano.sh", "podgroups"): {"list", "watch", "create", "patch"},
        ("", "configmaps"): read | {"create", "patch"},
        ("", "secrets"): {"list", "watch", "create"},
        ("", "events"): {"create"},
        ("", "namespaces"): {"get"},
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): {"get", "update"},
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): {"get", "update"},
        # The status endpoint: report tokens reviewed.
        ("authentication.k8s.io", "tokenreviews"): {"create"},
        # Suspend/resume of a TrainJob whose JobSet Kueue queues: its Workload's spec.active.
        ("kueue.x-k8s.io", "workloads"): {"list", "patch"},
    }
    hooks = [r for r in role["rules"] if r["apiGroups"] == ["admissionregistration.k8s.io"]]
    assert sorted(n for r in hooks for n in r["resourceNames"]) == [
        names.MUTATING_CONFIGURATION,
        names.VALIDATING_CONFIGURATION,
    ]
    (cert,) = [r for r in by_kind(built, "Role") if r["metadata"]["name"] == "kubetrain-webhook-cert"]
    assert cert["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": [names.DEFAULT_SECRET],
            "verbs": ["get", "update"],
        }
    ]


def test_no_wildcards_anywhere(built: list[dict[str, Any]]) -> None:
    for doc in by_kind(built, "ClusterRole") + by_kind(built, "Role"):
        for rule in doc["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert not [v for v in rule.get(key, []) if "*" in v], (doc["metadata"]["name"], key)


def test_user_roles_aggregate_into_admin_edit_and_view(built: list[dict[str, Any]]) -> None:
    roles = {r["metadata"]["name"]: r for r in by_kind(built, "ClusterRole")}
    agg = "rbac.authorization.k8s.io/aggregate-to-"
    edit, view = roles["kubetrain-edit"], roles["kubetrain-view"]
    assert {k for k, v in edit["metadata"]["labels"].items() if k.startswith(agg) and v == "true"} == {
        agg + "admin",
        agg + "edit",
    }
    assert {k for k, v in view["metadata"]["labels"].items() if k.startswith(agg) and v == "true"} == {agg + "view"}
    write = {"create", "update", "patch", "delete", "deletecollection"}
    read = {"get", "list", "watch"}
    assert rules(edit) == {
        ("trainer.kubeflow.org", "trainjobs"): read | write,
        ("trainer.kubeflow.org", "trainingruntimes"): read | write,
        ("trainer.kubeflow.org", "optimizationjobs"): read | write,
        ("trainer.kubeflow.org", "trainjobs/status"): {"get"},
        ("trainer.kubeflow.org", "optimizationjobs/status"): {"get"},
    }
    assert rules(view) == {
        ("trainer.kubeflow.org", "trainjobs"): read,
        ("trainer.kubeflow.org", "trainingruntimes"): read,
        ("trainer.kubeflow.org", "clustertrainingruntimes"): read,
        ("trainer.kubeflow.org", "optimizationjobs"): read,
        ("trainer.kubeflow.org", "trainjobs/status"): {"get"},
        ("trainer.kubeflow.org", "optimizationjobs/status"): {"get"},
    }
    # Cluster-scoped runtimes: read for every authenticated user, written by nobody but cluster admins.
    reader = roles["kubetrain-clustertrainingruntime-reader"]
    assert rules(reader) == {("trainer.kubeflow.org", "clustertrainingruntimes"): read}
    (binding,) = [b for b in by_kind(built, "ClusterRoleBinding") if b["roleRef"]["name"] == reader["metadata"]["name"]]
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]
    for role in (edit, view, reader):
        assert not [r for r in role["rules"] if "clustertrainingruntimes" in r["resources"] and write & set(r["verbs"])]


def test_bindings_name_the_operator_service_account(built: list[dict[str, Any]]) -> None:
    sa = by_kind(built, "ServiceAccount")[0]["metadata"]
    bound = [
        b
        for b in by_kind(built, "ClusterRoleBinding") + by_kind(built, "RoleBinding")
        if b["metadata"]["name"] not in ("kubeflow-trainer-public", "kubetrain-clustertrainingruntime-reader")
    ]
    assert {b["metadata"]["name"] for b in bound} == {
        "kubetrain-operator",
        "kubetrain-leader-election",
        "kubetrain-webhook-cert",
    }
    for b in bound:
        assert b["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    (lease,) = [r for r in by_kind(built, "Role") if r["metadata"]["name"] == "kubetrain-leader-election"]
    assert rules(lease) == {("coordination.k8s.io", "leases"): {"get", "create", "update"}}


def test_deployment_flags_are_ones_the_operator_command_accepts(built: list[dict[str, Any]]) -> None:
    """A contract with `kubetrain operator`: every flag the Deployment passes must exist."""
    import click

    from kubetrain.cli.main import cli

    command = cli.get_command(click.Context(cli), "operator")
    assert command is not None, "`kubetrain operator` is not registered"
    known = {opt for p in command.params for opt in getattr(p, "opts", [])}
    (dep,) = by_kind(built, "Deployment")
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "operator"
    flags = [a.split("=", 1)[0] for a in args[1:]]
    assert [f for f in flags if f not in known] == []


def test_operator_pod_meets_the_restricted_pod_security_level(built: list[dict[str, Any]]) -> None:
    from kubetrain.api.podsecurity import assess

    (dep,) = by_kind(built, "Deployment")
    assert assess(dep["spec"]["template"]).level == "restricted"
