"""Fuzzing every loader path: YAML text, documents of every apiVersion (current and legacy), the one validation
entry point, and compilation of whatever validation accepts.

The property: nothing raises. Bad input ends as findings in the manifest's words; input validation accepts
compiles. Strategies, seeds and profiles: ``tests/fuzzing.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from kubetrain.api import KubetrainError, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.core import CORE_KINDS, validate_core_object
from kubetrain.api.errors import Result
from kubetrain.api.loader import parse_document
from kubetrain.compiler import Subject, compile_trainjob, fixed_keygen, validate_batch
from tests.fuzzing import assert_clear, batches, count, documents, fuzz_settings, texts


def _well_formed(result: Result, context: object) -> None:
    for f in result.errors + result.warnings:
        assert isinstance(f.message, str) and f.message, f
        assert isinstance(f.path, str), f
        assert_clear(f"{f.path}: {f.message} (fix: {f.fix})", context)


@fuzz_settings(40)
@given(documents)
def test_documents_of_every_api_version_load_or_explain(doc: Any) -> None:
    count("documents")
    parsed = parse_document(doc)
    _well_formed(parsed.result, doc)
    if parsed.obj is None:
        assert parsed.result.errors or parsed.result.warnings, doc
    else:
        # Legacy versions are converted, never kept; the core kinds are served as v1 only.
        assert parsed.obj.api_version == ("v1" if parsed.obj.kind in CORE_KINDS else c.API_VERSION)
        if parsed.obj.kind in CORE_KINDS:
            _well_formed(validate_core_object(parsed.obj), doc)  # type: ignore[arg-type]


@fuzz_settings(40)
@given(texts())
def test_yaml_text_loads_or_explains(text: str) -> None:
    from kubetrain.api.loader import load_text

    count("texts")
    loaded = load_text(text, "fuzz.yaml")
    _well_formed(loaded.result, text)
    assert len(loaded.objects) == len(loaded.sources) == len(loaded.lines) == len(loaded.files)


@fuzz_settings(40)
@given(batches())
def test_validation_never_crashes_and_what_it_accepts_compiles(batch: list[Any]) -> None:
    count("batches")
    subjects, rejected = [], []
    for doc in batch:
        parsed = parse_document(doc)
        if parsed.obj is not None:
            subjects.append(Subject(parsed.obj))
        elif parsed.partial is not None:
            subjects.append(Subject(parsed.partial, parsed.pruned))
        if parsed.identity is not None and parsed.obj is None:
            rejected.append(parsed.identity)
    from kubetrain.runtimes import builtin_runtimes

    validated = validate_batch(subjects, installed=builtin_runtimes(), rejected=rejected, local="run")
    for result in validated.results:
        _well_formed(result, batch)
    for subject, result, runtime, usable in zip(
        subjects, validated.results, validated.runtimes, validated.usable, strict=True
    ):
        if not isinstance(subject.obj, TrainJob):
            continue
        # What validation accepts names its runtime, and only that is compiled anywhere.
        assert usable == (runtime is not None), result
        if runtime is None:
            continue
        assert result.ok and not subject.pruned
        try:
            compile_trainjob(subject.obj, runtime, keygen=fixed_keygen())
        except KubetrainError as exc:  # validation said yes: the compiler must agree
            pytest.fail(f"validated TrainJob does not compile: {exc}\n{batch}")
