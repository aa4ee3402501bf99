"""The dataset and model initializer steps on this machine, as a user meets them: runtimes shaped like upstream's
(upstream's initializer images, no command, the shared ``initializer`` volume at ``/workspace``), sources on
this machine (``file://``), in a PersistentVolumeClaim, and on a Hugging Face hub reached from inside the TrainJob
(a pod serving the hub's API, as an in-cluster mirror would), with the token from a Secret (``secretRef``)."""

from __future__ import annotations

import base64
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local.backend import LocalBackend
from kubetrain.local.supervisor.controller import Supervisor

from ..initializers.fakehub import __file__ as FAKEHUB
from .conftest import condition, needs_namespaces, trainjob
from .test_cli import kt
from .test_cli import write as cli_write

pytestmark = [
    needs_namespaces,
    pytest.mark.skipif(
        __import__("importlib").util.find_spec("huggingface_hub") is None,
        reason="hf:// needs huggingface_hub (.[initializers])",
    ),
]

Obj = dict[str, Any]
TOKEN = "hf_local_test_token"
DATASET_IMAGE = "ghcr.io/kubeflow/trainer/dataset-initializer"
MODEL_IMAGE = "ghcr.io/kubeflow/trainer/model-initializer:v2.1.0"
HUB_PORT = 8080

# The trainer checks what the initializers left, as a training script would read it.
CHECK = """
import os
for top in ("/workspace/dataset", "/workspace/model"):
    for d, _, fs in sorted(os.walk(top)):
        if ".cache" in d:
            continue
        for f in sorted(fs):
            p = os.path.join(d, f)
            print("found", os.path.relpath(p, "/workspace"), open(p, "rb").read().decode())
"""


@pytest.fixture(autouse=True)
def _no_host_hub_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Pods inherit this process's environment: no developer token or cache may leak into a test.
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    for var in ("HF_TOKEN", "HF_ENDPOINT", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(var, raising=False)


def init_rjob(step: str, image: str, **pod: Any) -> Obj:
    c: Obj = {"name": f"{step}-initializer", "image": image,
              "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}]}
    return {
        "name": f"{step}-initializer",
        "dependsOn": pod.pop("depends_on", None) or [],
        "template": {
            "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": f"{step}-initializer"}},
            "spec": {"template": {"spec": {"containers": [c], **pod}}},
        },
    }


def init_runtime(name: str = "init-check", hub_root: Path | None = None) -> Obj:
    """Upstream's torchtune shape (two initializers, then the trainer), optionally with a hub pod first."""
    hub_dep = [{"name": "hub", "status": "Ready"}] if hub_root else []
    rjobs: list[Obj] = []
    if hub_root is not None:
        serve = [sys.executable, FAKEHUB, "--root", str(hub_root), "--port", str(HUB_PORT), "--token", TOKEN,
                 "--gated", "acme/private-model"]
        rjobs.append({"name": "hub", "template": {"spec": {"template": {"spec": {"containers": [{
            "name": "hub", "image": "python:3.11", "command": serve,
            "readinessProbe": {"tcpSocket": {"port": HUB_PORT}}}]}}}}})
    rjobs += [
        init_rjob("dataset", DATASET_IMAGE, depends_on=hub_dep),
        init_rjob("model", MODEL_IMAGE, depends_on=hub_dep),
        {
            "name": "node",
            "dependsOn": [{"name": "dataset-initializer", "status": "Complete"},
                          {"name": "model-initializer", "status": "Complete"}],
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                "spec": {"template": {"spec": {"containers": [{
                    "name": "node", "image": "python:3.11", "command": [sys.executable, "-c", CHECK],
                    "volumeMounts": [{"name": "initializer", "mountPath": "/workspace"}]}]}}},
            },
        },
    ]
    claim = {"metadata": {"name": "initializer"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    spec: Obj = {"replicatedJobs": rjobs, "volumeClaimPolicies": [{"templates": [claim]}]}
    if hub_root is not None:
        spec["successPolicy"] = {"operator": "All", "targetReplicatedJobs": ["node"]}
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
        "metadata": {"name": name}, "spec": {"mlPolicy": {"numNodes": 1}, "template": {"spec": spec}},
    }


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def run(backend: LocalBackend, manifests: list[Obj], workdir: Path) -> tuple[Obj, str]:
    names = backend.apply(manifests, namespace="default", workdir=str(workdir), detach=False)
    name = next(n.split("/", 1)[1].split()[0] for n in names if n.startswith("trainjob/"))
    return Supervisor(backend.store, "default", name).run(), name


def node_log(backend: LocalBackend, name: str) -> str:
    return "\n".join(backend.logs(name, "default", step="node", follow=False))


def step(backend: LocalBackend, name: str, replicated_job: str) -> Any:
    return next(s for s in backend.describe_trainjob(name, "default").steps if s.replicated_job == replicated_job)


def test_local_paths_land_where_upstreams_images_write(backend: LocalBackend, tmp_path: Path) -> None:
    data = write(tmp_path / "alpaca", {"data/train.jsonl": "rows", "README.md": "card"})
    model = write(tmp_path / "tiny", {"config.json": "{}", "original/tokenizer.model": "tok",
                                      "pytorch_model.bin": "pickle"})
    tj = trainjob("local-src", "init-check", initializer={
        "dataset": {"storageUri": f"file://{data}", "env": [{"name": "IGNORE_PATTERNS", "value": "README.md"}]},
        "model": {"storageUri": f"file://{model}"},
    })
    status, name = run(backend, [init_runtime(), tj], tmp_path)
    assert condition(status, "Complete"), status
    found = sorted(line for line in node_log(backend, name).splitlines() if line.startswith("found "))
    # dataset: IGNORE_PATTERNS from spec.initializer.dataset.env; model: upstream's default leaves *.bin out.
    assert found == ["found dataset/data/train.jsonl rows", "found model/config.json {}",
                     "found model/original/tokenizer.model tok"]


def test_a_persistent_volume_claim_mounted_into_the_initializer(backend: LocalBackend, tmp_path: Path) -> None:
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "corpus"},
           "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    backend.apply([pvc], namespace="default")
    claim_dir = Path(backend.claim_path(backend.get_core("PersistentVolumeClaim", "corpus", "default")))
    write(claim_dir, {"alpaca/data/part-0.jsonl": "from the claim"})
    mount = {"manager": "example.com/data", "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{
        "name": "dataset-initializer", "template": {"spec": {"template": {"spec": {
            "volumes": [{"name": "corpus", "persistentVolumeClaim": {"claimName": "corpus", "readOnly": True}}],
            "containers": [{"name": "dataset-initializer",
                            "volumeMounts": [{"name": "corpus", "mountPath": "/mnt/corpus", "readOnly": True}]}],
        }}}}}]}}}}
    tj = trainjob("pvc-src", "init-check", runtimePatches=[mount], initializer={
        "dataset": {"storageUri": "file:///mnt/corpus/alpaca"},
        "model": {"storageUri": f"file://{write(tmp_path / 'm', {'config.json': '{}'})}"},
    })
    status, name = run(backend, [init_runtime(), tj], tmp_path)
    assert condition(status, "Complete"), status
    assert "found dataset/data/part-0.jsonl from the claim" in node_log(backend, name)


