"""Make a tiny Llama-3.2-shaped model and an instruction dataset to fine-tune it on, laid out as on the Hugging Face
Hub (what upstream's torchtune runtime expects after its initializers ran):

    <out>/Llama-3.2-1B-Instruct/config.json, model.safetensors, original/tokenizer.model
    <out>/alpaca/data/train-00000-of-00001.parquet

The weights are random and the tokenizer knows only the 256 byte values (plus Llama 3's special tokens), so the
model learns little; what runs is torchtune's real recipe, checkpointer, tokenizer and dataset code, on a CPU.

    python make_tiny_llama.py /tmp/kubetrain-torchtune-example
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import torch
from safetensors.torch import save_file

# Llama 3's tokenizer reserves ids 128000-128255 for special tokens, so the vocabulary keeps its real size.
VOCAB, DIM, LAYERS, HEADS, KV_HEADS, HIDDEN = 128256, 32, 2, 4, 2, 64


def make_model(out: Path) -> None:
    head_dim = DIM // HEADS
    gen = torch.Generator().manual_seed(0)

    def w(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen) * 0.02

    weights = {"model.embed_tokens.weight": w(VOCAB, DIM), "model.norm.weight": torch.ones(DIM)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        weights |= {
            p + "self_attn.q_proj.weight": w(HEADS * head_dim, DIM),
            p + "self_attn.k_proj.weight": w(KV_HEADS * head_dim, DIM),
            p + "self_attn.v_proj.weight": w(KV_HEADS * head_dim, DIM),
            p + "self_attn.o_proj.weight": w(DIM, HEADS * head_dim),
            p + "mlp.gate_proj.weight": w(HIDDEN, DIM),
            p + "mlp.up_proj.weight": w(HIDDEN, DIM),
            p + "mlp.down_proj.weight": w(DIM, HIDDEN),
            p + "input_layernorm.weight": torch.ones(DIM),
            p + "post_attention_layernorm.weight": torch.ones(DIM),
        }
    (out / "original").mkdir(parents=True, exist_ok=True)
    save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": VOCAB, "hidden_size": DIM,
        "num_hidden_layers": LAYERS, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
        "head_dim": head_dim, "intermediate_size": HIDDEN, "tie_word_embeddings": True, "torch_dtype": "float32",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    # A tiktoken BPE file: one base64 token and its rank per line; here just the 256 single bytes.
    ranks = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256))
    (out / "original" / "tokenizer.model").write_text(ranks)


def make_dataset(out: Path) -> None:
    rows = [{"input": f"What is {a} plus {b}?", "output": f"{a + b}"} for a in range(10) for b in range(10)]
    (out / "data").mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), out / "data" / "train-00000-of-00001.parquet")


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kubetrain-torchtune-example")
    make_model(root / "Llama-3.2-1B-Instruct")
    make_dataset(root / "alpaca")
    print(f"tiny model and dataset in {root}")
