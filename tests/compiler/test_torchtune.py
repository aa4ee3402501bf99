"""TorchTune: recipe/config selection and validations (§9.1 cases 8-10)."""

from __future__ import annotations

import pytest

from kubetrain.compiler import validate_trainjob
from kubetrain.compiler.plugins.torchtune import model_of
from kubetrain.runtimes import builtin_runtime
from tests.builders import RuntimeBuilder, TrainJobBuilder, container, env, jobset

IMMUTABLE = [
    "output_dir=/workspace/model/llama3_3/70B",
    "tokenizer.path=/workspace/model/original/tokenizer.model",
    "checkpointer.checkpoint_dir=/workspace/model",
]


def tune_runtime(name: str, command_tail: list[str]) -> RuntimeBuilder:
    cmd = ["tune", "run", "--rdzv_endpoint=localhost:29500", "full_finetune_distributed", "--config", "x",
           "dataset=torchtune.datasets.instruct_dataset", *command_tail]
    return RuntimeBuilder(name=name).ml(numNodes=1, torch={}).trainer(command=cmd)


def test_70b_multinode_command() -> None:
    rt = tune_runtime("torchtune-llama3.3-70b", IMMUTABLE).build()
    tj = TrainJobBuilder(runtime="torchtune-llama3.3-70b").trainer(
        command=["tune", "run"], args=["dtype=fp16", "batch_size=32", "epochs=10", "loss=x"], numNodes=30
    )
    node = container(jobset(tj.build(), rt), "node")
    assert node["command"] == [
        "tune", "run", "--rdzv_endpoint=test-job-node-0-0.test-job:29500", "full_finetune_distributed",
        "--config", "llama3_3/70B_full_multinode", *IMMUTABLE,
    ]
    assert node["args"] == ["dtype=fp16", "batch_size=32", "epochs=10", "loss=x"]
    assert env(node)["PET_NNODES"] == "30"
    assert "PET_MASTER_ADDR" not in env(node) and "PET_MASTER_PORT" not in env(node)


def test_1b_lora_with_two_gpus() -> None:
    rt = builtin_runtime("torchtune-llama3.2-1b")
    assert rt is not None
    tj = TrainJobBuilder(runtime="torchtune-llama3.2-1b").trainer(
        command=["tune", "run"], numNodes=1,
        resourcesPerNode={"requests": {"cpu": 1, "example.com/gpu": 2}},
        args=["model.lora_attn_modules=[q_proj,k_proj,v_proj,output_proj]"],
    )
    node = container(jobset(tj.build(), rt), "node")
    assert node["command"] == [
        "tune", "run", "--rdzv_endpoint=test-job-node-0-0.test-job:29500", "lora_finetune_distributed",
        "--config", "llama3_2/1B_lora", "output_dir=/workspace/output",
        "tokenizer.path=/workspace/model/original/tokenizer.model", "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert env(node)["PET_NPROC_PER_NODE"] == "auto"


@pytest.mark.parametrize(
    ("runtime", "trainer", "path", "message"),
    [
        ("torchtune-llama3.2-1b", {"numNodes": 2}, "spec.trainer.numNodes", "must be 1 for llama3_2/1B model"),
        ("torchtune-qwen2.5-1.5b", {"args": ["model.quantize_base=True"]}, "spec.runtimeRef.name",
         "QLoRA is not supported for qwen2_5/1.5B model"),
        ("torchtune-llama3.2-1b", {"args": ["epochs=1", "output_dir=/x"]}, "spec.trainer.args[1]",
         'must not set immutable config "output_dir" in trainer args; it is managed by the runtime'),
        ("torchtune-gpt-9", {}, "spec.runtimeRef.name",
         "must have a supported pretrained model, invalid model configured: gpt/9"),
    ],
)
def test_validation(runtime: str, trainer: dict[str, object], path: str, message: str) -> None:
    rt = tune_runtime(runtime, IMMUTABLE).build()
    tj = TrainJobBuilder(runtime=runtime).trainer(command=["tune", "run"], **trainer).build()
    errors = [(e.path, e.message) for e in validate_trainjob(tj, rt).errors]
    assert (path, message) in errors


@pytest.mark.parametrize(
    ("name", "model"),
    [("torchtune-llama3.2-1b", "llama3_2/1B"), ("torchtune-qwen2.5-1.5b", "qwen2_5/1.5B"), ("a-b", "")],
)
def test_model_of(name: str, model: str) -> None:
    assert model_of(name) == model
