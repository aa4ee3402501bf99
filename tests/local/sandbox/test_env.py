"""Container environment as the kubelet builds it (kubetrain.local.sandbox.env). Pure: no processes, no namespaces."""

from __future__ import annotations

import pytest

from kubetrain.local.plan import build_plan
from kubetrain.local.sandbox.env import EnvError, ObjectIndex, command_line, container_env, expand

from ..fixtures import CONFIGMAP, SECRET, jobset, rj


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
            EnvError, match=r"pod\.env\[0\]\.valueFrom\.secretKeyRef: secret \"gone\" not found.*waits.*apply"
        ):
            container_env(c, {}, ObjectIndex([]), base={}, pod_ip="x", where="pod")

    def test_dollar_expansion_like_the_kubelet(self) -> None:
        assert expand("$(A)-$(B)-$$(A)", {"A": "1"}) == "1-$(B)-$(A)"
        c = {"command": ["echo", "$(MSG)"], "args": ["$(N)"]}
        assert command_line(c, {"MSG": "hi", "N": "2"}) == ["echo", "hi", "2"]


