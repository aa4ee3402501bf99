"""`kubetrain run` answered from the compile cache gives exactly what compiling again would, and anything that
could change the result compiles again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store
from kubetrain.local.submit import compile_cache

from ..conftest import container, needs_namespaces, py, rjob, runtime, trainjob

pytestmark = needs_namespaces
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KUBETRAIN, "run", "-q", *args], capture_output=True, text=True, env=env, check=False)


def entries(home: Path) -> list[Path]:
    d = home / "cache" / "compiled"
    return sorted(d.glob("*.json")) if d.exists() else []


def objects_of(name: str) -> tuple[str, list[dict[str, Any]]]:
    row = Store().get_trainjob("default", name)
    assert row is not None
    return row.uid, row.objects


def test_a_second_run_uses_the_cache_and_records_the_same_objects(kt_home: Path, tmp_path: Path) -> None:
    rt = runtime("echo", [rjob("node", [container(py("print('hi')"))], ancestor="trainer", parallelism=2)])
    f = tmp_path / "tj.yaml"
    f.write_text(yaml.safe_dump_all([rt, trainjob("c", "echo")]))
    assert run("-f", str(f)).returncode == 0
    assert len(entries(kt_home)) == 1
    uid1, objs1 = objects_of("c")
    # Poison the entry's objects in a way only the cache can produce: the next run must show it was used.
    entry = entries(kt_home)[0]
    data = json.loads(entry.read_text())
    data["trainjob"]["metadata"].setdefault("labels", {})["from-cache"] = "yes"
    entry.write_text(json.dumps(data))
    r = run("--replace", "-f", str(f))
    assert r.returncode == 0, r.stderr
    tj = LocalBackend().get_trainjob("c", "default")
    assert tj.metadata.labels == {"from-cache": "yes"}
    uid2, objs2 = objects_of("c")
    assert uid2 != uid1 and json.dumps(objs2).replace(uid2, uid1) == json.dumps(objs1), "same objects, new uid"
    assert "hi" in subprocess.run([*KUBETRAIN, "logs", "c"], capture_output=True, text=True).stdout


def test_changed_files_runtime_or_disabled_cache_compile_again(kt_home: Path, tmp_path: Path) -> None:
    f = tmp_path / "tj.yaml"
    f.write_text(yaml.safe_dump(trainjob("d", "shared", trainer={"command": ["true"]})))
    rt_file = tmp_path / "rt.yaml"
    rt_file.write_text(yaml.safe_dump(runtime("shared", [rjob("node", [container(["true"])], ancestor="trainer")])))
    subprocess.run([*KUBETRAIN, "apply", "-f", str(rt_file)], check=True, capture_output=True)
    assert run("-f", str(f)).returncode == 0
    assert len(entries(kt_home)) == 1
    # The applied runtime changes: the cached compilation no longer applies.
    node = container(["true"], env=[{"name": "V", "value": "2"}])
    changed = runtime("shared", [rjob("node", [node], ancestor="trainer")])
    rt_file.write_text(yaml.safe_dump(changed))
    subprocess.run([*KUBETRAIN, "apply", "-f", str(rt_file)], check=True, capture_output=True)
    assert run("--replace", "-f", str(f)).returncode == 0
    _, objs = objects_of("d")
    js = next(o for o in objs if o["kind"] == "JobSet")
    env = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "V", "value": "2"} in env
    assert len(entries(kt_home)) == 1, "the same files: the entry was replaced"
    # The file changes: compiled again (a second entry).
    f.write_text(yaml.safe_dump(trainjob("d", "shared", trainer={"command": ["true"], "args": ["x"]})))
    assert run("--replace", "-f", str(f)).returncode == 0
    assert len(entries(kt_home)) == 2
    env_off = {**os.environ, "KUBETRAIN_COMPILE_CACHE": "0"}
    f.write_text(yaml.safe_dump(trainjob("d", "shared", trainer={"command": ["true"], "args": ["y"]})))
    assert run("--replace", "-f", str(f), env=env_off).returncode == 0
    assert len(entries(kt_home)) == 2, "KUBETRAIN_COMPILE_CACHE=0 neither reads nor writes it"


def test_errors_are_never_cached_and_mpi_keys_never_reused(kt_home: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(trainjob("b", "no-such-runtime")))
    assert run("-f", str(bad)).returncode == 1
    assert run("-f", str(bad)).returncode == 1
    assert entries(kt_home) == []
    store = Store()
    objects = [{"kind": "Secret", "metadata": {"name": "x-mpi-ssh-auth"}, "type": "kubernetes.io/ssh-auth"}]
    entry = compile_cache.Compiled({"metadata": {}}, objects, [], [], "u", 0)
    compile_cache.remember(store, "k" * 64, entry, ("ClusterTrainingRuntime", "", "deepspeed-distributed"))
    assert entries(kt_home) == []


def test_key_covers_order_namespace_and_content(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("x: 1\n")
    b.write_text("y: 2\n")
    k = compile_cache.key((str(a), str(b)), "default")
    assert k is not None
    assert compile_cache.key((str(b), str(a)), "default") != k
    assert compile_cache.key((str(a), str(b)), "other") != k
    assert compile_cache.key(("-",), "default") is None and compile_cache.key((str(tmp_path),), "default") is None
    a.write_text("x: 2\n")
    assert compile_cache.key((str(a), str(b)), "default") != k


def test_new_uid_is_a_version_4_uuid() -> None:
    import uuid

    ids = {compile_cache.new_uid() for _ in range(200)}
    assert len(ids) == 200
    for u in ids:
        parsed = uuid.UUID(u)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and str(parsed) == u
