"""What only a cluster provides is refused at submit, in one message naming what is missing and the fix: Flux
without the flux binaries (not packaged for Debian 12) and a cache:// dataset (Kubeflow Trainer's data cache
service). A Flux TrainJob runs where the environment has Flux."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from kubetrain.api.errors import KubetrainError
from kubetrain.local.backend import LocalBackend
from kubetrain.local.submit import admission

from .conftest import condition, needs_namespaces, run_to_end, trainjob

pytestmark = needs_namespaces

FLUX_IMAGE = "example.com/hpc/app:1"


def flux_runtime() -> dict[str, object]:
    node = {"name": "node", "image": FLUX_IMAGE}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "flux-distributed", "labels": {"trainer.kubeflow.org/framework": "flux"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "flux": {}},
            "template": {"spec": {"replicatedJobs": [{
                "name": "node",
                "template": {
                    "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [node]}}},
                },
            }]}},
        },
    }


def flux_job(name: str = "hpc", command: list[str] | None = None) -> dict[str, object]:
    return trainjob(name, "flux-distributed", trainer={"numNodes": 2, "command": command or ["hostname"]})


def no_flux_anywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # where Debian would put it; it is not there
    monkeypatch.setattr(admission, "FLUX_VIEWS", "/nonexistent/._view")


def test_flux_without_the_flux_binaries_is_refused_at_submit(
    backend: LocalBackend, kt_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_flux_anywhere(monkeypatch)
    with pytest.raises(KubetrainError) as err:
        backend.apply([flux_runtime(), flux_job()], namespace="default", workdir=str(tmp_path), detach=False)
    assert str(err.value) == (
        "TrainJob hpc cannot run on this machine, so it was not created: replicated job node runs under Flux "
        "(mlPolicy.flux), and the Flux binaries are missing: no `flux` command in the Python environment standing in "
        f"for image {FLUX_IMAGE} ({sys.prefix}), on this machine's PATH, or in a Flux view under /nonexistent/._view "
        "(Flux is not packaged for Debian 12). Fix: install Flux (flux-core and flux-sched, e.g. built from source or "
        "with `spack install flux-sched`) so that `flux` is on the PATH, or map the image to an environment whose "
        f"bin/ has it in {kt_home}/images.yaml; or run it on a cluster (--context)"
    )
    assert backend.list_trainjobs("default") == []


# A stand-in for flux-core, enough for the runtime's scripts: `flux R encode` prints a resource set, a follower's
# `flux start` returns at once, and the lead's `flux start ... flux run FLAGS COMMAND` runs COMMAND once with the
# task count in the environment, as `flux run -n` would spread it.
FAKE_FLUX = """#!/bin/sh
case "$1" in
  R) echo '{"version": 1}' ;;
  start)
    while [ $# -gt 0 ] && [ "$1" != flux ]; do shift; done
    [ $# -eq 0 ] && exit 0
    shift 2  # flux run
    echo "flux run $1 $2 $3 $4"
    shift 4
    exec "$@" ;;
esac
"""


def test_flux_runs_where_the_environment_has_flux(
    backend: LocalBackend, kt_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_flux_anywhere(monkeypatch)
    env = tmp_path / "fluxenv"
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "flux").write_text(FAKE_FLUX)
    (env / "bin" / "flux").chmod(0o755)
    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "images.yaml").write_text(yaml.safe_dump({"example.com/hpc/*": str(env)}))
    # A script: the entrypoint passes the command as one string that the shell splits at spaces (upstream's).
    script = tmp_path / "check.sh"
    script.write_text("echo on $(hostname)\ncat /mnt/flux/config/etc/flux/system/hostlist\n"
                      "grep -c public-key /mnt/flux/config/etc/curve/curve.cert\n")
    command = ["sh", str(script)]
    status = run_to_end(backend, [flux_runtime(), flux_job("hpc", command)], tmp_path)
    assert condition(status, "Complete") is not None, status
    logs = "\n".join(backend.logs("hpc", "default", step="node", follow=False)).splitlines()
    said = [line for line in logs if line.split("] ", 1)[-1].startswith(("flux run", "on ", "hpc-", "1"))]
    # the lead broker (pod node-0-0) ran the command through flux run; the follower only started its broker
    assert said == ["[node-0/0] flux run -N 2 -n 2", "[node-0/0] on hpc-node-0-0", "[node-0/0] hpc-node-0-[0-1]",
                    "[node-0/0] 1"], logs
    assert any(line.startswith("[node-0/1] The follower worker exited cleanly") for line in logs), logs


def cache_runtime() -> dict[str, object]:
    from kubetrain.runtimes import builtin_yaml

    text = builtin_yaml("torch-distributed-with-cache")
    assert text is not None
    return yaml.safe_load(text)  # type: ignore[no-any-return]


# Kubeflow Trainer v2.3's admission wants an `initializer` volume in the dataset initializer of any TrainJob that sets
# spec.initializer.dataset, and its data cache runtime has none: a TrainJob gives it one (kubetrain checks the same).
INITIALIZER_VOLUME = [{
    "targetJobs": [{"name": "dataset-initializer"}],
    "spec": {
        "volumes": [{"name": "initializer", "emptyDir": {}}],
        "containers": [{"name": "dataset-initializer",
                        "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}]}],
    },
}]


def test_a_cache_dataset_is_refused_at_submit(backend: LocalBackend, tmp_path: Path) -> None:
    tj = trainjob("cached", "torch-distributed-with-cache",
                  initializer={"dataset": {"storageUri": "cache://sales/orders"}},
                  trainer={"command": ["python", "train.py"]}, podTemplateOverrides=INITIALIZER_VOLUME)
    with pytest.raises(KubetrainError) as err:
        backend.apply([tj], namespace="default", workdir=str(tmp_path), detach=False)
    assert str(err.value) == (
        "TrainJob cached cannot run on this machine, so it was not created: replicated job dataset-initializer "
        "fetches STORAGE_URI cache://sales/orders: the data cache (cache://) is a Kubeflow Trainer service on a "
        "cluster (the initializer starts a LeaderWorkerSet of data-cache pods), which does not run on this machine. "
        "Fix: copy the table to this machine and name it with file:///<path> in spec.initializer.dataset.storageUri; "
        "or run it on a cluster (--context)"
    )
    assert backend.list_trainjobs("default") == []


def test_cache_with_an_initializer_command_of_ones_own_is_left_to_it() -> None:
    """A container that gives its own command runs whatever its environment holds (upstream's initializer, say)."""
    rt = cache_runtime()
    init = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    init["containers"][0]["env"].append({"name": "STORAGE_URI", "value": "cache://s/t"})
    jobset = {"kind": "JobSet", "metadata": {"name": "x"}, "spec": rt["spec"]["template"]["spec"]}
    with pytest.raises(KubetrainError):
        admission.check_local_support([jobset])
    init["containers"][0]["command"] = ["python", "-m", "pkg.initializers.dataset"]
    admission.check_local_support([jobset])
