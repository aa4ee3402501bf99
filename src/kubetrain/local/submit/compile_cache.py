"""``kubetrain run`` remembers what it validated and compiled, so re-running a manifest skips both.

The usual loop is editing code and running the same TrainJob manifest again; validating and compiling it again
(and importing what that needs) is most of the CLI's own start-up time. An entry is used only when everything
that decided it is unchanged: the bytes of every ``-f`` file and their order, the namespace, the definition of the
runtime the TrainJob referenced (applied on this machine, else built in), and kubetrain's own api, compiler and
runtimes code. Anything else compiles again. TrainJobs with generated secrets (MPI SSH keys) are never cached:
each run gets fresh keys.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.local import paths
from kubetrain.local.store.db import Store

FORMAT = 1
MAX_ENTRIES = 200
_PACKAGE = Path(__file__).resolve().parents[1]  # the kubetrain package


@dataclass
class Compiled:
    """A validated, compiled TrainJob ready to record: ``uid`` is the placeholder to replace in both."""

    trainjob: dict[str, Any]
    objects: list[dict[str, Any]]
    others: list[dict[str, Any]]  # runtimes, ConfigMaps and Secrets from the same files
    warnings: list[str]
    uid: str
    file_index: int  # which -f file holds the TrainJob (its directory is the working directory)


def disabled() -> bool:
    return os.environ.get("KUBETRAIN_COMPILE_CACHE", "1") == "0"


def _code_digest() -> str:
    # A new version changes these files too (their times and sizes): no need to ask for the version.
    h = hashlib.sha256(f"{FORMAT}:{_PACKAGE}".encode())
    for sub in ("api", "compiler", "runtimes"):
        for root, dirs, files in os.walk(_PACKAGE / sub):
            dirs.sort()
            for f in sorted(files):
                if f.endswith((".py", ".yaml", ".json")):
                    path = os.path.join(root, f)
                    st = os.stat(path)
                    h.update(f"{os.path.relpath(path, _PACKAGE)}:{st.st_mtime_ns}:{st.st_size};".encode())
    return h.hexdigest()


def key(files: tuple[str, ...], namespace: str) -> str | None:
    """``None`` when the files cannot be keyed (stdin, directories)."""
    h = hashlib.sha256(f"{namespace}\0{_code_digest()}\0".encode())
    for f in files:
        if f == "-" or not os.path.isfile(f):
            return None
        with open(f, "rb") as fh:
            data = fh.read()
        h.update(hashlib.sha256(data).digest())
    return h.hexdigest()


def runtime_digest(store: Store, kind: str, namespace: str, name: str) -> str | None:
    """The definition a runtime reference resolves to now: applied on this machine first, else built in."""
    applied = store.runtime_manifest(kind, namespace, name)
    if applied is not None:
        return hashlib.sha256(b"applied\0" + applied.encode()).hexdigest()
    builtin = _PACKAGE / "runtimes" / f"{name}.yaml"
    if kind == "ClusterTrainingRuntime" and "/" not in name and builtin.is_file():
        return hashlib.sha256(b"builtin\0" + builtin.read_bytes()).hexdigest()
    return None


def _path(k: str) -> Path:
    return paths.home() / "cache" / "compiled" / f"{k}.json"


def lookup(store: Store, k: str) -> Compiled | None:
    try:
        entry = json.loads(_path(k).read_text())
    except (OSError, ValueError):
        return None
    ref = entry.get("runtime") or {}
    if entry.get("format") != FORMAT or runtime_digest(
        store, ref.get("kind", ""), ref.get("namespace", ""), ref.get("name", "")
    ) != ref.get("digest"):
        return None
    try:
        os.utime(_path(k))  # recently used entries are kept
    except OSError:
        pass
    return Compiled(
        entry["trainjob"], entry["objects"], entry["others"], entry["warnings"], entry["uid"], entry["file_index"]
    )


def remember(store: Store, k: str, compiled: Compiled, runtime: tuple[str, str, str]) -> None:
    if any(o.get("kind") == "Secret" for o in compiled.objects):
        return  # generated keys: every TrainJob gets its own
    kind, namespace, name = runtime
    entry = {
        "format": FORMAT,
        "trainjob": compiled.trainjob,
        "objects": compiled.objects,
        "others": compiled.others,
        "warnings": compiled.warnings,
        "uid": compiled.uid,
        "file_index": compiled.file_index,
        "runtime": {
            "kind": kind,
            "namespace": namespace,
            "name": name,
            "digest": runtime_digest(store, kind, namespace, name),
        },
    }
    target = _path(k)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(entry))
        tmp.replace(target)
        _trim(target.parent)
    except OSError:
        pass  # a cache that cannot be written only costs time


def _trim(d: Path) -> None:
    entries = sorted(d.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in entries[: max(0, len(entries) - MAX_ENTRIES)]:
        old.unlink(missing_ok=True)


def new_uid() -> str:
    """A random (version 4) UUID, as the API server would assign; without importing ``uuid``."""
    h = bytearray(os.urandom(16))
    h[6] = (h[6] & 0x0F) | 0x40
    h[8] = (h[8] & 0x3F) | 0x80
    x = h.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


def fresh(compiled: Compiled, uid: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The entry's TrainJob and objects for a new incarnation: new uid, new creation time, no status."""
    tj = json.loads(json.dumps(compiled.trainjob).replace(compiled.uid, uid))
    objects = json.loads(json.dumps(compiled.objects).replace(compiled.uid, uid))
    tj.setdefault("metadata", {})["creationTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    tj.pop("status", None)
    return tj, objects
