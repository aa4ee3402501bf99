"""examples/torchtune: the built-in torchtune-llama3.2-1b runtime on a CPU-only machine. As shipped (2 GPUs) it is
refused when submitted, in one message; with the example's overrides its initializers copy a tiny model and
dataset made on the fly, and torchtune's own recipe fine-tunes it to a checkpoint."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "torchtune"

needs_local_backend = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("bwrap") is None,
    reason="needs root and bubblewrap for the local backend (make system-deps)",
)


def kubetrain(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen([sys.executable, "-m", "kubetrain.cli.main", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=EXAMPLE)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()  # SIGTERM: the supervisor stops its pods
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"kubetrain {' '.join(args)} did not finish in {timeout} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def example(data: Path) -> dict[str, Any]:
    """The example TrainJob with its sources moved to ``data`` (the example names a fixed /tmp directory)."""
    tj: dict[str, Any] = yaml.safe_load((EXAMPLE / "trainjob.yaml").read_text())
    for source in tj["spec"]["initializer"].values():
        source["storageUri"] = source["storageUri"].replace("/tmp/kubetrain-torchtune-example", str(data))
    return tj


@needs_local_backend
def test_as_shipped_it_is_refused_at_submit_naming_the_gpus(tmp_path: Path) -> None:
    tj = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": "tune-gpu"},
          "spec": {"runtimeRef": {"name": "torchtune-llama3.2-1b"}, "trainer": {"command": ["tune", "run"]}}}
    f = tmp_path / "tj.yaml"
    f.write_text(yaml.safe_dump(tj))
    env = {**os.environ, "KUBETRAIN_HOME": str(tmp_path / "home"), "KUBETRAIN_GPUS": "0"}
    r = kubetrain(["run", "-f", str(f)], env, timeout=120)
    assert r.returncode == 1
    errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: TrainJob tune-gpu cannot run on this machine, so it was not created (the steps before would run for "
        "nothing): replicated job node (it waits for dataset-initializer, model-initializer) asks for "
        "nvidia.com/gpu: requested 2, this machine has 0. Fix: ask for what this machine has "
        "(spec.trainer.resourcesPerNode sets the trainer's requests and limits; 0 drops one), install what is "
        "missing, or run it on a cluster (--context)"
    ], r.stderr
    assert "Traceback" not in r.stderr
    assert kubetrain(["get", "trainjobs", "-o", "name"], env, timeout=60).stdout == ""


@pytest.mark.slow
@needs_local_backend
@pytest.mark.skipif(shutil.which("tune", path=os.path.dirname(sys.executable)) is None
                    or importlib.util.find_spec("safetensors") is None,
                    reason="needs torchtune in this environment (pip install '.[torchtune]')")
def test_example_fine_tunes_a_tiny_llama_on_the_cpu(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    data = tmp_path / "data"
    subprocess.run([sys.executable, str(EXAMPLE / "make_tiny_llama.py"), str(data)], check=True, timeout=300)
    f = tmp_path / "trainjob.yaml"
    f.write_text(yaml.safe_dump(example(data), sort_keys=False))
    home = tmp_path / "home"
    env = {**os.environ, "KUBETRAIN_HOME": str(home), "KUBETRAIN_GPUS": "0", "HF_HOME": str(tmp_path / "hf")}
    r = kubetrain(["run", "-f", str(f)], env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "initializer=model done files=3" in r.stdout and "initializer=dataset done files=1" in r.stdout
    assert "Running FullFinetuneRecipeSingleDevice" in r.stdout  # the recipe kubetrain chose for one CPU device
    per_step = dict(re.findall(r"\d+\|(\d+)\|Loss: ([0-9.]+)", r.stdout))  # torchtune's bar: epoch|step|Loss
    losses = [float(per_step[step]) for step in sorted(per_step, key=int)]
    assert len(losses) == 8 and losses[-1] < losses[0], r.stdout
    assert "trainjob default/torchtune-tiny: Complete" in r.stderr

    before = load_file(str(data / "Llama-3.2-1B-Instruct" / "model.safetensors"))
    volume = home / "volumes" / "default" / "torchtune-tiny" / "initializer"
    after = load_file(str(volume / "output" / "epoch_0" / "model-00001-of-00001.safetensors"))
    assert set(after) == set(before)  # saved back in the Hub's layout, as it was read
    assert not (after["model.embed_tokens.weight"] == before["model.embed_tokens.weight"]).all()
