"""The user-facing RBAC of manifests/base/rbac on a real API server, asked through SubjectAccessReviews: `edit` in
one namespace runs TrainJobs and publishes TrainingRuntimes there and nowhere else, reads but never writes
ClusterTrainingRuntimes; `view` reads but does not write; every authenticated user reads the runtime
catalogue, unless the reader binding is left out (Helm: rbac.authenticatedCanReadClusterTrainingRuntimes)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import ApiError, Client, NotFound, Resource
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.applying import apply
from tests.e2e.conftest import KUBECONFIG, call, kubectl, wait_until
from tests.k8s.manifests.conftest import BASE

pytestmark = pytest.mark.e2e

SAR = Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", namespaced=False)
CLUSTER_ROLE = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False)
CLUSTER_BINDING = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False
)
ROLE_BINDING = Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding")
GROUP = "trainer.kubeflow.org"
READER = "kubetrain-clustertrainingruntime-reader"


def user_rbac() -> list[dict[str, Any]]:
    docs = []
    for name in ("user_roles.yaml", "cluster_runtime_reader.yaml"):
        docs += [d for d in yaml.safe_load_all((BASE / "rbac" / name).read_text()) if d]
    return docs


def _resource(doc: dict[str, Any]) -> Resource:
    return CLUSTER_ROLE if doc["kind"] == "ClusterRole" else CLUSTER_BINDING


@pytest.fixture(scope="module")
def users() -> Iterator[tuple[str, str]]:
    """Two namespaces; in the first alice has `edit`, bob `view`, carol `admin` (RoleBindings)."""
    assert KUBECONFIG
    run = uuid.uuid4().hex[:6]
    ns_a, ns_b = f"kt-rbac-{run}-a", f"kt-rbac-{run}-b"
    docs = user_rbac()

    async def setup(client: Client) -> list[dict[str, Any]]:
        created = []
        for doc in docs:
            try:
                await client.get(_resource(doc), doc["metadata"]["name"])
            except NotFound:  # not installed: bring it for the test (an installed one is the install's to own)
                created.append(doc)
                await apply(client.session, doc, field_manager="kubetrain-e2e", resource=_resource(doc))
        for ns in (ns_a, ns_b):
            await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for user, role in (("alice", "edit"), ("bob", "view"), ("carol", "admin")):
            binding = {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": f"{user}-{role}", "namespace": ns_a},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
            }
            await client.create(binding, resource=ROLE_BINDING)
        return created

    created: list[dict[str, Any]] = call(setup)

    def aggregated() -> bool:
        async def go(client: Client) -> bool:
            roles = [await client.get(CLUSTER_ROLE, n) for n in ("admin", "edit", "view")]
            return all(any("trainjobs" in rule.get("resources", []) for rule in x.get("rules") or []) for x in roles)

        return bool(call(go))

    wait_until(aggregated, 60, "the aggregation controller to merge kubetrain's rules into admin/edit/view")
    yield ns_a, ns_b

    async def cleanup(client: Client) -> None:
        for ns in (ns_a, ns_b):
            try:
                await client.delete(r.NAMESPACE, ns)
            except ApiError:
                pass
        for doc in created:  # leave what was there before the test alone
            try:
                await client.delete(_resource(doc), doc["metadata"]["name"])
            except ApiError:
                pass

    call(cleanup)


def can(user: str, verb: str, resource: str, namespace: str | None = None, subresource: str = "") -> bool:
    attrs: dict[str, Any] = {"verb": verb, "group": GROUP, "resource": resource, "subresource": subresource}
    if namespace:
        attrs["namespace"] = namespace
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:authenticated"], "resourceAttributes": attrs},
    }

    async def go(client: Client) -> bool:
        answer = await client.create(review, resource=SAR)
        return bool(answer["status"].get("allowed"))

    return bool(call(go))


def test_edit_user_runs_trainjobs_and_publishes_runtimes_in_their_namespace_only(users: tuple[str, str]) -> None:
    a, b = users
    for verb in ("create", "get", "list", "watch", "update", "patch", "delete"):
        assert can("alice", verb, "trainjobs", a), verb
        assert can("alice", verb, "trainingruntimes", a), verb
    assert can("alice", "get", "trainjobs", a, "status")
    assert not can("alice", "update", "trainjobs", a, "status")  # status belongs to the operator
    assert not can("alice", "patch", "trainjobs", a, "status")
    for verb in ("create", "get", "list"):
        assert not can("alice", verb, "trainjobs", b), verb
        assert not can("alice", verb, "trainingruntimes", b), verb


def test_edit_user_lists_cluster_runtimes_but_cannot_create_them(users: tuple[str, str]) -> None:
    for verb in ("get", "list", "watch"):
        assert can("alice", verb, "clustertrainingruntimes"), verb
    for verb in ("create", "update", "patch", "delete"):
        assert not can("alice", verb, "clustertrainingruntimes"), verb


def test_view_user_reads_but_does_not_write(users: tuple[str, str]) -> None:
    a, b = users
    for resource in ("trainjobs", "trainingruntimes"):
        for verb in ("get", "list", "watch"):
            assert can("bob", verb, resource, a), (verb, resource)
        for verb in ("create", "update", "patch", "delete"):
            assert not can("bob", verb, resource, a), (verb, resource)
        assert not can("bob", "list", resource, b)
    assert can("bob", "get", "trainjobs", a, "status")
    assert can("bob", "list", "clustertrainingruntimes") and not can("bob", "create", "clustertrainingruntimes")


def test_admin_gets_the_edit_rules(users: tuple[str, str]) -> None:
    a, _ = users
    assert can("carol", "create", "trainjobs", a) and can("carol", "deletecollection", "trainingruntimes", a)
    assert not can("carol", "create", "clustertrainingruntimes")


def test_any_authenticated_user_reads_the_catalogue_until_the_reader_binding_is_removed(
    users: tuple[str, str],
) -> None:
    a, _ = users
    assert can("dave", "list", "clustertrainingruntimes")
    assert not can("dave", "list", "trainjobs", a) and not can("dave", "create", "clustertrainingruntimes")
    (binding,) = [d for d in user_rbac() if d["kind"] == "ClusterRoleBinding"]

    async def remove(client: Client) -> None:
        await client.delete(CLUSTER_BINDING, READER)

    call(remove)
    try:
        wait_until(lambda: not can("dave", "list", "clustertrainingruntimes"), 30, "the binding removal to apply")
        assert not can("alice", "list", "clustertrainingruntimes")  # a namespaced edit grant does not reach it
    finally:
        # Put back the way docs/install.md installs it, so the install's field manager keeps owning it.
        kubectl("apply", "--server-side", "-f", "-", input=yaml.safe_dump(binding))
    wait_until(lambda: can("dave", "list", "clustertrainingruntimes"), 30, "the binding to come back")
