"""$KUBETRAIN_HOME stays bounded: delete removes logs, `kubetrain prune` and the retention setting remove
finished TrainJobs, and leftovers no TrainJob owns."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

from kubetrain.local import housekeeping, paths
from kubetrain.local.backend import LocalBackend
from kubetrain.local.store.db import Store
from kubetrain.local.supervisor.controller import Supervisor

from .conftest import container, needs_namespaces, py, rjob, run_to_end, runtime, trainjob

pytestmark = needs_namespaces
KUBETRAIN = [sys.executable, "-m", "kubetrain.cli.main"]
QUICK = runtime("quick", [rjob("node", [container(py("print('x' * 1000)"))], ancestor="trainer", parallelism=2)])


def age(backend: LocalBackend, name: str, seconds: float) -> None:
    """Pretend the TrainJob finished ``seconds`` ago."""
    row = backend.store.get_trainjob("default", name)
    assert row is not None
    st = row.trainjob["status"]
    then = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - seconds))
    for c in st["conditions"]:
        c["lastTransitionTime"] = then
    backend.store.set_status("default", name, row.uid, st)


def test_repeated_runs_and_deletes_leave_nothing_behind(backend: LocalBackend, tmp_path: Path) -> None:
    for i in range(10):
        run_to_end(backend, [QUICK, trainjob(f"j{i}", "quick")], tmp_path)
        backend.delete_trainjob(f"j{i}", "default")
    assert list((paths.home() / "trainjobs" / "default").iterdir()) == []
    assert backend.store.list_trainjobs(None) == []
    n = backend.store._read("SELECT (SELECT count(*) FROM pods) + (SELECT count(*) FROM events)")[0][0]
    assert n == 0


def test_prune_removes_finished_trainjobs_state_and_logs_and_never_a_running_one(
    backend: LocalBackend, tmp_path: Path
) -> None:
    for name in ("old", "new"):
        run_to_end(backend, [QUICK, trainjob(name, "quick")], tmp_path)
    age(backend, "old", 3 * 86400)
    sleeper = runtime("sleepy", [rjob("node", [container(py("import time; time.sleep(600)"))], ancestor="trainer")])
    backend.apply([sleeper, trainjob("running", "sleepy")], namespace="default", workdir=str(tmp_path), detach=False)
    sup = Supervisor(backend.store, "default", "running")
    t = threading.Thread(target=sup.run)
    t.start()
    try:
        old_dir = backend.logs_dir("old", "default").parent
        dry = backend.prune(older_than=86400, dry_run=True)
        assert [p.what for p in dry] == ["trainjob default/old"] and old_dir.exists()
        assert dry[0].bytes > 0
        pruned = backend.prune(older_than=86400)
        assert [p.what for p in pruned] == ["trainjob default/old"] and not old_dir.exists()
        assert [r.name for r in backend.store.list_trainjobs(None)] == ["new", "running"]
        assert [p.what for p in backend.prune()] == ["trainjob default/new"], "without --older-than: all finished"
        assert [r.name for r in backend.store.list_trainjobs(None)] == ["running"]
    finally:
        sup.terminate("test cleanup")
        t.join(60)


def test_prune_removes_kept_logs_of_deleted_trainjobs_and_volumes_only_when_asked(
    backend: LocalBackend, tmp_path: Path
) -> None:
    run_to_end(backend, [QUICK, trainjob("kept", "quick")], tmp_path)
    logs = backend.logs_dir("kept", "default")
    backend.delete_trainjob("kept", "default", keep_logs=True)
    claim = paths.claims_dir("default", "kept")
    claim.mkdir(parents=True)
    (claim / "data").write_text("user data")
    assert backend.prune() == [], "fresh leftovers may belong to a TrainJob being created right now"
    old = time.time() - 3600
    os.utime(logs.parent, (old, old))
    pruned = backend.prune()
    assert [p.what for p in pruned] == ["files of deleted trainjob default/kept"] and not logs.exists()
    assert claim.exists(), "volumes are user data: kept unless --volumes"
    assert [p.what for p in backend.prune(volumes=True)] == ["volumes of deleted trainjob default/kept"]
    assert not claim.exists()


def test_retention_setting_prunes_on_submit(kt_home: Path, tmp_path: Path) -> None:
    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "config.yaml").write_text(yaml.safe_dump({"retention": {"maxFinished": 2}}))
    backend = LocalBackend(Store())
    for i in range(4):
        run_to_end(backend, [QUICK, trainjob(f"r{i}", "quick")], tmp_path)
        time.sleep(1.1)  # finish times have one-second resolution
    # Each submit pruned down to the 2 newest finished ones (the one just submitted was not finished yet).
    assert sorted(r.name for r in backend.store.list_trainjobs(None)) == ["r1", "r2", "r3"]
    (kt_home / "config.yaml").write_text(yaml.safe_dump({"retention": {"ttlAfterFinished": "1h"}}))
    age(backend, "r1", 7200)
    run_to_end(backend, [QUICK, trainjob("r4", "quick")], tmp_path)
    assert sorted(r.name for r in backend.store.list_trainjobs(None)) == ["r2", "r3", "r4"]


def test_bad_retention_setting_is_explained(kt_home: Path) -> None:
    from kubetrain.local.config import ConfigError, load

    kt_home.mkdir(parents=True, exist_ok=True)
    (kt_home / "config.yaml").write_text("retention: {ttlAfterFinished: soon}\n")
    try:
        load()
    except ConfigError as exc:
        assert "retention.ttlAfterFinished: 'soon' is not a duration (e.g. 3600, 30m, 12h, 7d)" in str(exc)
    else:
        raise AssertionError("expected a ConfigError")


def test_prune_cli(kt_home: Path, tmp_path: Path) -> None:
    f = tmp_path / "tj.yaml"
    f.write_text(yaml.safe_dump_all([QUICK, trainjob("p", "quick")]))
    subprocess.run([*KUBETRAIN, "run", "-q", "-f", str(f)], check=True, capture_output=True)
    r = subprocess.run([*KUBETRAIN, "prune", "--dry-run"], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("would remove trainjob default/p (") and "would remove 1 item(s)" in r.stderr
    r = subprocess.run([*KUBETRAIN, "prune", "-A"], capture_output=True, text=True, check=True)
    assert r.stdout.startswith("removed trainjob default/p (")
    r = subprocess.run([*KUBETRAIN, "prune", "-A"], capture_output=True, text=True, check=True)
    assert r.stdout == "" and r.stderr.strip() == "nothing to prune"
    assert housekeeping.du(kt_home / "trainjobs") == 0
