"""TorchTune built-in trainer: recipe/config selection and the checks upstream applies to ``tune run``."""

from __future__ import annotations

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler.info import Info

ENTRYPOINT = ["tune", "run"]
IMMUTABLE_KEYS = ("output_dir", "tokenizer.path", "checkpointer.checkpoint_dir", "tokenizer.merges_file")
SUPPORTED_MODELS = ("llama3_2/1B", "llama3_2/3B", "llama3_3/70B", "qwen2_5/1.5B")
MULTINODE_MODEL = "llama3_3/70B"
QWEN = "qwen2_5/1.5B"


def is_torchtune(trainjob: TrainJob) -> bool:
    t = trainjob.spec.trainer
    return t is not None and t.command == ENTRYPOINT


def model_of(runtime_name: str) -> str:
    """``torchtune-llama3.2-1b`` -> ``llama3_2/1B``; anything not of three parts -> ``""``."""
    parts = runtime_name.split("-")
    if len(parts) != 3:
        return ""
    return f"{parts[1].replace('.', '_')}/{parts[2].upper()}"


def _args(trainjob: TrainJob) -> list[str]:
    t = trainjob.spec.trainer
    return list((t.args if t else None) or [])


def _flag(args: list[str], key: str) -> bool:
    for a in args:
        k, _, v = a.partition("=")
        if key in k and v.lower() == "true":
            return True
    return False


def is_lora(args: list[str]) -> bool:
    return any("model.lora_attn_modules" in a for a in args)


def is_qlora(args: list[str]) -> bool:
    return _flag(args, "model.quantize_base") and not _flag(args, "model.use_dora")


def recipe_and_config(model: str, num_nodes: int, nproc: str, gpus: int, args: list[str]) -> tuple[str, str]:
    lora, qlora = is_lora(args), is_qlora(args)
    single = num_nodes == 1 and (nproc == "1" or gpus == 1)
    if single:
        if qlora:
            return "lora_finetune_single_device", f"{model}_qlora_single_device"
        if lora:
            return "lora_finetune_single_device", f"{model}_lora_single_device"
        return "full_finetune_single_device", f"{model}_full_single_device"
    if num_nodes == 1 and qlora:
        return "lora_finetune_distributed", f"{model}_qlora"
    if num_nodes == 1 and lora:
        return "lora_finetune_distributed", f"{model}_lora"
    if num_nodes > 1:
        return "full_finetune_distributed", f"{model}_full_multinode"
    return "full_finetune_distributed", f"{model}_full"


def mutate_command(info: Info, nproc: str) -> None:
    trainer_ps = info.trainer()
    node = trainer_ps.container(c.NODE) if trainer_ps else None
    if trainer_ps is None or node is None:
        return
    num_nodes = trainer_ps.count
    gpus = info.gpu_count()
    command = list(ENTRYPOINT)
    multi_proc = (nproc.isdigit() and int(nproc) > 1) or (nproc == "auto" and gpus > 1)
    if num_nodes > 1 or multi_proc:
        command.append(f"--rdzv_endpoint={info.master_host()}:{c.DEFAULT_PORT}")
    model = model_of(info.trainjob.spec.runtime_ref.name)
    recipe, config = recipe_and_config(model, num_nodes, nproc, gpus, _args(info.trainjob))
    command += [recipe, "--config", config]
    command += [x for x in node.get("command") or [] if x.partition("=")[0] in IMMUTABLE_KEYS]
    # Upstream rewrites the in-memory TrainJob command; we keep the TrainJob untouched and tell the builder.
    info.trainer_command = command


def runs_runtime_tune(info: Info) -> bool:
    """The TrainJob sets no command and the runtime's trainer runs ``tune run ...`` as it stands."""
    t = info.trainjob.spec.trainer
    if t is not None and t.command is not None:
        return False
    trainer_ps = info.trainer()
    node = trainer_ps.container(c.NODE) if trainer_ps else None
    return node is not None and list(node.get("command") or [])[:2] == ENTRYPOINT


