"""Unit tests of the pure parts of the local backend (no processes, no namespaces)."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest

from kubetrain.local import namespaces, resources, status
from kubetrain.local.backend import step_prefix
from kubetrain.local.env import EnvError, ObjectIndex, command_line, container_env, expand
from kubetrain.local.plan import PlanError, address, build_plan
from kubetrain.local.store import PodRow, Store
from kubetrain.local.volumes import VolumeError, container_binds, pod_volumes

SECRET = {
    "kind": "Secret",
    "metadata": {"name": "creds"},
    "data": {"token": base64.b64encode(b"s3cr3t").decode()},
    "stringData": {"user": "ann"},
}
CONFIGMAP = {
    "kind": "ConfigMap",
    "metadata": {"name": "cfg"},
    "data": {"LR": "0.1", "hostfile": "a slots=2\n"},
}


def jobset(rjobs: list[dict[str, object]], **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "tj", "namespace": "default"},
        "spec": {"replicatedJobs": rjobs, **spec},
    }


def rj(name: str, completions: int = 1, replicas: int = 1) -> dict[str, object]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": completions,
                "completions": completions,
                "template": {"spec": {"containers": [{"name": "node", "command": ["true"]}]}},
            }
        },
    }


class TestEnv:
    def test_field_refs_resolve_completion_index_name_namespace_and_jobset_label(self) -> None:
        plan = build_plan(jobset([rj("node", completions=2)]))
        pod = plan.pods()[1]
        c = {
            "name": "node",
            "env": [
                {
                    "name": "RANK",
                    "valueFrom": {
                        "fieldRef": {
                            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                        }
                    },
                },
                {
                    "name": "JS",
                    "valueFrom": {
                        "fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/jobset-name']"}
                    },
                },
                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            ],
        }
        env = container_env(
            c, pod.meta("team", "uid", 0), ObjectIndex([]), base={}, pod_ip=pod.address, where="c"
        )
        assert env == {"RANK": "1", "JS": "tj", "POD": "tj-node-0-1", "NS": "team", "IP": pod.address}

    def test_secret_and_configmap_refs_and_env_from(self) -> None:
        c = {
            "name": "node",
            "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
            "env": [
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
                {"name": "USER", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "user"}}},
                {"name": "LR", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "LR"}}},
                {
                    "name": "OPT",
                    "valueFrom": {"secretKeyRef": {"name": "nope", "key": "x", "optional": True}},
                },
            ],
        }
        env = container_env(
            c, {}, ObjectIndex([SECRET, CONFIGMAP]), base={"PATH": "/bin"}, pod_ip="x", where="c"
        )
        assert env["TOKEN"] == "s3cr3t" and env["USER"] == "ann" and env["LR"] == "0.1"
        assert env["CFG_LR"] == "0.1" and env["PATH"] == "/bin" and "OPT" not in env

    def test_missing_secret_names_the_field_and_the_fix(self) -> None:
        c = {
            "name": "node",
            "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "gone", "key": "k"}}}],
        }
        with pytest.raises(
            EnvError, match=r"pod\.env\[0\]\.valueFrom\.secretKeyRef: Secret 'gone' not found.*apply"
        ):
            container_env(c, {}, ObjectIndex([]), base={}, pod_ip="x", where="pod")

    def test_dollar_expansion_like_the_kubelet(self) -> None:
        assert expand("$(A)-$(B)-$$(A)", {"A": "1"}) == "1-$(B)-$(A)"
        c = {"command": ["echo", "$(MSG)"], "args": ["$(N)"]}
        assert command_line(c, {"MSG": "hi", "N": "2"}) == ["echo", "hi", "2"]


class TestPlan:
    def test_pods_hostnames_and_addresses_follow_the_jobset_convention(self) -> None:
        plan = build_plan(jobset([rj("dataset-initializer"), rj("node", completions=2, replicas=2)]))
        names = [p.name for p in plan.pods()]
        assert names == [
            "tj-dataset-initializer-0-0",
            "tj-node-0-0",
            "tj-node-0-1",
            "tj-node-1-0",
            "tj-node-1-1",
        ]
        assert [p.fqdn for p in plan.pods()][1] == "tj-node-0-0.tj"
        assert len({p.address for p in plan.pods()}) == 5
        assert plan.pods()[2].annotations["batch.kubernetes.io/job-completion-index"] == "1"
        assert plan.pods()[3].labels["jobset.sigs.k8s.io/job-index"] == "1"
        hosts = plan.hosts_file()
        assert f"{address(1)}\ttj-node-0-0.tj " in hosts

    def test_subdomain_from_network(self) -> None:
        plan = build_plan(jobset([rj("node")], network={"subdomain": "svc"}))
        assert plan.pods()[0].fqdn == "tj-node-0-0.svc"

    def test_defaults_match_jobset_and_job(self) -> None:
        job = build_plan(jobset([rj("node")])).jobs()[0]
        assert (job.restart_policy, job.backoff_limit) == ("OnFailure", 6)

    def test_unknown_dependency_is_an_error(self) -> None:
        r = rj("launcher")
        r["dependsOn"] = [{"name": "nodes", "status": "Ready"}]
        with pytest.raises(PlanError, match="dependsOn 'nodes'"):
            build_plan(jobset([rj("node"), r]))

    def test_non_indexed_completion_is_rejected_with_the_field(self) -> None:
        r = rj("node")
        r["template"]["spec"]["completionMode"] = "NonIndexed"  # type: ignore[index]
        with pytest.raises(PlanError, match=r"replicatedJobs\[0\]\.template\.spec\.completionMode"):
            build_plan(jobset([r]))

    def test_step_prefix(self) -> None:
        assert step_prefix("node-0-1") == "node-0/1"
        assert step_prefix("dataset-initializer-0-0") == "dataset-initializer-0/0"


class TestVolumes:
    def test_secret_and_configmap_are_materialised_with_modes(self, tmp_path: Path) -> None:
        spec = {
            "volumes": [
                {
                    "name": "ssh",
                    "secret": {
                        "secretName": "creds",
                        "defaultMode": 0o400,
                        "items": [
                            {"key": "token", "path": "id_rsa", "mode": 0o640},
                            {"key": "user", "path": "user"},
                        ],
                    },
                },
                {
                    "name": "hf",
                    "configMap": {
                        "name": "cfg",
                        "items": [{"key": "hostfile", "path": "hostfile", "mode": 0o444}],
                    },
                },
                {"name": "scratch", "emptyDir": {}},
                {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            ],
            "containers": [{"name": "node", "volumeMounts": [{"name": "init", "mountPath": "/workspace"}]}],
        }
        vols = pod_volumes(
            spec,
            pod_dir=tmp_path / "pod",
            claims_dir=tmp_path / "claims",
            claim_templates={"init"},
            index=ObjectIndex([SECRET, CONFIGMAP]),
            where="pod",
        )
        assert (vols["ssh"] / "id_rsa").read_bytes() == b"s3cr3t"
        assert stat.S_IMODE(os.stat(vols["ssh"] / "id_rsa").st_mode) == 0o640
        assert stat.S_IMODE(os.stat(vols["ssh"] / "user").st_mode) == 0o400
        assert stat.S_IMODE(os.stat(vols["hf"] / "hostfile").st_mode) == 0o444
        assert vols["data"] == tmp_path / "claims" / "shared" and vols["data"].is_dir()
        assert vols["init"] == tmp_path / "claims" / "init"
        binds = container_binds(spec["containers"][0], vols, "c")  # type: ignore[index]
        assert binds[0].dest == "/workspace" and binds[0].src == str(tmp_path / "claims" / "init")

    def test_unsupported_volume_type_names_the_field(self, tmp_path: Path) -> None:
        spec = {"volumes": [{"name": "x", "nfs": {"server": "s"}}]}
        with pytest.raises(VolumeError, match=r"pod\.volumes\[0\]: volume type \['nfs'\] is not supported"):
            pod_volumes(
                spec,
                pod_dir=tmp_path,
                claims_dir=tmp_path,
                claim_templates=set(),
                index=ObjectIndex([]),
                where="pod",
            )

    def test_mount_of_undeclared_volume(self, tmp_path: Path) -> None:
        with pytest.raises(VolumeError, match=r"volumeMounts\[0\]\.name: no volume 'x'"):
            container_binds({"volumeMounts": [{"name": "x", "mountPath": "/a"}]}, {}, "c")


class TestSandboxRoot:
    def test_new_mount_points_never_create_host_directories(self, tmp_path: Path) -> None:
        src = tmp_path / "src"
        src.mkdir()
        dest = "/etc/kubetrain-test-does-not-exist/inner"
        argv = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[namespaces.Bind(str(src), dest)],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
        )
        # /etc gets rebuilt as a tmpfs of binds instead of being bound whole (which would mkdir on the host).
        i = argv.index("--tmpfs")
        assert argv[i + 1] == "/etc"
        assert ["--dev-bind", "/etc", "/etc"] not in [argv[j : j + 3] for j in range(len(argv))]
        assert argv[-2:] == ["--", "true"]
        assert not os.path.exists("/etc/kubetrain-test-does-not-exist")

    def test_symlinked_destination_is_mounted_inside_the_sandbox_not_through_the_link(
        self, tmp_path: Path
    ) -> None:
        target = tmp_path / "real"
        target.write_text("host file")
        (tmp_path / "link").symlink_to(target)
        argv = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
            resolv_conf=str(tmp_path / "resolv"),
        )
        argv2 = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[namespaces.Bind(str(tmp_path / "src"), str(tmp_path / "link"))],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
        )
        assert ["--ro-bind", str(tmp_path / "resolv"), "/etc/resolv.conf"] == argv[
            argv.index("/etc/resolv.conf") - 2 : argv.index("/etc/resolv.conf") + 1
        ]
        pairs = [argv2[j : j + 2] for j in range(len(argv2))]
        assert ["--tmpfs", str(tmp_path)] in pairs  # the link's directory is rebuilt inside the sandbox
        assert ["--symlink", str(target), str(tmp_path / "link")] not in [
            argv2[j : j + 3] for j in range(len(argv2))
        ]
        assert target.read_text() == "host file"

    def test_existing_mount_point_does_not_shadow(self, tmp_path: Path) -> None:
        argv = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[namespaces.Bind(str(tmp_path), "/usr")],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
        )
        assert "--tmpfs" not in argv


class TestResources:
    @pytest.mark.parametrize(
        ("q", "v"), [("2", 2.0), ("500m", 0.5), ("4Gi", 4 * 2**30), ("1e3", 1000.0), (3, 3.0)]
    )
    def test_quantities(self, q: str | int, v: float) -> None:
        assert resources.parse_quantity(q) == v

    def test_bad_quantity_is_explained(self) -> None:
        with pytest.raises(resources.QuantityError, match="not a Kubernetes quantity"):
            resources.parse_quantity("lots")

    def test_missing_resources_name_what_is_short(self) -> None:
        cap = resources.Capacity({"cpu": 2, "memory": 8 * 2**30, "nvidia.com/gpu": 0})
        assert resources.never_fits({"cpu": 1, "memory": 2**30}, cap) == []
        missing = resources.never_fits({"cpu": 64, "nvidia.com/gpu": 1}, cap)
        assert missing == [
            "cpu: requested 64, this machine has 2",
            "nvidia.com/gpu: requested 1, this machine has 0",
        ]

    def test_pod_requests_count_init_containers_like_the_scheduler(self) -> None:
        spec = {
            "containers": [
                {"resources": {"requests": {"cpu": "1"}}},
                {"resources": {"limits": {"cpu": "1"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
        }
        assert resources.pod_requests(spec) == {"cpu": 3.0}


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
