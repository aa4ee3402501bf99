"""``kubetrain validate`` and Pod Security: warnings with path, line and fix, --strict, --pod-security and the
``podSecurity`` entries of ``-o json`` (the issue's insecure runtime used to pass with 0 warnings)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from kubetrain.cli.main import cli

INSECURE = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: insecure
  labels: {trainer.kubeflow.org/framework: torch}
spec:
  mlPolicy: {numNodes: 1, torch: {}}
  template:
    spec:
      replicatedJobs:
      - name: node
        template:
          metadata:
            labels: {trainer.kubeflow.org/trainjob-ancestor-step: trainer}
          spec:
            template:
              spec:
                hostNetwork: true
                hostPID: true
                containers:
                - name: node
                  image: img
                  securityContext:
                    privileged: true
                    allowPrivilegeEscalation: true
                    runAsUser: 0
                    capabilities: {add: [SYS_ADMIN]}
                volumes:
                - name: root
                  hostPath: {path: /}
"""
JOB = """\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: job}
spec:
  runtimeRef: {name: %s}
"""
P = "spec.template.spec.replicatedJobs[0].template.spec.template.spec"


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_insecure_runtime_warns_per_failed_check_with_line_and_fix(tmp_path: Path) -> None:
    runtime = write(tmp_path, "rt.yaml", INSECURE)
    result = CliRunner().invoke(cli, ["validate", "-f", runtime])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "1 object(s) valid: 0 error(s), 5 warning(s)" in out
    assert (
        f"rt.yaml:24: ClusterTrainingRuntime insecure: {P}.containers[0].securityContext.privileged: "
        'PodSecurity baseline (privileged): container "node" is privileged' in out
    )
    assert "fix: remove securityContext.privileged or set it to false" in out
    assert f"rt.yaml:18: ClusterTrainingRuntime insecure: {P}.hostNetwork" in out
    assert f"{P}.volumes[0].hostPath: PodSecurity baseline (hostPathVolumes)" in out
    assert "pod security: ClusterTrainingRuntime insecure: privileged" in out
    assert CliRunner().invoke(cli, ["validate", "--strict", "-f", runtime]).exit_code == 1
    restricted = CliRunner().invoke(cli, ["validate", "--pod-security", "restricted", "-f", runtime])
    assert "0 error(s), 10 warning(s)" in restricted.output
    anything = CliRunner().invoke(cli, ["validate", "--strict", "--pod-security", "privileged", "-f", runtime])
    assert anything.exit_code == 0 and "0 error(s), 0 warning(s)" in anything.output


def test_json_has_one_entry_per_runtime_and_trainjob(tmp_path: Path) -> None:
    files = [write(tmp_path, "rt.yaml", INSECURE), write(tmp_path, "jobs.yaml", "\n---\n".join(
        [JOB % "insecure", JOB.replace("name: job", "name: plain") % "torch-distributed",
         JOB.replace("name: job", "name: lost") % "nowhere"]))]  # fmt: skip
    result = CliRunner().invoke(cli, ["validate", "-o", "json", "-f", files[0], "-f", files[1]])
    report = json.loads(result.stdout)
    entries = {(e["kind"], e["name"]): e for e in report["podSecurity"]}
    assert list(entries) == [
        ("ClusterTrainingRuntime", "insecure"),
        ("TrainJob", "job"),
        ("TrainJob", "plain"),
        ("TrainJob", "lost"),
    ]
    assert entries[("ClusterTrainingRuntime", "insecure")]["namespace"] is None
    assert [e["level"] for e in entries.values()] == ["privileged", "privileged", "baseline", None]
    assert entries[("TrainJob", "lost")]["error"] == (
        'not rated: spec.runtimeRef.name: ClusterTrainingRuntime "nowhere" not found: specified '
        "clusterTrainingRuntime must be created before the TrainJob is created")
    assert entries[("TrainJob", "plain")]["namespace"] == "default"
    privileged = next(f for f in entries[("TrainJob", "job")]["findings"] if f["check"] == "privileged")
    assert privileged == {
        "check": "privileged",
        "level": "baseline",
        "path": f"{P}.containers[0].securityContext.privileged",
        "message": 'container "node" is privileged (full access to the node)',
        "fix": "remove securityContext.privileged or set it to false",
        "replicatedJob": "node",
        "subject": 'container "node"',
    }
    # The TrainJob's findings are the runtime's: warned once, for the runtime.
    warned = [w for w in report["warnings"] if "PodSecurity" in w["message"]]
    assert {w["obj"] for w in warned} == {"ClusterTrainingRuntime insecure"}


