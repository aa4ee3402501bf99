"""The Helm chart, rendered by Helm's own engine (helm-python-sdk binds Helm v4's Go SDK; no helm binary):
lint, schema-validated values, every rendered object valid for Kubernetes, the same wiring as manifests/."""

from __future__ import annotations

import base64
import gzip
import json
import os
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

import kubetrain
from kubetrain.api.crd import crd_filename, dump_compact_json, generate_crds
from kubetrain.k8s.webhook import names, webhook_configurations
from tests.k8s.manifests.conftest import BASE, CHART, load_docs, schema_errors

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (Helm's Go SDK) not installed")

UPDATE = os.environ.get("KUBETRAIN_UPDATE_MANIFESTS") == "1"
NS = "kubeflow-system"
CERT_DIR = names.DEFAULT_CERT_DIR


def render(values: dict[str, Any] | None = None, namespace: str = NS) -> list[dict[str, Any]]:
    with helm.Chart.load(str(CHART)) as chart:
        out = chart.render(values, name="kt", namespace=namespace)
    docs: list[dict[str, Any]] = []
    for path, text in sorted(out.items()):
        if path.endswith(".yaml"):
            docs += load_docs(text)
    return docs


def notes(values: dict[str, Any] | None = None, namespace: str = NS) -> str:
    with helm.Chart.load(str(CHART)) as chart:
        text: str = chart.render(values, name="kt", namespace=namespace)["kubetrain/templates/NOTES.txt"]
    return text


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, len(found))
    return found[0]


def container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    c: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    return c


# --- chart files ---


def test_chart_crds_and_runtimes_are_copies_of_the_generated_ones() -> None:
    expected: dict[Path, str] = {
        CHART / "crds" / crd_filename(c, "json"): dump_compact_json(c) for c in generate_crds()
    }
    for entry in resources.files("kubetrain.runtimes").iterdir():
        if entry.name.endswith(".yaml"):
            expected[CHART / "files" / "runtimes" / entry.name] = entry.read_text(encoding="utf-8")
    if UPDATE:
        for path, text in expected.items():
            path.write_text(text)
    stale = sorted(
        str(p.relative_to(CHART)) for p, t in expected.items() if not p.exists() or p.read_text() != t
    )
    extra = sorted(
        str(p.relative_to(CHART))
        for p in [*CHART.glob("crds/*"), *CHART.glob("files/runtimes/*.yaml")]
        if p not in expected
    )
    assert (stale, extra) == ([], []), "regenerate: KUBETRAIN_UPDATE_MANIFESTS=1 pytest tests/k8s/manifests"


SECRET_LIMIT = 1024 * 1024  # the API server's cap on a Secret's data


def release_secret_size(values: dict[str, Any] | None = None) -> int:
    """The bytes of the Secret in which Helm keeps a release of this chart (its default storage driver): the
    release as JSON, in which each file of the chart (CRDs included) is base64-encoded, gzipped at the best level,
    then base64-encoded. Helm's encoding, with the chart's files as Helm's own loader reads them."""
    with helm.Chart.load(str(CHART)) as chart:
        rendered = chart.render(values, name="kt", namespace=NS)
        release = {
            "name": "kubetrain",
            "chart": {
                "metadata": chart.metadata,
                "templates": [_b64_file(f) for f in chart.templates],
                "values": chart.values,
                "schema": base64.b64encode(json.dumps(chart.schema).encode()).decode(),
                "files": [_b64_file(f) for f in chart.files],
            },
            "config": values or {},
            "manifest": "\n---\n".join(t for p, t in sorted(rendered.items()) if p.endswith(".yaml")),
            "version": 1,
            "namespace": NS,
        }
    return len(base64.b64encode(gzip.compress(json.dumps(release).encode(), compresslevel=9)))


def _b64_file(f: dict[str, Any]) -> dict[str, str]:
    return {"name": f["name"], "data": base64.b64encode(f["data"].encode()).decode()}


def test_a_release_fits_in_the_secret_helm_keeps_it_in() -> None:
    """`helm install` failed on the bed once the OptimizationJob CRD joined the chart: "Secret
    sh.helm.release.v1.kubetrain.v1 is invalid: data: Too long: may not be more than 1048576 bytes". The chart's
    CRDs are compact JSON since; this keeps a margin for the release's metadata and for growth."""
    size = release_secret_size()
    print(f"release Secret: {size} bytes of {SECRET_LIMIT}")
    assert size <= SECRET_LIMIT * 0.95, f"a release of the chart takes {size} bytes of the Secret's {SECRET_LIMIT}"


