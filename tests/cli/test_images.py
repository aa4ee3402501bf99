"""``kubetrain images`` as a user runs it: load, list, rm, prune, and one clear line for a bad archive."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kubetrain.cli.main import cli
from tests.local.images.testimage import SmallImage


def test_load_list_rm_and_prune(tmp_path: Path) -> None:
    runner = CliRunner()
    archive = SmallImage(name="myorg/train:1.4").docker_archive(tmp_path / "train.tar")
    result = runner.invoke(cli, ["images", "load", "-i", str(archive)])
    assert result.exit_code == 0, result.output
    assert "Loaded image: myorg/train:1.4 (" in result.output
    layout = SmallImage(marker="v2").oci_layout(tmp_path / "layout", ref_name="latest")
    result = runner.invoke(cli, ["images", "load", "-i", str(layout), "--tag", "localhost/train:v2"])
    assert result.exit_code == 0 and "Loaded image: localhost/train:v2" in result.output, result.output
    table = runner.invoke(cli, ["images", "list"]).output.splitlines()
    assert table[0].split() == ["IMAGE", "TAG", "IMAGE", "ID", "SIZE", "LOADED"]
    assert {tuple(r.split()[:2]) for r in table[1:]} == {("myorg/train", "1.4"), ("localhost/train", "v2")}
    rows = json.loads(runner.invoke(cli, ["images", "list", "-o", "json"]).output)
    assert sorted(n for r in rows for n in r["names"]) == ["docker.io/myorg/train:1.4", "localhost/train:v2"]
    result = runner.invoke(cli, ["images", "rm", "localhost/train:v2"])
    assert result.exit_code == 0 and "Untagged: localhost/train:v2" in result.output, result.output
    assert "Deleted layer: sha256:" in result.output  # its top layer; the shared base stays
    result = runner.invoke(cli, ["images", "rm", "localhost/nope:1"])
    assert result.exit_code == 1 and "not in the local store" in result.output
    assert "nothing to prune" in runner.invoke(cli, ["images", "prune"]).output


def test_bad_archives_are_one_line_each(tmp_path: Path) -> None:
    runner = CliRunner()
    arm = SmallImage(architecture="arm64").docker_archive(tmp_path / "arm.tar")
    truncated = tmp_path / "cut.tar"
    truncated.write_bytes(SmallImage().docker_archive(tmp_path / "full.tar").read_bytes()[:700_000])
    cases = [
        (arm, "no image for this machine's platform"),
        (truncated, "not a readable image archive (it is not a complete tar file)"),
        (tmp_path / "absent.tar", "no such file or directory"),
    ]
    for path, said in cases:
        result = runner.invoke(cli, ["images", "load", "-i", str(path)])
        assert result.exit_code == 1, result.output
        assert said in result.output and "Traceback" not in result.output
