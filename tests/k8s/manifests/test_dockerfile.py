"""The operator image recipe, checked statically (no container runtime here): pinned base, non-root numeric
user, and the entrypoint/ports the Deployment relies on. test_image.py builds it (`make image`) and compares."""

from __future__ import annotations

import fnmatch
import json
import re
import tomllib

from tests.k8s.manifests.conftest import BASE, ROOT, load_docs

DOCKERFILE = (ROOT / "Dockerfile").read_text()


def instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE)
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_base_image_is_debian_12_slim_pinned_to_a_point_release() -> None:
    """Debian 12 (python3.11), the base `make image` can build without a registry (debootstrap)."""
    (arg,) = [v for k, v in instructions() if k == "ARG" and v.startswith("DEBIAN_IMAGE=")]
    assert re.fullmatch(r"DEBIAN_IMAGE=debian:12\.\d+-slim", arg), arg
    assert [v for k, v in instructions() if k == "FROM"] == ["${DEBIAN_IMAGE} AS build", "${DEBIAN_IMAGE}"]


def test_the_package_lives_in_a_venv_on_the_path() -> None:
    """Debian's python3 is externally managed: the package goes into /opt/venv, which PATH puts first."""
    final = instructions()[max(i for i, (k, _) in enumerate(instructions()) if k == "FROM"):]
    assert ("COPY", "--from=build /opt/venv /opt/venv") in final
    (env,) = [v for k, v in final if k == "ENV"]
    assert re.search(r"(^|\s)PATH=/opt/venv/bin:", env), env


def test_build_tools_are_pinned() -> None:
    for k, v in instructions():
        if k == "RUN" and "pip install" in v:
            words = v.split("pip install", 1)[1].split("&&")[0].split()
            packages = [w for w in words if not w.startswith("-") and not w.endswith(".whl")]
            assert all("==" in p for p in packages), v


def test_runs_as_numeric_non_root_user_like_the_deployment_requires() -> None:
    users = [v for k, v in instructions() if k == "USER"]
    assert users and re.fullmatch(r"[1-9]\d*:[1-9]\d*", users[-1])
    (dep,) = load_docs((BASE / "operator" / "deployment.yaml").read_text())
    assert dep["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True


def test_entrypoint_and_ports_match_the_deployment() -> None:
    ins = dict(instructions())
    assert json.loads(ins["ENTRYPOINT"]) == ["kubetrain"]
    (dep,) = load_docs((BASE / "operator" / "deployment.yaml").read_text())
    container = dep["spec"]["template"]["spec"]["containers"][0]
    assert json.loads(ins["CMD"]) == [container["args"][0]]
    exposed = {int(p) for p in ins["EXPOSE"].split()}
    assert exposed == {p["containerPort"] for p in container["ports"]}


def test_the_console_script_the_image_runs_exists() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["kubetrain"] == "kubetrain.cli.main:main"
    assert (ROOT / project["readme"]).exists()  # COPY'd into the build stage


def test_dockerignore_sends_only_the_package_sources() -> None:
    rules = [r for r in (ROOT / ".dockerignore").read_text().splitlines() if r and not r.startswith("#")]

    def included(path: str) -> bool:
        keep = True
        for rule in rules:
            negate = rule.startswith("!")
            pattern = rule[1:] if negate else rule
            if fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern.rstrip("/") + "/*"):
                keep = negate
        return keep

    assert included("pyproject.toml") and included("src/kubetrain/__init__.py")
    assert (
        not included(".venv/bin/python") and not included("tests/conftest.py") and not included(".git/HEAD")
    )
