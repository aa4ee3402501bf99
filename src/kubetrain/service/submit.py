"""Hand objects to a backend, the same way from the CLI (``apply``), the UI's submit form and ``Client.train``.

On a cluster it is one call (the API server and kubetrain's admission webhook see every object). On this machine
it is one call per object, runtimes before TrainJobs, so each TrainJob keeps the working directory of its own file
(a pod without ``workingDir`` starts where its manifest lives) and a later error never hides what was already
applied (``on_applied`` hears each result as it happens).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api import constants as c

if TYPE_CHECKING:
    from kubetrain.api.views import Backend
    from kubetrain.service.sources import Source


def workdirs(sources: Sequence[Source]) -> list[str]:
    """Per object, the folder of the file it came from (the current folder for stdin and text)."""
    out = []
    for s in sources:
        f = s.file or "-"
        out.append(str(Path(f).resolve().parent) if f not in ("-", "<stdin>") else os.getcwd())
    return out


def submit(
    manifests: Sequence[dict[str, Any]],
    backend: Backend,
    *,
    namespace: str,
    cluster: bool,
    workdirs: Sequence[str] | None = None,
    on_applied: Callable[[list[str]], object] = lambda lines: None,
) -> list[str]:
    """Apply ``manifests`` (already checked, see ``kubetrain.service.checking``); returns the backend's lines
    (``trainjob.trainer.kubeflow.org/x created``). ``workdirs``: per manifest, locally (default: this folder)."""
    dirs = list(workdirs) if workdirs is not None else [os.getcwd()] * len(manifests)
    manifests, dirs = _last_definitions(manifests, dirs, namespace)
    if cluster:
        done: list[str] = backend.apply(list(manifests), namespace=namespace)
        on_applied(done)
        return done
    applied: list[str] = []
    pairs = sorted(zip(manifests, dirs, strict=True), key=lambda p: p[0].get("kind") == c.KIND_TRAINJOB)
    for manifest, workdir in pairs:
        done = backend.apply([manifest], namespace=namespace, workdir=workdir)  # type: ignore[call-arg]
        applied.extend(done)
        on_applied(done)
    return applied


def _last_definitions(
    manifests: Sequence[dict[str, Any]], dirs: list[str], namespace: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each object once, as its last definition in the input says (what validation warns about): applying the
    earlier ones too would only report an object twice. Objects named by ``generateName`` are all distinct."""
    keys: list[tuple[str, str, str] | int] = []
    for i, m in enumerate(manifests):
        meta = m.get("metadata") or {}
        named = bool(meta.get("name"))
        keys.append((str(m.get("kind")), str(meta.get("namespace") or namespace), meta["name"]) if named else i)
    last = {key: i for i, key in enumerate(keys)}
    keep = [i for i, key in enumerate(keys) if last[key] == i]
    return [manifests[i] for i in keep], [dirs[i] for i in keep]