def test_chart_version_is_ours() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == kubetrain.__version__


@pytest.mark.parametrize(
    "values", [None, {"webhook": {"certMode": "cert-manager"}}, {"runtimes": {"enabled": False}}]
)
def test_lint_is_clean(values: dict[str, Any] | None) -> None:
    report = helm.lint(str(CHART), values, strict=True, kube_version="v1.37.0")
    assert report["errors"] == []
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


def test_values_schema_rejects_unknown_modes_and_keys() -> None:
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema({"webhook": {"certMode": "cert-manager"}})
        with pytest.raises(helm.HelmError, match="certMode"):
            chart.validate_schema({"webhook": {"certMode": "letsencrypt"}})
        with pytest.raises(helm.HelmError):
            chart.validate_schema({"replica": 2})
        with pytest.raises(helm.HelmError):
            chart.render({"replicas": 0}, name="kt", namespace=NS)


# --- default render ---


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    return render()


def test_default_render_is_valid_for_kubernetes(default: list[dict[str, Any]]) -> None:
    for doc in default:
        assert schema_errors(doc) == [], f"{doc['kind']} {doc['metadata']['name']}"


def test_default_render_matches_the_kustomize_install(default: list[dict[str, Any]]) -> None:
    """Same objects as the kustomize install, both overlays (minus the Namespace, which Helm's --create-namespace
    owns)."""
    kustomize: list[dict[str, Any]] = []
    for p in BASE.rglob("*.yaml"):
        if p.name != "kustomization.yaml" and p.parent.name != "crds":
            kustomize += load_docs(p.read_text())
    want = sorted((d["kind"], d["metadata"]["name"]) for d in kustomize if d["kind"] != "Namespace")
    got = sorted((d["kind"], d["metadata"]["name"]) for d in default)
    assert got == want


def test_helm_installs_the_crds_before_the_runtimes(default: list[dict[str, Any]]) -> None:
    """`helm install` on a cluster without the CRDs works the first time: Helm creates the chart's crds/ and waits
    for them to be Established before it applies the templates, the runtimes among them. A CRD among the
    templates would be applied in the same batch as its runtimes and race them."""
    assert [d["metadata"]["name"] for d in default if d["kind"] == "CustomResourceDefinition"] == []
    assert sorted(p.name for p in (CHART / "crds").iterdir()) == sorted(
        crd_filename(c, "json") for c in generate_crds()
    )
    assert {d["kind"] for d in default if d["apiVersion"].startswith("trainer.kubeflow.org/")} == {
        "ClusterTrainingRuntime"
    }


def test_webhooks_match_the_generated_configurations(default: list[dict[str, Any]]) -> None:
    for expected in webhook_configurations(names.DEFAULT_SERVICE, NS):
        rendered = one(default, expected["kind"])
        assert rendered["metadata"]["name"] == expected["metadata"]["name"]
        assert rendered["webhooks"] == expected["webhooks"]
        assert "annotations" not in rendered["metadata"]  # self-signed: the operator injects the caBundle


def test_rbac_matches_manifests(default: list[dict[str, Any]]) -> None:
    shipped = {
        (d["kind"], d["metadata"]["name"]): d
        for p in (BASE / "rbac").glob("*.yaml")
        if p.name != "kustomization.yaml"
        for d in load_docs(p.read_text())
    }
    rbac_kinds = ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding")
    assert sorted((d["kind"], d["metadata"]["name"]) for d in default if d["kind"] in rbac_kinds) == sorted(shipped)
    for (kind, name), expected in shipped.items():
        got = one(default, kind, name)
        assert got.get("rules") == expected.get("rules"), name
        assert got.get("roleRef") == expected.get("roleRef"), name
        agg = {k: v for k, v in expected["metadata"]["labels"].items() if k.startswith("rbac.authorization.k8s.io/")}
        assert agg.items() <= got["metadata"]["labels"].items(), name
    binding = one(default, "ClusterRoleBinding", "kubetrain-operator")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kubetrain-operator", "namespace": NS}]


