"""The framework environments of the example tests: pins come from pyproject's extras, and only an unreachable
package registry makes a test skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.examples.envs import FRAMEWORKS, framework_env, requirements


def test_every_framework_has_an_exactly_pinned_extra() -> None:
    for framework in FRAMEWORKS.values():
        for extra in framework.extras:
            reqs = requirements(extra)
            assert reqs and all("==" in r for r in reqs), (extra, reqs)
    # Any torch must be the local CPU build: a range would download GBs of CUDA wheels.
    assert "torch==2.13.0" in requirements("deepspeed")


@pytest.mark.slow
def test_an_unreachable_registry_skips_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETRAIN_TEST_ENVS", str(tmp_path / "envs"))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)  # no local mirror or find-links from the machine's pip config
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # the discard port: nothing listens there
    with pytest.raises(pytest.skip.Exception, match=r"the package registry is unreachable \(pip install mlx=="):
        framework_env("mlx")
    # Nothing half-built is taken for an environment next time.
    assert not list((tmp_path / "envs").glob("mlx-*/kubetrain-env.json"))
