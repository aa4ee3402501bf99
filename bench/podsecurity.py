"""Pod Security lint cost: rating a TrainJob's pods, against compiling the same TrainJob in the same run.

The webhook rates every TrainJob it admits (a compile plus one assessment per replicated job), so the lint must
stay a small multiple of the compile it rides on. Target: lint of a 4-node torch TrainJob under 1 ms.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import per_call, write_section

from kubetrain.api.podsecurity import assess
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler import compile_trainjob, fixed_keygen
from kubetrain.compiler.podsecurity import lint_trainjob
from kubetrain.runtimes import builtin_runtime

TARGET_MS = 1.0


def trainjob(runtime: str, nodes: int) -> TrainJob:
    return TrainJob.model_validate({
        "metadata": {"name": "bench", "namespace": "default", "uid": "u"},
        "spec": {"runtimeRef": {"name": runtime}, "trainer": {"numNodes": nodes, "command": ["torchrun", "t.py"]}},
    })


def main() -> str:
    keygen = fixed_keygen()
    rows = []
    four = 0.0
    for label, name, nodes in (
        ("torch, 4 nodes", "torch-distributed", 4),
        ("torch restricted, 4 nodes", "torch-distributed-restricted", 4),
        ("MPI (deepspeed), 8 nodes", "deepspeed-distributed", 8),
        ("torchtune (3 replicated jobs)", "torchtune-llama3.2-1b", 1),
    ):
        rt = builtin_runtime(name)
        assert rt is not None
        tj = trainjob(name, nodes)
        compile_t = per_call(lambda rt=rt, tj=tj: compile_trainjob(tj, rt, keygen=keygen))
        lint_t = per_call(lambda rt=rt, tj=tj: lint_trainjob(tj, rt))
        jobset = next(o for o in compile_trainjob(tj, rt, keygen=keygen) if o["kind"] == "JobSet")
        template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
        assess_t = per_call(lambda template=template: assess(template))
        if label == "torch, 4 nodes":
            four = lint_t
        rows.append(
            f"| {label} | {compile_t * 1e3:.3f} ms | {lint_t * 1e3:.3f} ms | {lint_t / compile_t:.2f}× "
            f"| {assess_t * 1e6:.0f} µs |"
        )
    md = "\n".join([
        "## Pod Security lint (`bench/podsecurity.py`)",
        "",
        "Baseline: compiling the same TrainJob (`compile_trainjob`) in the same run. `lint_trainjob` compiles and",
        "then rates every replicated job's pod template (baseline and restricted checks, latest version).",
        "",
        "| TrainJob | compile | lint (compile + rate) | × compile | rate one pod template |",
        "|---|---:|---:|---:|---:|",
        *rows,
        "",
        f"- Target: lint of a 4-node torch TrainJob < {TARGET_MS:.0f} ms: **{four * 1e3:.3f} ms** "
        f"({'met' if four * 1e3 < TARGET_MS else 'NOT met'}).",
    ])
    write_section("podsecurity", md)
    print(md)
    return md


if __name__ == "__main__":
    main()