def test_deployment_matches_manifests(default: list[dict[str, Any]]) -> None:
    (dep,) = load_docs((BASE / "operator" / "deployment.yaml").read_text())
    expected = dep["spec"]["template"]["spec"]["containers"][0]
    got = container(default)
    for key in (
        "args",
        "env",
        "ports",
        "livenessProbe",
        "readinessProbe",
        "securityContext",
        "volumeMounts",
        "resources",
        "lifecycle",
    ):
        assert got[key] == expected[key], key
    pod, want = one(default, "Deployment")["spec"], dep["spec"]
    for key in ("replicas", "strategy"):
        assert pod[key] == want[key], key
    for key in ("terminationGracePeriodSeconds", "topologySpreadConstraints"):
        assert pod["template"]["spec"][key] == want["template"]["spec"][key], key
    (pdb,) = load_docs((BASE / "operator" / "pdb.yaml").read_text())
    assert one(default, "PodDisruptionBudget")["spec"] == pdb["spec"]
    assert got["image"] == f"ghcr.io/kubetrain/kubetrain:{kubetrain.__version__}"
    svc = one(default, "Service")
    pod_labels = one(default, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()


def test_runtimes_and_public_configmap(default: list[dict[str, Any]]) -> None:
    runtimes = [d for d in default if d["kind"] == "ClusterTrainingRuntime"]
    shipped = sorted(p.stem for p in (CHART / "files" / "runtimes").glob("*.yaml"))
    assert sorted(r["metadata"]["name"] for r in runtimes) == sorted(
        yaml.safe_load((CHART / "files" / "runtimes" / f"{s}.yaml").read_text())["metadata"]["name"]
        for s in shipped
    )
    for r in runtimes:
        assert r["metadata"]["labels"]["trainer.kubeflow.org/webhook-validation"] == "disabled"
        assert "namespace" not in r["metadata"]
    cm = one(default, "ConfigMap", "kubeflow-trainer-public")
    assert cm["data"]["kubeflow_trainer_version"] == kubetrain.__version__


# --- values ---


def test_operator_knobs_reach_the_deployment() -> None:
    docs = render(
        {
            "replicas": 3,
            "image": {"repository": "registry.example/kt", "tag": "dev", "pullPolicy": "Always"},
            "operator": {"qps": 20, "burst": 40, "concurrency": 8},
            "resources": {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}},
            "nodeSelector": {"pool": "system"},
        }
    )
    dep = one(docs, "Deployment")
    c = container(docs)
    assert dep["spec"]["replicas"] == 3
    assert (c["image"], c["imagePullPolicy"]) == ("registry.example/kt:dev", "Always")
    assert {"--qps=20", "--burst=40", "--concurrency=8"} <= set(c["args"])
    # Helm coalesces maps: keys not overridden keep the chart's defaults.
    assert c["resources"] == {"requests": {"cpu": "1", "memory": "256Mi"}, "limits": {"memory": "2Gi"}}
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}
    for doc in docs:
        assert schema_errors(doc) == []


def test_pod_failures_off_leaves_out_the_pod_watch_and_its_rbac() -> None:
    docs = render({"operator": {"podFailures": False}})
    args = container(docs)["args"]
    assert "--no-pod-failures" in args and not [a for a in args if a.startswith("--failure-log-qps")]
    rules = {(g, res): set(rule["verbs"]) for rule in one(docs, "ClusterRole", "kubetrain-operator")["rules"]
             for g in rule["apiGroups"] for res in rule["resources"]}  # fmt: skip
    assert rules[("", "pods")] == {"list"}  # still: an elastic job's failures, the status endpoint's pod check
    assert ("", "pods/log") not in rules and ("batch", "jobs") not in rules
    assert "--failure-log-qps=3" in container(render({"operator": {"failureLogQps": 3}}))["args"]


