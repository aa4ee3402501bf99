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


def errors_of(runtime: str, **trainer: object) -> list[tuple[str, str]]:
    shipped = runtime.startswith(("torchtune-llama3.2", "torchtune-qwen2.5"))
    rt = builtin_runtime(runtime) if shipped else tune_runtime(runtime, IMMUTABLE).build()
    assert rt is not None
    tj = TrainJobBuilder(runtime=runtime).trainer(command=["tune", "run"], **trainer).build()
    return [(e.path, e.message) for e in validate_trainjob(tj, rt).errors]


@pytest.mark.parametrize("runtime", ["torchtune-llama3.2-1b", "torchtune-llama3.2-3b", "torchtune-qwen2.5-1.5b"])
def test_the_shipped_runtimes_take_one_node_only(runtime: str) -> None:
    model = model_of(runtime)
    assert errors_of(runtime, numNodes=2) == [("spec.trainer.numNodes", f"must be 1 for {model} model")]
    assert errors_of(runtime, numNodes=1) == []


def test_numnodes_is_the_trainjobs_not_the_runtimes() -> None:
    # Upstream reads spec.trainer.numNodes (default 1), never the runtime's mlPolicy.numNodes.
    rt = RuntimeBuilder(name="torchtune-llama3.2-1b").ml(numNodes=2, torch={}).trainer(
        command=["tune", "run", *IMMUTABLE]).build()
    tj = TrainJobBuilder(runtime="torchtune-llama3.2-1b").trainer(command=["tune", "run"]).build()
    assert validate_trainjob(tj, rt).errors == []


QLORA = ["model.lora_attn_modules=[q_proj,v_proj]", "model.quantize_base=True"]


def test_qlora_on_llama_3_2_needs_one_device() -> None:
    # numProcPerNode unset is `auto`, as upstream reads it, and the runtime asks for 2 GPUs: a distributed QLoRA
    # config, which upstream refuses for these models.
    assert errors_of("torchtune-llama3.2-1b", args=QLORA) == [
        ("spec.trainer.numProcPerNode", "must be auto or 1 for llama3_2/1B model when using QLoRA"),
        ("spec.trainer.resourcesPerNode", "must have gpu resource with value 1 for llama3_2/1B model when using QLoRA"),
    ]
    # One GPU: the single-device QLoRA config, allowed.
    assert errors_of("torchtune-llama3.2-1b", args=QLORA, resourcesPerNode={"limits": {"nvidia.com/gpu": 1}}) == []
    # model.use_dora=true turns QLoRA off (it becomes DoRA over LoRA).
    assert errors_of("torchtune-llama3.2-3b", args=[*QLORA, "model.use_dora=True"]) == []


def test_lora_is_single_node_even_for_the_multinode_model() -> None:
    assert errors_of("torchtune-llama3.3-70b", numNodes=4, args=["model.lora_attn_modules=[q_proj]"]) == [
        ("spec.trainer.numNodes", "LoRA fine-tuning is not supported for multi-node training in TorchTune")]
    assert errors_of("torchtune-llama3.3-70b", numNodes=4) == []


def test_unsupported_model_still_reports_every_other_finding() -> None:
    assert errors_of("torchtune-gpt-9", numNodes=3, args=["tokenizer.path=/x"]) == [
        ("spec.runtimeRef.name", "must have a supported pretrained model, invalid model configured: gpt/9"),
        ("spec.trainer.numNodes", "must be 1 for gpt/9 model"),
        ("spec.trainer.args[0]",
         'must not set immutable config "tokenizer.path" in trainer args; it is managed by the runtime'),
    ]


def test_runtime_command_on_several_nodes_is_warned_not_refused() -> None:
    """Without [tune, run] upstream runs the runtime's command as is and checks nothing; on two nodes its
    `--rdzv_endpoint=localhost` never joins them, which kubetrain says (as a warning, upstream accepts it)."""
    rt = builtin_runtime("torchtune-llama3.2-1b")
    assert rt is not None
    result = validate_trainjob(TrainJobBuilder(runtime="torchtune-llama3.2-1b").trainer(numNodes=2).build(), rt)
    assert result.errors == []
    assert [(w.path, w.message) for w in result.warnings] == [(
        "spec.trainer.numNodes",
        "2 nodes each run the runtime's own `tune run --rdzv_endpoint=localhost:...`, so they never meet; the "
        "torchtune checks (upstream allows only 1 node for llama3_2/1B) apply only to a TrainJob whose command is "
        "[tune, run]",
    )]
    one = validate_trainjob(TrainJobBuilder(runtime="torchtune-llama3.2-1b").trainer(numNodes=1).build(), rt)
    assert one.warnings == [] and one.errors == []
    other = TrainJobBuilder(runtime="torchtune-llama3.2-1b").trainer(numNodes=2, command=["torchrun", "t.py"])
    assert validate_trainjob(other.build(), rt).warnings == []


def test_shipped_qwen_runtime_keeps_its_merges_file_and_refuses_qlora() -> None:
    """Qwen's tokenizer is a vocabulary plus a merges file: both stay in the command upstream builds."""
    rt = builtin_runtime("torchtune-qwen2.5-1.5b")
    assert rt is not None
    tj = TrainJobBuilder(runtime=rt.name).trainer(command=["tune", "run"], numNodes=1, numProcPerNode=1)
    assert container(jobset(tj.build(), rt), "node")["command"] == [
        "tune", "run", "full_finetune_single_device", "--config", "qwen2_5/1.5B_full_single_device",
        "output_dir=/workspace/output", "tokenizer.path=/workspace/model/vocab.json",
        "tokenizer.merges_file=/workspace/model/merges.txt", "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert errors_of(rt.name, args=["model.quantize_base=True"]) == [
        ("spec.runtimeRef.name", "QLoRA is not supported for qwen2_5/1.5B model")]
    assert errors_of(rt.name, args=["tokenizer.merges_file=/x"]) == [(
        "spec.trainer.args[0]",
        'must not set immutable config "tokenizer.merges_file" in trainer args; it is managed by the runtime')]
