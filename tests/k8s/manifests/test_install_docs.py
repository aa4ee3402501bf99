"""The install the docs give is the one the tree supports: every repository path a documented command names exists
(a kustomize directory for ``-k``), and docs/install.md's kustomize install is the manager overlay, the wait for the
ClusterTrainingRuntime CRD, then the runtimes overlay, the same steps ``kubetrain.testing.cluster.install`` and the
e2e suite run."""

from __future__ import annotations

import re

import pytest

from kubetrain.api.crd import generate_crds
from kubetrain.testing import cluster
from tests.k8s.manifests.conftest import BASE, MANAGER, MANIFESTS, ROOT, RUNTIMES, load_docs

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
INLINE = re.compile(r"`((?:kubectl|helm|for d in|kubetrain crds) [^`]+)`")
REPO_PATH = re.compile(r"(?<![\w/.-])((?:manifests|charts)/[\w.$/-]*)")
LOOP = re.compile(r"for (\w+) in ([^;]+); do")
KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")


def commands(text: str) -> list[str]:
    """Every line of the fenced code blocks, and the inline code spans that run kubectl, helm or
    ``kubetrain crds``."""
    return [line for block in FENCE.findall(text) for line in block.splitlines()] + INLINE.findall(FENCE.sub("", text))


def expand(command: str) -> list[str]:
    """``for d in a b; do ... $d ...`` -> one command per value."""
    loop = LOOP.search(command)
    if not loop:
        return [command]
    var, values = loop.groups()
    return [command.replace(f"${var}", v) for v in values.split()]


def documented() -> list[tuple[str, str, str]]:
    """(doc, command, repository path) for every repository path a documented command names."""
    out = []
    for doc in DOCS:
        for command in commands(doc.read_text()):
            for one in expand(command):
                out += [(doc.name, one, path) for path in REPO_PATH.findall(one)]
    return out


def test_the_docs_name_install_paths() -> None:
    """Guards the collection below: it found the documented install."""
    paths = {path.rstrip("/") for _, _, path in documented()}
    assert {"manifests/overlays/manager", "manifests/overlays/runtimes", "charts/kubetrain"} <= paths


@pytest.mark.parametrize(("doc", "command", "path"), documented(), ids=lambda v: str(v)[:60])
def test_every_path_a_documented_command_names_exists(doc: str, command: str, path: str) -> None:
    target = ROOT / path
    assert target.exists(), f"{doc}: `{command}` names {path}, which does not exist"
    if re.search(rf"-k\s+{re.escape(path)}(\s|$)", command):
        assert any((target / k).exists() for k in KUSTOMIZATIONS), f"{doc}: `{command}`: {path} is no kustomization"


def kustomize_install_block() -> list[str]:
    text = (ROOT / "docs" / "install.md").read_text()
    section = text[text.index("## With kustomize") :]
    return [line.strip() for line in FENCE.findall(section)[0].splitlines() if line.strip()]


def test_the_documented_kustomize_install_is_manager_wait_runtimes() -> None:
    manager, wait, runtimes = kustomize_install_block()
    assert manager == f"kubectl apply --server-side -k {MANAGER.relative_to(ROOT)}"
    assert runtimes == f"kubectl apply --server-side -k {RUNTIMES.relative_to(ROOT)}"
    (crd,) = re.findall(r"\bcrd/(\S+)", wait)
    assert wait.startswith("kubectl wait --for=condition=Established ")
    # The CRD of what step 3 applies, and the one the e2e suite's and the benchmarks' install waits for.
    runtimes_kinds = {d["kind"] for p in (BASE / "runtimes").glob("*.yaml") for d in load_docs(p.read_text())}
    (served,) = [c for c in generate_crds() if c["spec"]["names"]["kind"] in runtimes_kinds - {"Kustomization"}]
    assert crd == served["metadata"]["name"] == cluster.RUNTIMES_CRD
    assert (MANAGER, RUNTIMES) == (MANIFESTS / cluster.MANAGER, MANIFESTS / cluster.RUNTIMES)


def test_the_documented_uninstall_deletes_the_runtimes_first() -> None:
    text = (ROOT / "docs" / "install.md").read_text()
    deletes = [c for c in commands(text) if c.startswith("kubectl delete -k manifests/overlays/")]
    assert [c.split()[3] for c in deletes[:2]] == ["manifests/overlays/runtimes", "manifests/overlays/manager"]


def test_path_pattern_finds_what_it_should() -> None:
    assert REPO_PATH.findall("kubectl apply --server-side -k manifests/overlays/manager") == [
        "manifests/overlays/manager"
    ]
    assert expand("for d in a b; do kubectl delete -k manifests/base/$d; done") == [
        "for d in a b; do kubectl delete -k manifests/base/a; done",
        "for d in a b; do kubectl delete -k manifests/base/b; done",
    ]
    assert REPO_PATH.findall("tests/k8s/manifests and KUBETRAIN_UPDATE_MANIFESTS, logs, charts") == []
    assert REPO_PATH.findall("--tag \"$(awk '/image:/ {print}' manifests/base/operator/deployment.yaml)\"") == [
        "manifests/base/operator/deployment.yaml"
    ]
