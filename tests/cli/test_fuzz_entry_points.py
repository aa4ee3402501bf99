"""Every CLI path a manifest can take, fuzzed: ``validate`` (with the Pod Security lint at every level, text and
JSON), ``render``, ``apply`` and ``run`` up to the point of submitting.

The property, per example: the command exits 0 or 1 without an exception, whatever it prints carries no Python
or pydantic internals (``tests.fuzzing.assert_clear``), and what it reports agrees with what it did (JSON that
parses, YAML objects when render succeeds, a recorded TrainJob when ``run`` says it was created).

``apply`` and ``run`` work in a fresh ``KUBETRAIN_HOME`` per example, with the supervisor's start replaced by a
no-op: everything up to it (loading, validation, the local admission checks, compilation, the store) is real;
no pod is started. ``run`` takes ``--detach`` for the same reason: without it the command goes on to supervise.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import yaml
from click.testing import CliRunner, Result
from hypothesis import given
from hypothesis import strategies as st

from kubetrain.api import constants as c
from kubetrain.api.podsecurity import LEVELS
from kubetrain.cli.main import cli
from kubetrain.compiler.optimization import LABEL_OPTIMIZATIONJOB
from kubetrain.local import optimizationjobs
from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store
from tests.fuzzing import assert_clear, count, fuzz_settings, manifest_files, reached

namespaces = st.sampled_from([None, "default", "team-a"])


def _file(text: str) -> str:
    handle, path = tempfile.mkstemp(suffix=".yaml", prefix="fuzz-")
    with os.fdopen(handle, "w", encoding="utf-8") as f:
        f.write(text)
    return path


def _invoke(args: list[str], text: str) -> Result:
    path = _file(text)
    try:
        return CliRunner().invoke(cli, [*args, "-f", path])
    finally:
        os.unlink(path)


def _exited_cleanly(result: Result, text: str) -> None:
    """Exit 0 or 1 through ``sys.exit``, never an exception, and nothing raw on the way."""
    exc = result.exception
    if exc is not None and not isinstance(exc, SystemExit):
        raise AssertionError(f"{type(exc).__name__}: {exc}\n--- input:\n{text}") from exc
    assert result.exit_code in (0, 1), f"exit {result.exit_code}\n{result.output}\n--- input:\n{text}"
    assert_clear(result.output, text)


def _ns(namespace: str | None) -> list[str]:
    return ["-n", namespace] if namespace else []


@fuzz_settings(200)
@given(manifest_files(), st.sampled_from(LEVELS), st.booleans(), namespaces)
def test_validate_with_the_pod_security_lint(text: str, level: str, as_json: bool, namespace: str | None) -> None:
    count("cli validate")
    args = ["validate", "--pod-security", level, *_ns(namespace), *(["-o", "json"] if as_json else [])]
    result = _invoke(args, text)
    _exited_cleanly(result, text)
    if result.exit_code == 0:
        reached("validate: valid")
    if as_json:
        report = json.loads(result.stdout)
        if any(entry["level"] for entry in report["podSecurity"]):
            reached("validate: pods rated")
        assert report["valid"] == (result.exit_code == 0) == (not report["errors"])
        for entry in report["podSecurity"]:
            assert (entry["level"] is None) == ("error" in entry), entry
    else:
        assert "object(s) " in result.output


def _managed_elsewhere(text: str) -> set[str]:
    """Names of the TrainJobs in ``text`` that another controller manages (render gives them no objects)."""
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return set()
    names = set()
    for d in docs:
        spec = d.get("spec") if isinstance(d, dict) else None
        if isinstance(spec, dict) and spec.get("managedBy") not in (None, "", c.MANAGED_BY_DEFAULT):
            names.add(str((d.get("metadata") or {}).get("name")))
    return names


@fuzz_settings(80)
@given(manifest_files(), st.sampled_from(["yaml", "json"]), namespaces)
def test_render(text: str, output: str, namespace: str | None) -> None:
    count("cli render")
    result = _invoke(["render", "--fixed-keys", "-o", output, *_ns(namespace)], text)
    _exited_cleanly(result, text)
    if result.exit_code != 0:
        return
    reached("render: rendered")
    objects: list[Any] = (
        list(yaml.safe_load_all(result.stdout)) if output == "yaml" else [json.loads(result.stdout)]
    )
    assert all(isinstance(o, dict) and o.get("kind") for o in objects), result.stdout
    rendered = {o["metadata"]["name"] for o in objects if o.get("kind") == "JobSet"}
    skipped = _managed_elsewhere(text)
    assert not rendered & skipped, f"rendered a TrainJob another controller manages:\n{text}"
    if skipped & {str(n) for n in _trainjob_names(text)}:
        assert "not rendered: the TrainJob is managed by" in result.stderr


def _trainjob_names(text: str) -> list[Any]:
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return []
    return [(d.get("metadata") or {}).get("name") for d in docs
            if isinstance(d, dict) and d.get("kind") == c.KIND_TRAINJOB and isinstance(d.get("metadata"), dict)]


@contextmanager
def _fresh_home() -> Iterator[Path]:
    """A new ``KUBETRAIN_HOME`` for one example; no supervisor or search controller is started
    (``_spawn_supervisor`` and ``spawn_controller`` are the only steps left out of submitting)."""
    with tempfile.TemporaryDirectory(prefix="fuzz-home-") as home:
        old = os.environ.get("KUBETRAIN_HOME")
        os.environ["KUBETRAIN_HOME"] = home
        try:
            with (
                mock.patch.object(LocalBackend, "_spawn_supervisor", lambda *_: None),
                mock.patch.object(optimizationjobs, "spawn_controller", lambda *_: None),
            ):
                yield Path(home)
        finally:
            Store.close_all()
            if old is None:
                os.environ.pop("KUBETRAIN_HOME", None)
            else:
                os.environ["KUBETRAIN_HOME"] = old


def _recorded() -> list[tuple[str, str, str | None]]:
    """The TrainJobs in the store: namespace, name and, for an OptimizationJob's trial, its OptimizationJob."""
    store = Store()
    try:
        return [
            (row.namespace, row.name, ((row.trainjob.get("metadata") or {}).get("labels") or {}).get(
                LABEL_OPTIMIZATIONJOB))
            for row in store.list_trainjobs(None)
        ]  # fmt: skip
    finally:
        store.close()


