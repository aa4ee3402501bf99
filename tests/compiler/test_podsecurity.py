"""Pod Security reports of what the compiler emits: built-in runtimes stay quiet at baseline, the restricted
variant is restricted, TrainJob overrides count, paths point into the runtime template."""

from __future__ import annotations

import pytest

from kubetrain.api import constants as c
from kubetrain.api.loader import load_file
from kubetrain.api.runtime import ClusterTrainingRuntime
from kubetrain.compiler.podsecurity import WARNING_LIMIT, lint_runtime, lint_trainjob, probe_trainjob
from kubetrain.runtimes import builtin_runtime, builtin_runtimes
from tests.builders import RuntimeBuilder, TrainJobBuilder
from tests.conftest import SHARED

POD = "spec.template.spec.replicatedJobs[{}].template.spec.template.spec"
UPSTREAM = sorted((SHARED / "reference" / "upstream" / "runtimes").glob("v*/*.yaml"))


@pytest.mark.parametrize("runtime", builtin_runtimes(), ids=lambda r: r.name)
def test_builtin_runtimes_are_quiet_at_baseline(runtime: ClusterTrainingRuntime) -> None:
    report = lint_runtime(runtime)
    assert report.meets("baseline"), [f.path for f in report.violations("baseline")]
    assert report.violations("baseline") == []
    assert set(report.pods) == {rj["name"] for rj in runtime.spec.template.spec.to_wire()["replicatedJobs"]}


def test_the_restricted_variant_meets_restricted_for_plain_and_sized_jobs() -> None:
    runtime = builtin_runtime("torch-distributed-restricted")
    assert runtime is not None
    report = lint_runtime(runtime)
    assert (report.level, report.findings) == ("restricted", [])
    job = TrainJobBuilder(runtime=runtime.name).trainer(numNodes=3, numProcPerNode=2, command=["torchrun", "t.py"])
    job = job.resources(limits={"nvidia.com/gpu": 1}).build()
    assert lint_trainjob(job, runtime).level == "restricted"


@pytest.mark.parametrize("path", UPSTREAM, ids=[f"{p.parent.name}/{p.name}" for p in UPSTREAM])
def test_upstream_runtimes_meet_baseline(path: object) -> None:
    (runtime,) = load_file(path).objects  # type: ignore[arg-type]
    assert lint_runtime(runtime).meets("baseline")


def test_mpi_runtime_volumes_added_by_the_compiler_are_allowed() -> None:
    runtime = builtin_runtime("deepspeed-distributed")
    assert runtime is not None
    report = lint_runtime(runtime)
    assert report.level == "baseline"
    assert not [f for f in report.findings if f.check == "restrictedVolumes"]


def insecure_runtime(**ml: object) -> ClusterTrainingRuntime:
    rt = (
        RuntimeBuilder("insecure")
        .ml(numNodes=1, **(ml or {"torch": {}}))
        .rjob("init", containers=[{"name": "fetch", "image": "img"}])
        .rjob(
            c.NODE,
            ancestor=c.ANCESTOR_TRAINER,
            containers=[{"name": c.NODE, "image": "img", "securityContext": {"privileged": True}}],
            pod={"hostNetwork": True, "volumes": [{"name": "root", "hostPath": {"path": "/"}}]},
        )
        .build()
    )
    assert isinstance(rt, ClusterTrainingRuntime)
    return rt


def test_runtime_findings_name_the_field_in_the_runtime_template() -> None:
    report = lint_runtime(insecure_runtime())
    assert report.level == "privileged"
    assert report.pods == {"init": "baseline", c.NODE: "privileged"}
    baseline = {(f.check, f.path) for f in report.violations("baseline")}
    assert baseline == {
        ("privileged", POD.format(1) + ".containers[0].securityContext.privileged"),
        ("hostNamespaces", POD.format(1) + ".hostNetwork"),
        ("hostPathVolumes", POD.format(1) + ".volumes[0].hostPath"),
    }
    finding = next(f for f in report.findings if f.check == "privileged")
    assert (finding.replicated_job, finding.subject, finding.level) == (c.NODE, 'container "node"', "baseline")
    assert finding.short() == (
        'PodSecurity baseline: job node, container "node": remove securityContext.privileged or set it to false'
    )


def test_trainjob_overrides_are_judged() -> None:
    runtime = builtin_runtime("torch-distributed-restricted")
    assert runtime is not None
    job = (
        TrainJobBuilder(runtime=runtime.name)
        .spec(podTemplateOverrides=[{"targetJobs": [{"name": "node"}], "spec": {"hostIPC": True}}])
        .build()
    )
    report = lint_trainjob(job, runtime)
    assert (report.kind, report.name, report.namespace, report.level) == (
        "TrainJob",
        "test-job",
        "default",
        "privileged",
    )
    assert [(f.check, f.path) for f in report.findings] == [("hostNamespaces", POD.format(0) + ".hostIPC")]


def test_a_trainjob_validation_rejects_is_not_rated(monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = RuntimeBuilder("empty").ml(numNodes=1, torch={}).build()
    _never_compiled(monkeypatch)
    report = lint_trainjob(TrainJobBuilder(runtime="empty").build(), runtime)
    assert report.level is None and report.error
    assert report.error.startswith("not rated: spec.runtimeRef: ")
    assert report.to_json()["error"] == report.error


def test_a_runtime_validation_rejects_is_not_rated_nor_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    _never_compiled(monkeypatch)
    report = lint_runtime(insecure_runtime(flux={}, torch={}))  # two policies: the runtime is refused
    assert report.level is None and report.findings == [] and report.pods == {}
    assert report.error == "not rated: spec.mlPolicy: Only one of the policy can be configured (found torch, flux)"


def _never_compiled(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubetrain.compiler.podsecurity as lint

    def refuse(*args: object, **kwargs: object) -> object:
        raise AssertionError("the lint compiled what validation rejects")

    monkeypatch.setattr(lint, "compile_trainjob", refuse)


def test_probe_trainjob_references_the_runtime_in_its_namespace() -> None:
    rt = RuntimeBuilder("team", kind="TrainingRuntime", namespace="team-a").ml(numNodes=1, torch={}).trainer().build()
    job = probe_trainjob(rt)
    assert (job.namespace, job.spec.runtime_ref.name, job.spec.runtime_ref.kind) == (
        "team-a",
        "team",
        "TrainingRuntime",
    )
    assert lint_runtime(rt).namespace == "team-a"


def test_warnings_fit_the_api_servers_limit() -> None:
    rt = (
        RuntimeBuilder("long")
        .ml(numNodes=1, torch={})
        .rjob(
            "a-very-long-replicated-job-name-for-a-dataset-initializer",
            containers=[{"name": "a-container-with-an-equally-long-name-for-good-measure", "image": "i",
                         "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "NET_ADMIN", "SYS_PTRACE"]}}}],
            pod={"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}},
        )
        .build()
    )  # fmt: skip
    report = lint_runtime(rt)
    assert len(report.findings) >= 5
    for f in report.findings:
        line = f.short()
        assert len(line) <= WARNING_LIMIT
        assert line.startswith(f"PodSecurity {f.level}: job a-very-long")


def test_json_shape() -> None:
    data = lint_runtime(insecure_runtime()).to_json()
    assert set(data) == {"kind", "name", "namespace", "level", "pods", "findings", "restricted"}
    assert data["pods"] == [
        {"replicatedJob": "init", "level": "baseline"},
        {"replicatedJob": "node", "level": "privileged"},
    ]
    assert set(data["findings"][0]) == {"check", "level", "path", "message", "fix", "replicatedJob", "subject"}
