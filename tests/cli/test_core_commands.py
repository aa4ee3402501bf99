"""``kubetrain validate / render / runtimes`` as a user runs them: exit codes, output, messages."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from kubetrain.cli.main import cli
from tests.conftest import shared_path

TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: demo, namespace: team-a}
spec:
  runtimeRef: {name: team-runtime, kind: TrainingRuntime}
  trainer: {numNodes: 2, command: [torchrun, train.py]}
"""
RUNTIME = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata: {name: team-runtime, namespace: team-a, labels: {trainer.kubeflow.org/framework: torch}}
spec:
  mlPolicy: {numNodes: 1, mpi: {numProcPerNode: 2}}
  template:
    spec:
      replicatedJobs:
        - name: launcher
          template:
            metadata: {labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}}
            spec: {template: {spec: {containers: [{name: node, image: mpi}]}}}
        - name: node
          template:
            spec: {template: {spec: {containers: [{name: node, image: mpi}]}}}
"""


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_validate_ok_and_json(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["validate", "-f", write(tmp_path, "rt.yaml", RUNTIME), "-f", write(tmp_path, "tj.yaml", TRAINJOB)]
    result = runner.invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "2 object(s) valid: 0 error(s), 0 warning(s)" in result.output
    result = runner.invoke(cli, [*args, "-o", "json"])
    assert '"valid": true' in result.output


def test_validate_reports_field_line_and_fix(tmp_path: Path) -> None:
    bad = TRAINJOB.replace("numNodes: 2", "numNodes: 2, env: [{name: OMPI_MCA_plm_rsh_args, value: x}]")
    result = CliRunner().invoke(cli, ["validate", "-f", write(tmp_path, "rt.yaml", RUNTIME),
                                      "-f", write(tmp_path, "tj.yaml", bad)])
    assert result.exit_code == 1
    assert "tj.yaml:6: TrainJob team-a/demo: spec.trainer.env: must not have reserved envs" in result.output
    assert "fix: remove them" in result.output
    assert "Traceback" not in result.output


def test_validate_cross_namespace_training_runtime(tmp_path: Path) -> None:
    tj = TRAINJOB.replace("namespace: team-a", "namespace: team-b")
    result = CliRunner().invoke(cli, ["validate", "-f", write(tmp_path, "rt.yaml", RUNTIME),
                                      "-f", write(tmp_path, "tj.yaml", tj)])
    assert result.exit_code == 1
    assert 'TrainingRuntime "team-runtime" exists in namespace team-a, not in "team-b"' in result.output
    assert "ClusterTrainingRuntime, which every namespace can use" in result.output


def test_validate_seed_misplaced_mlpolicy() -> None:
    result = CliRunner().invoke(cli, ["validate", "-f", str(shared_path("seeds", "snippets", "seed000-00.yaml"))])
    assert result.exit_code == 1
    assert "`mlPolicy` is at the top level (and spec is empty); it belongs under `spec`" in result.output


def test_validate_missing_file() -> None:
    result = CliRunner().invoke(cli, ["validate", "-f", "/nonexistent.yaml"])
    assert result.exit_code == 1 and "file not found" in result.output


def test_render_mpi_objects(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["render", "--fixed-keys", "-f", write(tmp_path, "rt.yaml", RUNTIME),
                                      "-f", write(tmp_path, "tj.yaml", TRAINJOB)])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("ConfigMap", "demo-runtime-snapshot"), ("Secret", "demo-mpi-ssh-auth"), ("ConfigMap", "demo-mpi-hostfile"),
        ("JobSet", "demo")]
    assert docs[2]["data"]["hostfile"] == "demo-node-0-0.demo slots=2\ndemo-node-0-1.demo slots=2\n"


def test_render_builtin_runtime_json(tmp_path: Path) -> None:
    tj = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\n" \
         "spec: {runtimeRef: {name: torch-distributed}, trainer: {numNodes: 3}}\n"
    result = CliRunner().invoke(cli, ["render", "-o", "json", "-f", write(tmp_path, "tj.yaml", tj)])
    assert result.exit_code == 0, result.output
    import json

    doc = json.loads(result.stdout)
    assert doc["kind"] == "List" and doc["items"][-1]["kind"] == "JobSet"


def test_render_invalid_exits_1(tmp_path: Path) -> None:
    tj = "apiVersion: trainer.kubeflow.org/v1alpha1\nkind: TrainJob\nmetadata: {name: j}\n" \
         "spec: {runtimeRef: {name: nope}}\n"
    result = CliRunner().invoke(cli, ["render", "-f", write(tmp_path, "tj.yaml", tj)])
    assert result.exit_code == 1
    assert 'ClusterTrainingRuntime "nope" not found' in result.output
    assert result.stdout.strip().startswith("error") or "JobSet" not in result.stdout


def test_runtimes_list_and_show() -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["runtimes", "list", "-o", "name"])
    assert result.exit_code == 0
    assert result.output.split() == sorted(result.output.split())
    assert "clustertrainingruntime/torchtune-llama3.2-3b" in result.output
    result = runner.invoke(cli, ["runtimes", "list"])
    assert "deepspeed-distributed" in result.output and "deepspeed" in result.output
    result = runner.invoke(cli, ["runtimes", "show", "mlx-distributed"])
    assert yaml.safe_load(result.output)["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] is True
    result = runner.invoke(cli, ["runtimes", "show", "nope"])
    assert result.exit_code == 1 and "known runtimes:" in result.output


def test_every_command_has_help_with_an_example() -> None:
    runner = CliRunner()

    import click

    def walk(group: click.Command, prefix: list[str]) -> list[list[str]]:
        out = [prefix]
        if isinstance(group, click.Group):
            ctx = click.Context(group)
            for name in group.list_commands(ctx):
                sub = group.get_command(ctx, name)
                assert sub is not None, name
                out += walk(sub, [*prefix, name])
        return out

    paths = walk(cli, [])
    assert {p[0] for p in paths if p} >= {"validate", "render", "runtimes", "crds", "run", "apply", "get",
                                          "describe", "logs", "delete", "cluster", "operator", "images"}
    for path in paths:
        result = runner.invoke(cli, [*path, "--help"])
        assert result.exit_code == 0, path
        assert "Example" in result.output, f"kubetrain {' '.join(path)} --help has no example"


def test_runtimes_list_shows_runtimes_applied_on_this_machine(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["apply", "-f", write(tmp_path, "rt.yaml", RUNTIME)])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["runtimes", "list"])
    row = next(line for line in result.output.splitlines() if line.startswith("team-runtime"))
    assert row.split() == [
        "team-runtime", "TrainingRuntime", "team-a", "torch", "mpi", "1", "supported", "baseline", "applied"
    ]
    result = runner.invoke(cli, ["runtimes", "list", "-n", "team-b", "-o", "name"])
    assert "trainingruntime/team-runtime" not in result.output
    result = runner.invoke(cli, ["runtimes", "show", "team-runtime"])
    assert "mpiImplementation" not in result.output and "numProcPerNode: 2" in result.output
