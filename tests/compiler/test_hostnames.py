"""Every pod hostname a TrainJob will get fits a DNS label; the error gives the longest name allowed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from kubetrain.compiler import validate_trainjob
from tests.builders import RuntimeBuilder, TrainJobBuilder


def runtime(rjob: str = "node") -> RuntimeBuilder:
    return RuntimeBuilder().ml(numNodes=1, torch={}).rjob(rjob, ancestor="trainer", containers=[
        {"name": "node", "image": "x"}])


def errors(name: str, nodes: int, rjob: str = "node") -> list[str]:
    tj = TrainJobBuilder(name=name, runtime="test-runtime").trainer(numNodes=nodes).build()
    return [f"{e.path}: {e.message}" for e in validate_trainjob(tj, runtime(rjob).build()).errors]


def test_the_longest_name_that_fits_passes_and_one_more_character_fails() -> None:
    # <name>-node-0-1: the name plus 9 characters with 2 nodes, so 54 is the longest allowed.
    assert errors("a" * 54, nodes=2) == []
    (msg,) = errors("a" * 55, nodes=2)
    assert msg.startswith('metadata.name: TrainJob name "' + "a" * 55 + '" (55 characters) is too long for runtime')
    assert f'hostname "{"a" * 55}-node-0-1" would have 64 characters' in msg
    assert "the longest TrainJob name allowed is 54 characters" in msg


def test_more_nodes_mean_longer_hostnames() -> None:
    assert errors("a" * 54, nodes=10) == []  # <name>-node-0-9
    assert "longest TrainJob name allowed is 53" in errors("a" * 54, nodes=11)[0]  # <name>-node-0-10


def test_the_replicated_job_name_counts() -> None:
    # <name>-a-very-long-trainer-job-0-0: 28 characters besides the name.
    assert "longest TrainJob name allowed is 35" in errors("a" * 50, nodes=1, rjob="a-very-long-trainer-job")[0]


@given(st.integers(min_value=1, max_value=63), st.integers(min_value=1, max_value=200))
def test_error_exactly_when_some_hostname_is_over_63(length: int, nodes: int) -> None:
    longest = length + len(f"-node-0-{nodes - 1}")
    found = errors("a" * length, nodes=nodes)
    assert bool(found) == (longest > 63)
    if found:
        allowed = 63 - len(f"-node-0-{nodes - 1}")
        assert f"longest TrainJob name allowed is {allowed} characters" in found[0]


def test_kubetrain_validate_reports_it(tmp_path: Path) -> None:
    name = "a" * 63
    f = tmp_path / "tj.yaml"
    f.write_text(
        "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\n"
        f"metadata: {{name: {name}}}\nspec:\n  runtimeRef: {{name: torch-distributed}}\n  trainer: {{numNodes: 2}}\n"
    )
    r = subprocess.run([sys.executable, "-m", "kubetrain.cli.main", "validate", "-f", str(f)], capture_output=True,
                       text=True, check=False)
    assert r.returncode == 1
    text = " ".join(r.stderr.split())
    assert "metadata.name" in text and "the longest TrainJob name allowed is 54 characters" in text, text