def hub_repos(root: Path) -> Path:
    write(root / "datasets" / "tatsu-lab/alpaca", {"data/train-00000-of-00001.jsonl": "alpaca rows", "README.md": "#"})
    write(root / "models" / "acme/private-model", {"config.json": "{\"gated\": true}", "model.safetensors": "w",
                                                  "original/consolidated.00.pth": "pickle"})
    return root


def hub_env(name: str) -> list[Obj]:
    return [{"name": "HF_ENDPOINT", "value": f"http://{name}-hub-0-0.{name}:{HUB_PORT}"}]


def test_hf_from_a_hub_with_the_token_from_a_secret(kt_home: Path, tmp_path: Path) -> None:
    """As a user does it: `kubetrain apply` the Secret, `kubetrain run` the TrainJob naming it in secretRef."""
    secret = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token"},
              "data": {"ACCESS_TOKEN": base64.b64encode(TOKEN.encode()).decode()}}
    assert "secret/hf-token created" in kt("apply", "-f", cli_write(tmp_path / "secret.yaml", secret)).stdout
    tj = trainjob("hf-src", "init-hub", initializer={
        "dataset": {"storageUri": "hf://tatsu-lab/alpaca/data/train-00000-of-00001.jsonl", "env": hub_env("hf-src")},
        "model": {"storageUri": "hf://acme/private-model", "env": hub_env("hf-src"),
                  "secretRef": {"name": "hf-token"}},
    })
    rt = init_runtime("init-hub", hub_repos(tmp_path / "hub"))
    r = kt("run", "-f", cli_write(tmp_path / "job.yaml", rt, tj), timeout=300)
    out = r.stdout
    found = sorted(line.split("] ", 1)[-1] for line in out.splitlines() if "] found " in line)
    assert found == ["found dataset/README.md #", "found dataset/data/train-00000-of-00001.jsonl alpaca rows",
                     'found model/config.json {"gated": true}', "found model/model.safetensors w"], out
    assert TOKEN not in out + r.stderr
    assert "trainjob default/hf-src: Complete" in r.stderr

    # The same without the Secret: the run fails at once, saying why, and exits 1.
    del tj["spec"]["initializer"]["model"]["secretRef"]
    tj["metadata"]["name"] = "hf-nosecret"
    for spec in tj["spec"]["initializer"].values():
        spec["env"] = hub_env("hf-nosecret")
    r = kt("run", "-f", cli_write(tmp_path / "job2.yaml", rt, tj), timeout=300, check=False)
    assert r.returncode == 1, r.stderr
    assert "step model-initializer-0-0: Failed (exit code 3, Error: model acme/private-model on " in r.stderr
    assert "is gated, and no ACCESS_TOKEN was given" in r.stderr and "Traceback" not in r.stdout + r.stderr


