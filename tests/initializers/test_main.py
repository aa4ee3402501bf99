"""The initializer program as a pod runs it (``python -m kubetrain.initializers``), against a local hub that
speaks the Hugging Face API (so the real ``huggingface_hub`` code path runs) and local files."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.initializers import EXIT_FAILED, EXIT_PERMANENT, EXIT_USAGE

from .fakehub import Hub, serve

pytest.importorskip("huggingface_hub", reason="hf:// needs huggingface_hub (.[initializers])")

TOKEN = "hf_test_token_0123456789"
MODEL = "meta-llama/Llama-3.2-1B-Instruct"
DATASET = "tatsu-lab/alpaca"
GGUF = "acme/Llama-3.2-1B-Instruct-GGUF"


def write(root: Path, rel: str, data: bytes) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[Hub, str]]:
    root = tmp_path / "hub"
    model = root / "models" / MODEL
    for rel, data in {
        "config.json": b'{"hidden_size": 16}',
        "model.safetensors": os.urandom(4096),
        "original/tokenizer.model": b"tokens",
        "original/consolidated.00.pth": b"pickled weights upstream never fetches",
        "flax_model.msgpack": b"flax",
        "README.md": b"# model card",
    }.items():
        write(model, rel, data)
    dataset = root / "datasets" / DATASET
    write(dataset, "README.md", b"# alpaca")
    write(dataset, "data/train-00000-of-00001.parquet", os.urandom(2048))
    write(root / "models" / "acme/private-model", "config.json", b"{}")
    write(root / "models" / GGUF, "llama-3.2-1b-instruct-q4_k_m.gguf", b"GGUF" + os.urandom(1024))
    write(root / "models" / GGUF, "README.md", b"# quantized")
    h = Hub(root, token=TOKEN, gated=("acme/private-model",))
    server = serve(h)
    yield h, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run_init(step: str, env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    base.update({"HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
    return subprocess.run(
        [sys.executable, "-m", "kubetrain.initializers", step],
        env={**base, **env}, capture_output=True, text=True, timeout=300, check=False,
    )


def files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and ".cache" not in p.parts}


def last_line(proc: subprocess.CompletedProcess[str]) -> str:
    return proc.stdout.strip().splitlines()[-1]


def test_model_from_the_hub_lands_where_upstream_puts_it_with_upstreams_file_filter(
    hub: tuple[Hub, str], tmp_path: Path
) -> None:
    h, url = hub
    out = tmp_path / "workspace" / "model"
    proc = run_init("model", {"STORAGE_URI": f"hf://{MODEL}", "HF_ENDPOINT": url, "OUTPUT_PATH": str(out)}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # Only the formats upstream's model initializer asks for: no pickles, no flax, no model card.
    assert files(out) == {"config.json", "model.safetensors", "original/tokenizer.model"}
    src = h.root / "models" / MODEL
    assert (out / "model.safetensors").read_bytes() == (src / "model.safetensors").read_bytes()
    assert any(p.endswith(f"/api/models/{MODEL}/revision/main") for _, p, _ in h.requests)
    assert "done repo=meta-llama/Llama-3.2-1B-Instruct" in proc.stdout


def test_a_gguf_only_model_repository_is_fetched(hub: tuple[Hub, str], tmp_path: Path) -> None:
    """Quantized repositories hold only ``*.gguf`` weights; upstream's model initializer fetches them since
    kubeflow/trainer#3910 (3028835b1), where before it downloaded none of the weights."""
    h, url = hub
    out = tmp_path / "gguf"
    proc = run_init("model", {"STORAGE_URI": f"hf://{GGUF}", "HF_ENDPOINT": url, "OUTPUT_PATH": str(out)}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert files(out) == {"llama-3.2-1b-instruct-q4_k_m.gguf"}
    name = "llama-3.2-1b-instruct-q4_k_m.gguf"
    assert (out / name).read_bytes() == (h.root / "models" / GGUF / name).read_bytes()


def test_dataset_uri_fetches_the_whole_repository_and_honours_ignore_patterns(
    hub: tuple[Hub, str], tmp_path: Path
) -> None:
    _, url = hub
    out = tmp_path / "ds"
    env = {"STORAGE_URI": f"hf://{DATASET}/data/train-00000-of-00001.parquet", "HF_ENDPOINT": url,
           "OUTPUT_PATH": str(out)}
    proc = run_init("dataset", env, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert files(out) == {"README.md", "data/train-00000-of-00001.parquet"}

    out2 = tmp_path / "ds2"
    proc = run_init("dataset", {**env, "OUTPUT_PATH": str(out2), "IGNORE_PATTERNS": " README.md , *.json"}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert files(out2) == {"data/train-00000-of-00001.parquet"}


def test_gated_repository_needs_access_token(hub: tuple[Hub, str], tmp_path: Path) -> None:
    h, url = hub
    env = {"STORAGE_URI": "hf://acme/private-model", "HF_ENDPOINT": url, "OUTPUT_PATH": str(tmp_path / "m")}

    proc = run_init("model", env, tmp_path)
    assert proc.returncode == EXIT_PERMANENT
    assert last_line(proc).startswith(
        f"error: model acme/private-model on {url} is gated, and no ACCESS_TOKEN was given")
    assert "spec.initializer.model.secretRef" in last_line(proc)

    proc = run_init("model", {**env, "ACCESS_TOKEN": "hf_wrong"}, tmp_path)
    assert proc.returncode == EXIT_PERMANENT
    assert "the hub refused the credentials (HTTP 401" in last_line(proc)

    proc = run_init("model", {**env, "ACCESS_TOKEN": TOKEN}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert files(tmp_path / "m") == {"config.json"}
    assert (h.requests[-1][2] or "") == f"Bearer {TOKEN}"
    assert not (tmp_path / "hf-home" / "token").exists()  # the token is used, never stored


def test_missing_repository_is_permanent_and_says_what_to_check(hub: tuple[Hub, str], tmp_path: Path) -> None:
    _, url = hub
    proc = run_init("model", {"STORAGE_URI": "hf://nobody/nothing", "HF_ENDPOINT": url,
                              "OUTPUT_PATH": str(tmp_path / "m")}, tmp_path)
    assert proc.returncode == EXIT_PERMANENT
    assert last_line(proc) == (
        f"error: model nobody/nothing on {url} was not found without an ACCESS_TOKEN (it does not exist, or it is "
        "private) (fix: check the name in STORAGE_URI; for a private repository put the token in a Secret under "
        "the key ACCESS_TOKEN and name it in spec.initializer.model.secretRef (or set ACCESS_TOKEN in "
        "spec.initializer.model.env))"
    )
    assert "Traceback" not in proc.stdout + proc.stderr


def test_unreachable_hub_is_worth_a_retry(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = run_init("dataset", {"STORAGE_URI": f"hf://{DATASET}", "HF_ENDPOINT": f"http://127.0.0.1:{port}",
                                "OUTPUT_PATH": str(tmp_path / "d")}, tmp_path)
    assert proc.returncode == EXIT_FAILED
    assert last_line(proc).startswith(f"error: could not reach http://127.0.0.1:{port} for {DATASET}:")


def test_local_directory_and_file(tmp_path: Path) -> None:
    src = tmp_path / "src"
    write(src, "data/train.parquet", b"rows")
    write(src, "model.safetensors", b"w")
    write(src, "extra/pytorch_model.bin", b"pickle")
    (src / "link.json").symlink_to(src / "data" / "train.parquet")

    out = tmp_path / "m"
    proc = run_init("model", {"STORAGE_URI": f"file://{src}", "OUTPUT_PATH": str(out)}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # The model default leaves out the formats upstream's model initializers leave out.
    assert files(out) == {"data/train.parquet", "model.safetensors", "link.json"}
    assert (out / "link.json").read_bytes() == b"rows" and not (out / "link.json").is_symlink()
    assert "done files=3 bytes=9" in proc.stdout

    out = tmp_path / "d"
    proc = run_init("dataset", {"STORAGE_URI": f"file://{src}/data/train.parquet", "OUTPUT_PATH": str(out)}, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert files(out) == {"train.parquet"}


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("", "error: STORAGE_URI is not set: the initializer does not know what to fetch (fix: set "
             "spec.initializer.dataset.storageUri in the TrainJob"),
        ("file://data/x", "error: STORAGE_URI 'file://data/x': a file:// URI names an absolute path, with three "
                          "slashes (fix: write file:///data/x)"),
        ("file:///no/such/dir", "error: STORAGE_URI file:///no/such/dir: /no/such/dir does not exist"),
        # Upstream #3826 (86ddfaf4f): the error names the scheme and the ones that work; here also where the value
        # comes from, and for a URI without a scheme what it would be with one.
        ("gs://bucket/x", "error: STORAGE_URI 'gs://bucket/x': unsupported scheme gs://; kubetrain's initializer "
                          "fetches hf:// and file:// (fix: set spec.initializer.dataset.storageUri (or STORAGE_URI "
                          "of the dataset-initializer container) to hf://<owner>/<name> or file:///<absolute path>)"),
        ("tatsu-lab/alpaca", "error: STORAGE_URI 'tatsu-lab/alpaca' has no scheme, so no provider can fetch it; "
                             "kubetrain's initializer fetches hf:// and file:// (fix: set "
                             "spec.initializer.dataset.storageUri (or STORAGE_URI of the dataset-initializer "
                             "container) to hf://tatsu-lab/alpaca, or to hf://<owner>/<name> or file:///<absolute "
                             "path>)"),
        ("/data/alpaca", "error: STORAGE_URI '/data/alpaca' has no scheme, so no provider can fetch it; kubetrain's "
                         "initializer fetches hf:// and file:// (fix: set spec.initializer.dataset.storageUri (or "
                         "STORAGE_URI of the dataset-initializer container) to file:///data/alpaca, or to "
                         "hf://<owner>/<name> or file:///<absolute path>)"),
        ("   ", "error: STORAGE_URI is not set: the initializer does not know what to fetch (fix: set "
                "spec.initializer.dataset.storageUri in the TrainJob"),
        ("s3://bucket/x", "error: STORAGE_URI 's3://bucket/x': s3:// is served by upstream's initializer images"),
        ("hf://bad repo/x y", "error: STORAGE_URI 'hf://bad repo/x y': 'bad repo/x y' is not a valid repository id"),
    ],
)
def test_bad_storage_uri_is_one_line_and_permanent(uri: str, message: str, tmp_path: Path) -> None:
    proc = run_init("dataset", {"STORAGE_URI": uri, "OUTPUT_PATH": str(tmp_path / "d")}, tmp_path)
    assert proc.returncode == EXIT_PERMANENT, proc.stdout + proc.stderr
    assert last_line(proc).startswith(message)
    assert "Traceback" not in proc.stdout + proc.stderr
    # Nothing was fetched, nor anything created where it would have gone.
    assert not (tmp_path / "d").exists()


def test_usage() -> None:
    proc = subprocess.run([sys.executable, "-m", "kubetrain.initializers", "weights"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == EXIT_USAGE
    assert proc.stderr.startswith("error: expected one argument, dataset or model; got weights")
    helped = subprocess.run([sys.executable, "-m", "kubetrain.initializers", "--help"], capture_output=True,
                            text=True, check=True)
    assert "example:\n  STORAGE_URI=hf://tatsu-lab/alpaca" in helped.stdout
