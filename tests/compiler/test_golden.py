"""Golden files: the full compiler output for representative TrainJobs, reviewed by eye when they change.

Regenerate with ``KUBETRAIN_UPDATE_GOLDEN=1 pytest tests/compiler/test_golden.py`` and read the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from kubetrain.api.loader import load_file
from kubetrain.api.runtime import ClusterTrainingRuntime, TrainingRuntime
from kubetrain.api.trainjob import TrainJob
from kubetrain.api.yamlio import dump_all
from kubetrain.compiler import StatusServer, compile_trainjob, fixed_keygen, resolve_runtime, validate_trainjob
from kubetrain.runtimes import builtin_runtimes

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.name.removesuffix(".input.yaml") for p in GOLDEN.glob("*.input.yaml"))


@pytest.mark.parametrize("case", CASES)
def test_golden(case: str) -> None:
    loaded = load_file(GOLDEN / f"{case}.input.yaml")
    assert loaded.result.ok, loaded.result.errors
    runtimes = [o for o in loaded.objects if isinstance(o, TrainingRuntime | ClusterTrainingRuntime)]
    (tj,) = [o for o in loaded.objects if isinstance(o, TrainJob)]
    runtime, result = resolve_runtime(tj, runtimes + builtin_runtimes())
    assert runtime is not None and result.ok
    checked = validate_trainjob(tj, runtime)
    assert checked.ok, checked.errors
    # ``<case>.status.yaml`` turns the status endpoint on (KEP-2779) with the StatusServer fields it holds.
    options = GOLDEN / f"{case}.status.yaml"
    server = StatusServer(**yaml.safe_load(options.read_text())) if options.exists() else None
    text = dump_all(compile_trainjob(tj, runtime, keygen=fixed_keygen(), status_server=server))
    golden = GOLDEN / f"{case}.golden.yaml"
    if os.environ.get("KUBETRAIN_UPDATE_GOLDEN") or not golden.exists():
        golden.write_text(text)
    assert text == golden.read_text(), f"compiler output for {case} changed; regenerate and review the diff"
