"""Every manifest under examples/ validates and renders (the quickstart also runs: tests/examples/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kubetrain.cli.main import cli

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").rglob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_example_validates_and_renders(path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["validate", "-f", str(path)])
    assert result.exit_code == 0, result.output
    if "kind: TrainJob" in path.read_text():
        result = runner.invoke(cli, ["render", "--fixed-keys", "-f", str(path)])
        assert result.exit_code == 0, result.output
        assert "kind: JobSet" in result.stdout
