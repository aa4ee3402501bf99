"""Container environment as the kubelet builds it (kubetrain.local.sandbox.env). Pure: no processes, no namespaces."""

from __future__ import annotations

import pytest

from kubetrain.local.plan import build_plan
from kubetrain.local.sandbox.env import EnvError, ObjectIndex, command_line, container_env, expand

from ..fixtures import CONFIGMAP, SECRET, jobset, rj


class TestEnv:
    def test_an_indexed_job_gives_every_container_job_completion_index_as_the_job_controller_does(self) -> None:
        plan = build_plan(jobset([rj("node", completions=3)]))
        pod = plan.pods()[2]
        meta = pod.meta("team", "uid", 0)
        cm = ObjectIndex([{**CONFIGMAP, "data": {"JOB_COMPLETION_INDEX": "from-configmap"}}])
        from_cm = {"name": "node", "envFrom": [{"configMapRef": {"name": CONFIGMAP["metadata"]["name"]}}]}
        assert container_env(from_cm, meta, cm, base={}, pod_ip=pod.address, where="c")["JOB_COMPLETION_INDEX"] == "2"
        own = {"name": "node", "env": [{"name": "JOB_COMPLETION_INDEX", "value": "mine"}]}
        assert container_env(own, meta, ObjectIndex([]), base={}, pod_ip=pod.address, where="c")[
            "JOB_COMPLETION_INDEX"] == "mine"

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
        assert env == {"RANK": "1", "JS": "tj", "POD": "tj-node-0-1", "NS": "team", "IP": pod.address,
                       "JOB_COMPLETION_INDEX": "1"}

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
            EnvError, match=r"pod\.env\[0\]\.valueFrom\.secretKeyRef: secret \"gone\" not found.*waits.*apply"
        ):
            container_env(c, {}, ObjectIndex([]), base={}, pod_ip="x", where="pod")

    def test_dollar_expansion_like_the_kubelet(self) -> None:
        assert expand("$(A)-$(B)-$$(A)", {"A": "1"}) == "1-$(B)-$(A)"
        c = {"command": ["echo", "$(MSG)"], "args": ["$(N)"]}
        assert command_line(c, {"MSG": "hi", "N": "2"}) == ["echo", "hi", "2"]


