"""The local store and its status vocabulary (kubetrain.local.store). Pure: no processes, no namespaces."""

from __future__ import annotations

from pathlib import Path

from kubetrain.local.store import status
from kubetrain.local.store.db import PodRow, Store


class TestStatus:
    def test_transition_time_changes_only_when_status_flips(self) -> None:
        st: dict[str, object] = {}
        assert status.set_condition(st, "Suspended", "True", "Suspended", "m")
        first = st["conditions"][0]["lastTransitionTime"]  # type: ignore[index]
        assert not status.set_condition(st, "Suspended", "True", "Suspended", "m")
        assert status.set_condition(st, "Suspended", "False", "Resumed", "r")
        assert st["conditions"][0]["reason"] == "Resumed"  # type: ignore[index]
        assert first is not None
        assert status.complete(st) and status.finished(st) and status.state_of(st) == "Complete"


class TestStore:
    def test_roundtrip_and_delete(self, tmp_path: Path) -> None:
        s = Store(tmp_path / "db")
        tj = {"metadata": {"name": "a", "namespace": "ns", "uid": "u"}, "spec": {}}
        s.create_trainjob(tj, [{"kind": "JobSet"}], "/w", (1, None))
        s.put_pod(PodRow("ns", "a", "node-0-0", "node", "Running", 5, "1", None, 0, None, "/l"))
        s.add_event("ns", "a", "Normal", "Started", "m")
        row = s.get_trainjob("ns", "a")
        assert row is not None and row.objects == [{"kind": "JobSet"}] and row.workdir == "/w"
        assert [p.state for p in s.list_pods("ns", "a")] == ["Running"]
        assert [e.reason for e in s.list_events("ns", "a")] == ["Started"]
        assert [r.name for r in s.list_trainjobs(None)] == ["a"] and s.list_trainjobs("other") == []
        s.delete_trainjob("ns", "a")
        assert s.get_trainjob("ns", "a") is None and s.list_pods("ns", "a") == []

    def test_a_state_file_of_the_previous_version_is_upgraded_in_place(self, tmp_path: Path) -> None:
        import sqlite3

        db = tmp_path / "old.db"
        old = sqlite3.connect(db)
        old.executescript(
            "CREATE TABLE trainjobs (namespace TEXT NOT NULL, name TEXT NOT NULL, uid TEXT NOT NULL, trainjob TEXT"
            " NOT NULL, objects TEXT NOT NULL, workdir TEXT NOT NULL, supervisor_pid INTEGER, supervisor_start TEXT,"
            " restarts INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, updated REAL NOT NULL,"
            " PRIMARY KEY (namespace, name));"
            "INSERT INTO trainjobs VALUES ('ns', 'kept', 'u', '{\"metadata\": {}}', '[]', '/', NULL, NULL, 0, 1, 1);"
        )
        old.commit()
        old.close()
        s = Store(db)
        assert [r.name for r in s.list_trainjobs(None)] == ["kept"]
        assert s._read("PRAGMA journal_mode")[0][0] == "wal"
        assert s._read("SELECT count(*) FROM sched_queue")[0][0] == 0

    def test_a_pod_keeps_its_creation_time_and_records_readiness(self, tmp_path: Path) -> None:
        s = Store(tmp_path / "db")
        s.create_trainjob({"metadata": {"name": "a", "namespace": "ns", "uid": "u"}}, [], "/w", (1, None))
        s.put_pod(PodRow("ns", "a", "node-0-0", "node", "Pending", None, None, None, 0, None, "/l"))
        (first,) = s.list_pods("ns", "a")
        assert first.created is not None and not first.ready
        s._conn.execute("UPDATE pods SET created = created - 60")  # as if recorded a minute ago
        s.put_pod(PodRow("ns", "a", "node-0-0", "node", "Running", 5, "1", None, 0, None, "/l", ready=True))
        (now,) = s.list_pods("ns", "a")
        assert now.ready and now.state == "Running"
        assert now.created == first.created - 60  # a rewrite keeps when the pod was first recorded

    def test_a_version_3_state_file_gets_the_pod_columns(self, tmp_path: Path) -> None:
        import sqlite3

        db = tmp_path / "v3.db"
        old = sqlite3.connect(db)
        old.executescript(
            "CREATE TABLE pods (namespace TEXT NOT NULL, trainjob TEXT NOT NULL, name TEXT NOT NULL, rjob TEXT NOT"
            " NULL, state TEXT NOT NULL, pid INTEGER, pid_start TEXT, exit_code INTEGER, restarts INTEGER NOT NULL"
            " DEFAULT 0, message TEXT, log TEXT NOT NULL, updated REAL NOT NULL,"
            " PRIMARY KEY (namespace, trainjob, name));"
            "INSERT INTO pods VALUES ('ns', 'a', 'node-0-0', 'node', 'Running', 1, '1', NULL, 0, NULL, '/l', 1);"
            "PRAGMA user_version=3;"
        )
        old.commit()
        old.close()
        s = Store(db)
        (pod,) = s.list_pods("ns", "a")
        assert (pod.state, pod.ready, pod.created) == ("Running", False, None)
        s.put_pod(PodRow("ns", "a", "node-0-1", "node", "Running", 2, "2", None, 0, None, "/l", ready=True))
        assert [p.ready for p in s.list_pods("ns", "a")] == [False, True]
