"""Load manifests and check them with the one validation entry point, against the runtimes the selected backend
has installed. ``validate``, ``render``, ``apply`` and ``run``, the UI's submit form and ``Client.train`` all start
here, so none of them can accept what another rejects.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from kubetrain.api import constants as c
from kubetrain.api.errors import Finding, KubetrainError, Result
from kubetrain.api.loader import Loaded, Manifest
from kubetrain.api.runtime import AnyRuntime
from kubetrain.compiler import Subject, validate_batch
from kubetrain.compiler.validate import Local
from kubetrain.service.backends import cluster_backend, is_cluster, local_backend
from kubetrain.service.sources import Source, load_files, tag


class RuntimeCatalog(Protocol):
    """What checking needs of a backend (``kubetrain.api.views.Backend`` has it)."""

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]: ...


@dataclass
class Checked:
    """The objects that loaded (in file order), where each came from, and every finding of the batch."""

    objects: list[Manifest] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    result: Result = field(default_factory=Result)
    installed: list[AnyRuntime] = field(default_factory=list)  # the backend's runtimes the files do not replace
    documents: int = 0  # objects of the files, including those that failed to load
    results: list[Result] = field(default_factory=list)  # per object: its own findings, untagged
    runtimes: list[AnyRuntime | None] = field(default_factory=list)  # per object: a valid TrainJob's runtime


def check_files(
    files: Iterable[str], *, namespace: str | None, backend: RuntimeCatalog | None, local: Local
) -> Checked:
    """``namespace``: given to namespaced objects that name none. ``backend``: whose installed runtimes
    TrainJobs may reference (None: only the files'). ``local``: see ``kubetrain.compiler.validate.Local``."""
    return check_loaded(load_files(files), namespace=namespace, backend=backend, local=local)


def check_text(
    text: str, source: str, *, namespace: str | None, backend: RuntimeCatalog | None, local: Local
) -> Checked:
    """``check_files`` for YAML that is not in a file (the UI's submit form); findings name ``source:line``."""
    from kubetrain.api.loader import load_text

    return check_loaded(load_text(text, source), namespace=namespace, backend=backend, local=local)


def check_loaded(loaded: Loaded, *, namespace: str | None, backend: RuntimeCatalog | None, local: Local) -> Checked:
    """The one check behind ``check_files`` and ``check_text``."""
    checked = Checked(objects=list(loaded.objects), result=Result().extend(loaded.result),
                      documents=len(loaded.objects) + len(loaded.rejected))
    checked.sources = [Source(loaded.sources[i], loaded.lines[i], loaded.files[i]) for i in range(len(loaded.objects))]
    subjects = [Subject(o) for o in loaded.objects] + [Subject(p.obj, p.pruned) for p in loaded.partial]
    sources = checked.sources + [Source(p.source, p.lines, p.file) for p in loaded.partial]
    for subject in subjects:
        if namespace and subject.obj.kind != c.KIND_CLUSTER_TRAINING_RUNTIME and not subject.obj.metadata.namespace:
            subject.obj.metadata.namespace = namespace
    installed = _installed(backend, checked.result)
    validated = validate_batch(subjects, installed=installed, rejected=loaded.rejected, local=local)
    results = validated.results
    checked.results = results[: len(checked.objects)]
    checked.runtimes = validated.runtimes[: len(checked.objects)]
    given = {(o.kind, o.metadata.namespace, o.name) for o in checked.objects if o.kind != c.KIND_TRAINJOB}
    checked.installed = [r for r in installed or [] if (r.kind, r.metadata.namespace, r.name) not in given]
    for subject, source, result in zip(subjects, sources, results, strict=True):
        checked.result.extend(tag(result, subject.obj, source))
    checked.result = _ordered(checked.result)
    return checked


def _installed(backend: RuntimeCatalog | None, result: Result) -> list[AnyRuntime] | None:
    if backend is None:
        return []
    note = getattr(backend, "note", None)
    if note:
        result.warnings.append(Finding("", note, "TrainJobs are checked against the files' and the built-in runtimes"))
    try:
        return backend.list_runtimes(None)
    except KubetrainError as exc:
        result.warnings.append(Finding("", f"could not read the installed runtimes: {exc}",
                                       "TrainJobs are checked against the runtimes in the files only"))
        return None


class BuiltinsOnly:
    """Stands in for this machine's backend when its state cannot be opened: only the built-in runtimes."""

    def __init__(self, note: str | None = None) -> None:
        self.note = note

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]:
        from kubetrain.runtimes import builtin_runtimes

        return list(builtin_runtimes())


def checking_backend(kubeconfig: str | None, context: str | None) -> RuntimeCatalog:
    """The backend whose runtimes `validate` and `render` resolve against. Those commands only read: when this
    machine's state cannot be opened (read-only or broken $KUBETRAIN_HOME) they go on with the built-in runtimes
    and say so, where `apply` and `run` would stop. Raises ``BackendUnavailable`` for a cluster that cannot be
    reached."""
    if is_cluster(kubeconfig, context):
        return cluster_backend(kubeconfig, context)
    try:
        return local_backend()
    except (OSError, sqlite3.Error) as exc:
        return BuiltinsOnly(f"runtimes applied on this machine are not visible: its state cannot be opened ({exc})")


def _ordered(result: Result) -> Result:
    """One line per distinct finding, in file order (the loader's findings of a document before the rules')."""
    out = Result()
    for severity, findings in (("error", result.errors), ("warning", result.warnings)):
        seen: set[tuple[str | None, str | None, str, str]] = set()
        unique = []
        for f in findings:
            key = (f.source, f.obj, f.path, f.message)
            if key not in seen:
                seen.add(key)
                unique.append(f)
        files: dict[str, int] = {}
        for f in unique:
            files.setdefault(_position(f)[0], len(files))
        unique.sort(key=lambda f: (files[_position(f)[0]], _position(f)[1]))
        (out.errors if severity == "error" else out.warnings).extend(unique)
    return out


def _position(f: Finding) -> tuple[str, int]:
    file, _, line = (f.source or "").rpartition(":")
    return (file, int(line)) if line.isdigit() else (f.source or "", 0)