def test_trainjob_on_a_builtin_runtime_names_where_the_pods_come_from(tmp_path: Path) -> None:
    job = write(tmp_path, "job.yaml", JOB % "torch-distributed")
    assert CliRunner().invoke(cli, ["validate", "--strict", "-f", job]).exit_code == 0
    result = CliRunner().invoke(cli, ["validate", "--strict", "--pod-security", "restricted", "-f", job])
    assert result.exit_code == 1
    assert "(pod template from ClusterTrainingRuntime torch-distributed)" in result.output
    assert "fix: set securityContext.allowPrivilegeEscalation: false" in result.output
    restricted = write(tmp_path, "r.yaml", JOB % "torch-distributed-restricted")
    ok = CliRunner().invoke(cli, ["validate", "--strict", "--pod-security", "restricted", "-f", restricted])
    assert ok.exit_code == 0, ok.output
    assert "pod security: TrainJob job: restricted" in ok.output


def test_strict_counts_every_warning(tmp_path: Path) -> None:
    from kubetrain.runtimes import builtin_yaml

    text = (builtin_yaml("torch-distributed") or "").replace(
        "trainer.kubeflow.org/framework: torch",
        "trainer.kubeflow.org/framework: torch\n    trainer.kubeflow.org/support: deprecated",
    )
    path = write(tmp_path, "old.yaml", text)
    plain = CliRunner().invoke(cli, ["validate", "-f", path])
    assert plain.exit_code == 0 and "0 error(s), 1 warning(s)" in plain.output, plain.output
    assert "is deprecated" in plain.output and "PodSecurity baseline" not in plain.output
    assert CliRunner().invoke(cli, ["validate", "--strict", "-f", path]).exit_code == 1


def test_runtimes_list_shows_the_pod_security_level() -> None:
    result = CliRunner().invoke(cli, ["runtimes", "list"])
    assert result.exit_code == 0, result.output
    header, *lines = result.stdout.splitlines()
    assert "POD SECURITY" in header
    levels = {line.split()[0]: line.split()[-2] for line in lines if line.strip()}
    assert levels["torch-distributed-restricted"] == "restricted"
    assert levels["torch-distributed"] == levels["deepspeed-distributed"] == "baseline"


def test_a_privileged_runtime_is_told_everything_restricted_refuses(tmp_path: Path) -> None:
    """Not only its baseline violations: PodSecurity's own line for restricted, under the report line (at every
    --pod-security level), and in -o json. A TrainJob on that runtime does not repeat it."""
    files = ["-f", write(tmp_path, "rt.yaml", INSECURE), "-f", write(tmp_path, "job.yaml", JOB % "insecure")]
    restricted = (
        'job node: would violate PodSecurity "restricted:latest": host namespaces (hostNetwork=true, hostPID=true), '
        'privileged (container "node" must not set securityContext.privileged=true), '
        'allowPrivilegeEscalation != false (container "node" must set securityContext.allowPrivilegeEscalation=false), '
        'unrestricted capabilities (container "node" must set securityContext.capabilities.drop=["ALL"]; '
        'container "node" must not include "SYS_ADMIN" in securityContext.capabilities.add), '
        'restricted volume types (volume "root" uses restricted volume type "hostPath"), '
        'runAsNonRoot != true (pod or container "node" must set securityContext.runAsNonRoot=true), '
        'runAsUser=0 (container "node" must not set runAsUser=0), '
        'seccompProfile (pod or container "node" must set securityContext.seccompProfile.type to "RuntimeDefault" or '
        '"Localhost")'
    )
    for level in ("privileged", "baseline", "restricted"):
        out = CliRunner().invoke(cli, ["validate", "--pod-security", level, *files]).output
        assert f"pod security: ClusterTrainingRuntime insecure: privileged\n  {restricted}\n" in out
        assert out.count("would violate PodSecurity") == 1, out
    report = json.loads(CliRunner().invoke(cli, ["validate", "-o", "json", *files]).stdout)
    entries = {(e["kind"], e["name"]): e for e in report["podSecurity"]}
    for key in (("ClusterTrainingRuntime", "insecure"), ("TrainJob", "job")):
        assert entries[key]["restricted"] == [{"replicatedJob": "node", "message": restricted.split(": ", 1)[1]}]


def test_restricted_pods_get_no_restricted_line(tmp_path: Path) -> None:
    job = write(tmp_path, "job.yaml", JOB % "torch-distributed-restricted")
    out = CliRunner().invoke(cli, ["validate", "-f", job]).output
    assert "pod security: TrainJob job: restricted" in out and "would violate" not in out
