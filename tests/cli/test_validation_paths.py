"""validate, render, apply and run apply the same rules (the one validation entry point), see the runtimes a
backend has installed, print warnings, and never lose text to terminal markup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from kubetrain.cli.main import cli

RUNTIME = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: {name}
  labels: {{trainer.kubeflow.org/framework: torch{labels}}}
spec:
  mlPolicy: {policy}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata: {{labels: {{trainer.kubeflow.org/trainjob-ancestor-step: trainer}}}}
            spec: {{template: {{spec: {{containers: [{{name: node, image: img, command: [python, t.py]}}]}}}}}}
"""
TRAINJOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {{name: demo}}
spec:
  runtimeRef: {{name: {runtime}}}
{extra}"""
TWO_POLICIES = "{numNodes: 1, torch: {}, mpi: {}}"
NODES_AND_ELASTIC = "{numNodes: 2, torch: {elasticPolicy: {minNodes: 1, maxNodes: 3}}}"


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def runtime(name: str = "my-rt", policy: str = "{numNodes: 1, torch: {}}", labels: str = "") -> str:
    return RUNTIME.format(name=name, policy=policy, labels=labels)


def trainjob(runtime_name: str = "my-rt", extra: str = "") -> str:
    return TRAINJOB.format(runtime=runtime_name, extra=extra)


def kubetrain(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


REJECTED = {
    TWO_POLICIES: "Only one of the policy can be configured",
    NODES_AND_ELASTIC: "numNodes should not be set if torch.elasticPolicy is configured",
    "{numNodes: 1, torch: {numProcPerNode: 0}}": "NumProcPerNode must be equal to auto, cpu, gpu, or int value",
}


@pytest.mark.parametrize("policy", list(REJECTED), ids=["two policies", "numNodes+elastic", "numProcPerNode 0"])
@pytest.mark.parametrize("verb", ["validate", "render", "apply", "run"])
def test_every_verb_rejects_what_validate_rejects(tmp_path: Path, verb: str, policy: str) -> None:
    files = ["-f", write(tmp_path, "rt.yaml", runtime(policy=policy)), "-f", write(tmp_path, "tj.yaml", trainjob())]
    result = kubetrain(verb, *files)
    assert result.exit_code == 1, result.output
    assert REJECTED[policy] in result.output
    assert "not found" not in result.output  # the TrainJob is not told its (invalid) runtime does not exist
    assert 'not checked against ClusterTrainingRuntime "my-rt": that runtime is invalid' in result.output
    assert kubetrain("get", "runtimes").output.count("my-rt") == 0  # nothing was applied


def test_validate_and_render_see_runtimes_applied_here_and_delete_removes_them(tmp_path: Path) -> None:
    tj = write(tmp_path, "tj.yaml", trainjob())
    assert 'ClusterTrainingRuntime "my-rt" not found' in kubetrain("validate", "-f", tj).output
    applied = kubetrain("apply", "-f", write(tmp_path, "rt.yaml", runtime()))
    assert applied.exit_code == 0 and "clustertrainingruntime.trainer.kubeflow.org/my-rt created" in applied.output
    assert kubetrain("validate", "-f", tj).exit_code == 0
    rendered = kubetrain("render", "-f", tj)
    assert rendered.exit_code == 0 and "kind: JobSet" in rendered.output
    deleted = kubetrain("delete", "clustertrainingruntime", "my-rt")
    assert deleted.output.strip() == 'clustertrainingruntime.trainer.kubeflow.org "my-rt" deleted'
    assert kubetrain("validate", "-f", tj).exit_code == 1
    again = kubetrain("delete", "clustertrainingruntime", "my-rt")
    assert again.exit_code == 1 and 'clustertrainingruntime "my-rt" not found' in again.output
    builtin = kubetrain("delete", "clustertrainingruntime", "torch-distributed")
    assert builtin.exit_code == 1 and "is built into kubetrain and cannot be deleted" in builtin.output


def test_namespaced_runtimes_are_seen_and_deleted_in_their_namespace(tmp_path: Path) -> None:
    text = runtime("team-rt").replace("ClusterTrainingRuntime", "TrainingRuntime")
    assert kubetrain("apply", "-n", "team-a", "-f", write(tmp_path, "rt.yaml", text)).exit_code == 0
    tj = write(tmp_path, "tj.yaml", trainjob().replace("name: my-rt", "name: team-rt, kind: TrainingRuntime"))
    assert kubetrain("validate", "-n", "team-a", "-f", tj).exit_code == 0
    elsewhere = kubetrain("validate", "-f", tj)
    assert elsewhere.exit_code == 1 and 'TrainingRuntime "team-rt" exists in namespace team-a' in elsewhere.output
    missing = kubetrain("delete", "trainingruntime", "team-rt")
    assert missing.exit_code == 1 and 'trainingruntime "team-rt" not found in namespace default' in missing.output
    ok = kubetrain("delete", "trainingruntime", "team-rt", "-n", "team-a")
    assert ok.exit_code == 0, ok.output


def test_apply_and_run_print_deprecation_warnings(tmp_path: Path) -> None:
    old = write(tmp_path, "rt.yaml", runtime("old-rt", labels=", trainer.kubeflow.org/support: deprecated"))
    applied = kubetrain("apply", "-f", old)
    assert applied.exit_code == 0
    assert 'ClusterTrainingRuntime "old-rt" is deprecated and will be removed' in applied.output
    # A TrainJob this machine refuses (another controller manages it) still shows every warning of the batch.
    tj = write(tmp_path, "tj.yaml", trainjob("old-rt", "  managedBy: kueue.x-k8s.io/multikueue\n"))
    ran = kubetrain("run", "-f", tj)
    assert ran.exit_code == 1
    assert 'Referenced ClusterTrainingRuntime "old-rt" is deprecated' in ran.output
    assert "this TrainJob is managed by 'kueue.x-k8s.io/multikueue'" in ran.output


def test_multikueue_trainjobs_do_not_run_here_and_validate_says_why(tmp_path: Path) -> None:
    tj = write(tmp_path, "tj.yaml", trainjob("torch-distributed", "  managedBy: kueue.x-k8s.io/multikueue\n"))
    for verb in ("run", "apply"):
        result = kubetrain(verb, "-f", tj)
        assert result.exit_code == 1
        assert "error:" in result.output and "spec.managedBy" in result.output
        assert "remove spec.managedBy to run it here, or apply it to the cluster" in result.output
    checked = kubetrain("validate", "-f", tj)
    assert checked.exit_code == 0 and "so `kubetrain run` and `apply` here refuse it" in checked.output
    # On a cluster MultiKueue dispatches it and the trainer controller creates nothing: neither does render.
    rendered = kubetrain("render", "-f", tj)
    assert rendered.exit_code == 0 and rendered.stdout == ""
    assert ("spec.managedBy: not rendered: the TrainJob is managed by 'kueue.x-k8s.io/multikueue', so the Kubeflow "
            "Trainer controller creates no objects for it (MultiKueue dispatches it to a worker cluster, whose "
            "controller creates them)") in rendered.stderr
    assert "fix: to see the objects a cluster creates for it, render it without spec.managedBy" in rendered.stderr


def test_render_skips_only_the_trainjobs_another_controller_manages(tmp_path: Path) -> None:
    mine = trainjob("torch-distributed", "")
    theirs = trainjob("torch-distributed", "  managedBy: kueue.x-k8s.io/multikueue\n").replace("demo", "other")
    both = write(tmp_path, "tj.yaml", f"{mine}---\n{theirs}")
    rendered = kubetrain("render", "--fixed-keys", "-o", "json", "-f", both)
    assert rendered.exit_code == 0, rendered.output
    names = [o["metadata"]["name"] for o in json.loads(rendered.stdout)["items"] if o["kind"] == "JobSet"]
    assert names == ["demo"]
    assert "TrainJob other: spec.managedBy: not rendered" in rendered.stderr
    assert "TrainJob demo" not in rendered.stderr


def test_an_empty_file_is_an_error(tmp_path: Path) -> None:
    for verb in ("validate", "render", "apply", "run"):
        result = kubetrain(verb, "-f", write(tmp_path, "empty.yaml", ""))
        assert result.exit_code == 1, (verb, result.output)
        assert "no objects: the file is empty (or holds only comments)" in result.output


def test_all_errors_of_a_file_in_one_run(tmp_path: Path) -> None:
    text = runtime(policy="{numNodes: 1, torch: {numProcPerNode: 0}}") + "---\n" + trainjob(
        extra="  trainer:\n    numNodes: two\n    env: [{name: PET_NNODES, value: '1'}]\n").replace(
        "name: demo", "name: Demo_Job")
    result = kubetrain("validate", "-f", write(tmp_path, "all.yaml", text))
    assert result.exit_code == 1
    for expected in ("spec.mlPolicy.torch.numProcPerNode: NumProcPerNode must be equal to auto",
                     "spec.trainer.numNodes: expected an integer, got 'two'",
                     "metadata.name: metadata.name must match RFC 1035",
                     'not checked against ClusterTrainingRuntime "my-rt": that runtime is invalid'):
        assert expected in result.output, result.output
    # With the runtime fixed, the TrainJob is checked against it in the same run as its own rules.
    fixed = text.replace("numProcPerNode: 0", "numProcPerNode: 1")
    result = kubetrain("validate", "-f", write(tmp_path, "all.yaml", fixed))
    assert "spec.trainer.env: must not have reserved envs" in result.output
    assert "spec.trainer.numNodes: expected an integer" in result.output


def test_brackets_in_messages_are_printed(tmp_path: Path) -> None:
    bad = trainjob("torch-distributed", "  trainer: {numProcPerNode: many}\n")
    result = kubetrain("validate", "-f", write(tmp_path, "tj.yaml", bad))
    assert "must have an int value or [auto cpu gpu], got 'many'" in result.output


def test_validate_and_render_use_the_clusters_runtimes(tmp_path: Path) -> None:
    from kubetrain.k8s.backend.cluster import ClusterBackend
    from tests.k8s.helpers import torch_runtime
    from tests.k8s.threaded import background_api

    tj = write(tmp_path, "tj.yaml", trainjob("on-cluster"))
    with background_api(tmp_path) as (_, kubeconfig):
        ClusterBackend(kubeconfig, None).apply([torch_runtime("on-cluster")], namespace="default")
        assert kubetrain("validate", "-f", tj, "--kubeconfig", kubeconfig).exit_code == 0
        assert "kind: JobSet" in kubetrain("render", "-f", tj, "--kubeconfig", kubeconfig).output
        # The built-in runtimes are this machine's, not the cluster's.
        builtin = write(tmp_path, "b.yaml", trainjob("torch-distributed"))
        missing = kubetrain("validate", "-f", builtin, "--kubeconfig", kubeconfig)
        assert missing.exit_code == 1 and 'ClusterTrainingRuntime "torch-distributed" not found' in missing.output
        # apply on the cluster is checked the same way before anything is sent.
        bad = write(tmp_path, "bad.yaml", runtime("bad", policy=TWO_POLICIES))
        refused = kubetrain("apply", "-f", bad, "--kubeconfig", kubeconfig)
        assert refused.exit_code == 1 and "Only one of the policy can be configured" in refused.output
        assert [r.name for r in ClusterBackend(kubeconfig, None).list_runtimes(None)] == ["on-cluster"]


def test_describe_and_tables_print_brackets(capsys: pytest.CaptureFixture[str]) -> None:
    from kubetrain.api import TrainJob
    from kubetrain.api.views import Event, StepView, TrainJobDetails
    from kubetrain.cli.output import print_details

    tj = TrainJob.model_validate({
        "metadata": {"name": "demo"},
        "spec": {"runtimeRef": {"name": "rt"}, "trainer": {"command": ["python", "-c", "print([1][0])"]}},
        "status": {"conditions": [{"type": "Failed", "status": "True", "message": "exit [137] in [node]"}]},
    })
    print_details(TrainJobDetails(tj, [StepView("node-0-0", "node", "Failed", message="OOMKilled [oom]")],
                                  [Event("t", "Warning", "BackOff", "retry [2/3]")]))
    out = capsys.readouterr().out
    for text in ("print([1][0])", "exit [137] in [node]", "OOMKilled [oom]", "retry [2/3]"):
        assert text in out, out


def test_validate_goes_on_with_the_builtins_when_this_machines_state_cannot_be_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "not-a-directory"
    broken.write_text("")
    monkeypatch.setenv("KUBETRAIN_HOME", str(broken))
    tj = write(tmp_path, "tj.yaml", trainjob("torch-distributed"))
    checked = kubetrain("validate", "-f", tj)
    assert checked.exit_code == 0, checked.output
    assert "runtimes applied on this machine are not visible: its state cannot be opened" in checked.output
    applied = kubetrain("apply", "-f", tj)
    assert applied.exit_code == 1 and "Traceback" not in applied.output
    assert "cannot open this machine's kubetrain state" in applied.output