def warn_runtime_command(info: Info) -> Result:
    """Upstream checks torchtune TrainJobs only when their command is ``[tune, run]``. Without it the runtime's own
    command runs unchanged on every node, and a shipped torchtune runtime's rendezvous is ``localhost``: with more
    than one node the nodes never meet. Upstream accepts that TrainJob, so this is a warning, not an error."""
    result = Result()
    trainer_ps = info.trainer()
    if trainer_ps is None or trainer_ps.count <= 1 or not runs_runtime_tune(info):
        return result
    node = trainer_ps.container(c.NODE) or {}
    if not any(str(a).startswith("--rdzv_endpoint=localhost") for a in node.get("command") or []):
        return result
    model = model_of(info.trainjob.spec.runtime_ref.name)
    single_node = model in SUPPORTED_MODELS and model != MULTINODE_MODEL
    rule = f" (upstream allows only 1 node for {model})" if single_node else ""
    result.warn(
        "spec.trainer.numNodes",
        f"{trainer_ps.count} nodes each run the runtime's own `tune run --rdzv_endpoint=localhost:...`, so they "
        f"never meet; the torchtune checks{rule} apply only to a TrainJob whose command is [tune, run]",
        "set spec.trainer.command: [tune, run] (the recipe and config are then chosen for the node count), or "
        "numNodes: 1",
    )
    return result


def validate(info: Info) -> Result:
    """Upstream's checks of a ``tune run`` TrainJob. Like upstream they read the TrainJob as written: its
    ``numNodes`` (default 1, whatever the runtime says), its ``numProcPerNode`` (default ``auto``) and its
    ``resourcesPerNode`` (else the runtime's), not the values the compiler resolves."""
    result = Result()
    model = model_of(info.trainjob.spec.runtime_ref.name)
    t = info.trainjob.spec.trainer
    args = _args(info.trainjob)
    if model not in SUPPORTED_MODELS:
        result.error(
            "spec.runtimeRef.name",
            f"must have a supported pretrained model, invalid model configured: {model}",
            f"use a torchtune runtime for one of {', '.join(SUPPORTED_MODELS)}",
        )
    num_nodes = t.num_nodes if t is not None and t.num_nodes is not None else 1
    if num_nodes > 1 and model != MULTINODE_MODEL:
        result.error("spec.trainer.numNodes", f"must be 1 for {model} model", "set numNodes: 1")
    nproc = str(t.num_proc_per_node) if t is not None and t.num_proc_per_node is not None else "auto"
    _, config = recipe_and_config(model, num_nodes, nproc, info.gpu_count(), args)
    if "_qlora" in config and model == QWEN:
        result.error("spec.runtimeRef.name", f"QLoRA is not supported for {QWEN} model", "drop model.quantize_base")
    if "_qlora" in config and "_qlora_single_device" not in config and model in ("llama3_2/1B", "llama3_2/3B"):
        result.error(
            "spec.trainer.numProcPerNode",
            f"must be auto or 1 for {model} model when using QLoRA",
            "set numProcPerNode: 1",
        )
        result.error(
            "spec.trainer.resourcesPerNode",
            f"must have gpu resource with value 1 for {model} model when using QLoRA",
            "request exactly one GPU per node",
        )
    if num_nodes > 1 and (is_lora(args) or is_qlora(args)):
        result.error(
            "spec.trainer.numNodes",
            "LoRA fine-tuning is not supported for multi-node training in TorchTune",
            "use numNodes: 1 for LoRA/QLoRA",
        )
    for i, a in enumerate(args):
        key = a.partition("=")[0]
        if key in IMMUTABLE_KEYS:
            result.error(
                f"spec.trainer.args[{i}]",
                f'must not set immutable config "{key}" in trainer args; it is managed by the runtime',
                f"remove {key}=… from args",
            )
    return result