@pytest.mark.parametrize(
    ("case", "initializer", "failed_step", "message"),
    [
        ("scheme", {"dataset": {"storageUri": "gs://bucket/alpaca"}}, "dataset-initializer",
         "STORAGE_URI 'gs://bucket/alpaca': unsupported scheme gs://; kubetrain's initializer fetches hf:// and "
         "file:// (fix: set spec.initializer.dataset.storageUri (or STORAGE_URI of the dataset-initializer "
         "container) to hf://<owner>/<name> or file:///<absolute path>)"),
        ("missing", {"dataset": {"storageUri": "hf://tatsu-lab/no-such-dataset"}}, "dataset-initializer",
         "dataset tatsu-lab/no-such-dataset on http://{name}-hub-0-0.{name}:8080 was not found without "
         "an ACCESS_TOKEN (it does not exist, or it is private)"),
        ("auth", {"model": {"storageUri": "hf://acme/private-model"}}, "model-initializer",
         "model acme/private-model on http://{name}-hub-0-0.{name}:8080 is gated, and no ACCESS_TOKEN "
         "was given (fix: put the token in a Secret under the key ACCESS_TOKEN and name it in "
         "spec.initializer.model.secretRef"),
    ],
)
def test_errors_fail_the_trainjob_at_once_with_the_reason(
    backend: LocalBackend, tmp_path: Path, case: str, initializer: Obj, failed_step: str, message: str
) -> None:
    name = f"bad-{case}"
    ok = {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}, "model": {"storageUri": "hf://acme/private-model"}}
    spec = {k: {**v, "env": hub_env(name)} for k, v in {**ok, **initializer}.items()}
    if "model" not in initializer:
        spec["model"]["env"] = [*hub_env(name), {"name": "ACCESS_TOKEN", "value": TOKEN}]
    rt = init_runtime("init-hub", hub_repos(tmp_path / "hub"))
    status, _ = run(backend, [rt, trainjob(name, "init-hub", initializer=spec)], tmp_path)
    failed = condition(status, "Failed")
    assert failed is not None and failed["reason"] == "FailedJobs", status
    s = step(backend, name, failed_step)
    assert (s.state, s.exit_code, s.restarts) == ("Failed", 3, 0)  # not retried through backoffLimit
    assert s.message is not None and s.message.startswith(message.format(name=name)), s.message
    details = backend.describe_trainjob(name, "default")
    assert any(e.reason == "Failed" and "retrying cannot help" in e.message for e in details.events)
    assert not any(s.replicated_job == "node" and s.state == "Running" for s in details.steps)


def test_a_command_on_a_known_image_wins_over_its_entrypoint(backend: LocalBackend, tmp_path: Path) -> None:
    rt = init_runtime()
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["command"] = [sys.executable, "-c", "print('own command, storage', __import__('os')"
                                       ".environ['STORAGE_URI'])"]
    src = write(tmp_path / "s", {"b.json": "y"})
    tj = trainjob("own", "init-check", initializer={"dataset": {"storageUri": "gs://not/fetched"},
                                                      "model": {"storageUri": f"file://{src}"}})
    status, name = run(backend, [rt, tj], tmp_path)
    assert condition(status, "Complete"), status
    log = "\n".join(backend.logs(name, "default", step="dataset-initializer", follow=False))
    assert "own command, storage gs://not/fetched" in log


def test_initializers_as_an_unprivileged_user(tmp_path: Path) -> None:
    """Without root: the initializers write the shared volume as the invoking user, from files that user owns."""
    import yaml

    from .test_rootless import USER, as_user, unprivileged_account, user_env, userns_usable

    with unprivileged_account(USER) as pw:
        if problem := userns_usable(pw):
            pytest.skip(f"unprivileged user namespaces are not available here: {problem}")
        job = Path(pw.pw_dir) / "init-job"
        shutil.rmtree(job, ignore_errors=True)
        write(job, {"src/data/train.jsonl": "rows", "model/config.json": "{}"})
        tj = trainjob("rootless-init", "init-check", initializer={
            "dataset": {"storageUri": f"file://{job}/src"}, "model": {"storageUri": f"file://{job}/model"}})
        (job / "job.yaml").write_text(yaml.safe_dump_all([init_runtime(), tj], sort_keys=False))
        for p in (job, *job.rglob("*")):
            os.chown(p, pw.pw_uid, pw.pw_gid)
        env = user_env(pw)
        r = as_user(pw, [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", "job.yaml"], env=env, cwd=str(job))
        assert r.returncode == 0, r.stdout + r.stderr
        assert "found dataset/data/train.jsonl rows" in r.stdout and "found model/config.json {}" in r.stdout
        volume = Path(env["KUBETRAIN_HOME"]) / "volumes" / "default" / "rootless-init" / "initializer"
        copied = volume / "dataset" / "data" / "train.jsonl"
        assert copied.read_text() == "rows" and copied.stat().st_uid == pw.pw_uid