def test_availability_settings_can_be_changed_or_turned_off() -> None:
    docs = render(
        {
            "replicas": 3,
            "podDisruptionBudget": {"maxUnavailable": 2},
            "shutdownDelaySeconds": 10,
            "terminationGracePeriodSeconds": 45,
        }
    )
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 2
    assert pod["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 10}}}
    assert pod["terminationGracePeriodSeconds"] == 45
    off = render({"podDisruptionBudget": {"enabled": False}, "topologySpread": {"enabled": False},
                  "shutdownDelaySeconds": 0})  # fmt: skip
    assert not [d for d in off if d["kind"] == "PodDisruptionBudget"]
    pod = one(off, "Deployment")["spec"]["template"]["spec"]
    assert "topologySpreadConstraints" not in pod and "lifecycle" not in pod["containers"][0]
    for doc in [*docs, *off]:
        assert schema_errors(doc) == []
    with helm.Chart.load(str(CHART)) as chart, pytest.raises(helm.HelmError):
        chart.validate_schema({"podDisruptionBudget": {"minAvailable": 1}})


def test_runtimes_off_and_validation_label_off() -> None:
    assert not [d for d in render({"runtimes": {"enabled": False}}) if d["kind"] == "ClusterTrainingRuntime"]
    labelled = [
        d
        for d in render({"runtimes": {"disableWebhookValidation": False}})
        if d["kind"] == "ClusterTrainingRuntime"
    ]
    assert labelled and all(
        "trainer.kubeflow.org/webhook-validation" not in d["metadata"]["labels"] for d in labelled
    )


def test_user_roles_and_the_cluster_runtime_reader_can_be_left_out() -> None:
    names_of = lambda docs: {d["metadata"]["name"] for d in docs}  # noqa: E731
    default = names_of(render())
    assert {"kubetrain-edit", "kubetrain-view", "kubetrain-clustertrainingruntime-reader"} <= default
    no_reader = names_of(render({"rbac": {"authenticatedCanReadClusterTrainingRuntimes": False}}))
    assert default - no_reader == {"kubetrain-clustertrainingruntime-reader"}
    no_aggregation = names_of(render({"rbac": {"aggregateToDefaultRoles": False}}))
    assert default - no_aggregation == {"kubetrain-edit", "kubetrain-view"}
    with helm.Chart.load(str(CHART)) as chart, pytest.raises(helm.HelmError):
        chart.validate_schema({"rbac": {"readers": True}})


def test_public_configmap_can_be_left_out() -> None:
    docs = render({"publicConfigMap": {"enabled": False}})
    assert not [d for d in docs if d["metadata"]["name"] == "kubeflow-trainer-public"]


def test_cert_manager_mode() -> None:
    docs = render({"webhook": {"certMode": "cert-manager"}})
    issuer = one(docs, "Issuer")
    cert = one(docs, "Certificate")
    assert issuer["spec"] == {"selfSigned": {}}
    assert cert["spec"] == {
        "secretName": names.DEFAULT_SECRET,
        "dnsNames": [f"kubetrain-operator.{NS}.svc", f"kubetrain-operator.{NS}.svc.cluster.local"],
        "issuerRef": {"name": "kubetrain-selfsigned", "kind": "Issuer"},
    }
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        assert one(docs, kind)["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"{NS}/{names.DEFAULT_SECRET}"
        }
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["KUBETRAIN_WEBHOOK_CERT_MODE"] == "cert-manager"
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == CERT_DIR)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["secret"]["secretName"] == names.DEFAULT_SECRET
    # cert-manager injects the caBundle and owns the Secret: no access to webhook configurations or the Secret.
    role = one(docs, "ClusterRole", "kubetrain-operator")
    assert not [r for r in role["rules"] if "admissionregistration.k8s.io" in r["apiGroups"]]
    assert not [
        d for d in docs if d["kind"] in ("Role", "RoleBinding") and d["metadata"]["name"] == "kubetrain-webhook-cert"
    ]
    for doc in docs:
        assert schema_errors(doc) == []


def test_cert_manager_with_an_existing_issuer() -> None:
    ref = {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"}
    docs = render({"webhook": {"certMode": "cert-manager", "certManager": {"issuerRef": ref}}})
    assert not [d for d in docs if d["kind"] == "Issuer"]
    assert one(docs, "Certificate")["spec"]["issuerRef"] == ref


def test_other_namespace_is_used_everywhere_and_the_sdk_hint_shows() -> None:
    docs = render(namespace="ml-platform")
    for doc in docs:
        if doc["kind"] in ("Deployment", "Service", "ServiceAccount", "Role", "RoleBinding", "ConfigMap"):
            assert doc["metadata"]["namespace"] == "ml-platform"
    for hook in one(docs, "ValidatingWebhookConfiguration")["webhooks"]:
        assert hook["clientConfig"]["service"]["namespace"] == "ml-platform"
    assert "KUBEFLOW_SYSTEM_NAMESPACE=ml-platform" in notes(namespace="ml-platform")
    assert "KUBEFLOW_SYSTEM_NAMESPACE" not in notes()


def test_notes_warn_that_one_replica_refuses_creates_while_it_restarts() -> None:
    assert "Warning: replicas=1" in notes({"replicas": 1})
    assert "Warning" not in notes()