@fuzz_settings(60)
@given(manifest_files(), namespaces)
def test_apply(text: str, namespace: str | None) -> None:
    count("cli apply")
    with _fresh_home():
        result = _invoke(["apply", *_ns(namespace)], text)
        _exited_cleanly(result, text)
        recorded = _recorded()
    created = [line for line in result.output.splitlines() if line.startswith("trainjob.trainer.kubeflow.org/")]
    submitted = _without_trials(recorded, result.output)
    assert len(submitted) == len(created), f"{recorded} vs {created}\n{result.output}"
    if submitted:
        reached("apply: TrainJob submitted")
    if len(submitted) < len(recorded):
        reached("apply: trials of an OptimizationJob submitted")


def _without_trials(recorded: list[tuple[str, str, str | None]], output: str) -> list[tuple[str, str, str | None]]:
    """The recorded TrainJobs that are not trials. The submitting process makes a search's first trials itself;
    each must belong to a search it reported."""
    searches = {line.split("/", 1)[1].split()[0] for line in output.splitlines()
                if line.startswith("optimizationjob.trainer.kubeflow.org/")}  # fmt: skip
    assert {r[2] for r in recorded if r[2] is not None} <= searches, f"{recorded} vs {searches}\n{output}"
    return [r for r in recorded if r[2] is None]


@fuzz_settings(60)
@given(manifest_files(), namespaces)
def test_run_up_to_submitting(text: str, namespace: str | None) -> None:
    count("cli run")
    with _fresh_home():
        result = _invoke(["run", "--detach", *_ns(namespace)], text)
        _exited_cleanly(result, text)
        recorded = _without_trials(_recorded(), result.output)
    if result.exit_code == 0:
        reached("run: TrainJob submitted")
        assert len(recorded) == 1, result.output
        assert f"trainjob.trainer.kubeflow.org/{recorded[0][1]} created" in result.output, result.output
    else:
        assert "error" in result.output
