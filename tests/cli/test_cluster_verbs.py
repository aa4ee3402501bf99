"""The kubectl-habit verbs against a cluster (the fake API server), as a user types them: ``get`` with names,
``-l``, ``--sort-by``, ``--no-headers``, ``-o wide``; ``delete`` with several names, ``--all`` and ``-f``;
``wait``; ``describe -o``. The same verbs locally are in ``tests/local/test_cli_kubectl.py``."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import yaml
from click.testing import CliRunner

from kubetrain.cli.main import cli
from tests.k8s.helpers import torch_runtime, trainjob
from tests.k8s.kubelet import Kubelet, pod_manifest, running
from tests.k8s.threaded import background_api


def kt(kubeconfig: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--kubeconfig", kubeconfig])
    return result.exit_code, result.stdout, result.stderr


def test_get_names_selector_sort_headers_and_wide(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        jobs = []
        for name, team in (("b-job", "vision"), ("a-job", "nlp"), ("c-job", "vision")):
            tj = trainjob(name, trainer={"numNodes": 1})
            tj["metadata"]["labels"] = {"team": team}
            jobs.append(tj)
        # The runtime too: `apply` checks TrainJobs against the cluster's runtimes, as the webhook would.
        rc, _, err = kt(kubeconfig, "apply", "-f", _write(tmp_path / "jobs.yaml", torch_runtime(), *jobs))
        assert rc == 0, err
        kubelet.create_jobset("a-job")
        kubelet.create_pod(pod_manifest("a-job", "node", 0), running())

        rc, out, err = kt(kubeconfig, "get", "trainjob", "a-job", "nope", "c-job")
        assert rc == 1
        assert [line.split()[0] for line in out.splitlines()] == ["NAME", "a-job", "c-job"]
        assert 'trainjobs.trainer.kubeflow.org "nope" not found' in err
        assert "a-job   torch-distributed   Running" in out

        rc, out, _ = kt(kubeconfig, "get", "tj", "-l", "team=vision", "--no-headers")
        assert rc == 0 and [line.split()[0] for line in out.splitlines()] == ["b-job", "c-job"]
        rc, out, _ = kt(kubeconfig, "get", "tj", "--sort-by", "{.metadata.name}", "--no-headers")
        assert [line.split()[0] for line in out.splitlines()] == ["a-job", "b-job", "c-job"]
        rc, out, _ = kt(kubeconfig, "get", "tj", "--sort-by", ".metadata.labels.team", "-o", "name")
        assert out.splitlines()[0] == "trainjob.trainer.kubeflow.org/a-job"

        rc, out, _ = kt(kubeconfig, "get", "tj", "c-job", "-o", "wide")
        header, row = out.splitlines()
        assert header.split() == ["NAME", "RUNTIME", "STATE", "PROGRESS", "NODES", "AGE", "REASON", "JOBS", "MESSAGE"]
        assert row.endswith("no JobSet yet")  # the whole message, whatever the terminal's width
        assert "…" not in out

        rc, _, err = kt(kubeconfig, "get", "tj", "a-job", "-l", "team=nlp")
        assert rc == 1 and "a name and --selector cannot be used together" in err


def test_get_runtimes_namespace_column_and_framework_label(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        ns_rt = torch_runtime("team-rt")
        ns_rt["kind"] = "TrainingRuntime"
        ns_rt["metadata"]["namespace"] = "team-a"
        ns_rt["metadata"]["labels"] = {"trainer.kubeflow.org/framework": "deepspeed"}
        rc, _, err = kt(kubeconfig, "apply", "-f", _write(tmp_path / "rt.yaml", torch_runtime(), ns_rt))
        assert rc == 0, err
        rc, out, _ = kt(kubeconfig, "get", "runtimes", "-A")
        lines = [line.split() for line in out.splitlines()]
        assert lines[0] == ["NAMESPACE", "KIND", "NAME", "FRAMEWORK", "NODES"]
        assert ["ClusterTrainingRuntime", "torch-distributed", "torch", "1"] in lines
        assert ["team-a", "TrainingRuntime", "team-rt", "deepspeed", "1"] in lines  # the label, not the ML policy
        rc, out, _ = kt(kubeconfig, "get", "runtimes", "-n", "team-a", "-o", "wide")
        assert out.splitlines()[0].split() == ["KIND", "NAME", "FRAMEWORK", "NODES", "ML", "POLICY", "SUPPORT"]


def test_delete_continues_past_missing_names_all_and_files(tmp_path: Path) -> None:
    with background_api(tmp_path) as (_, kubeconfig):
        f = _write(tmp_path / "jobs.yaml", *(trainjob(n) for n in ("a", "b", "c", "d")))
        assert kt(kubeconfig, "apply", "-f", _write(tmp_path / "rt.yaml", torch_runtime()))[0] == 0
        assert kt(kubeconfig, "apply", "-f", f)[0] == 0
        rc, out, err = kt(kubeconfig, "delete", "trainjob", "a", "missing", "b")
        assert rc == 1
        assert out.splitlines() == [
            'trainjob.trainer.kubeflow.org "a" deleted',
            'trainjob.trainer.kubeflow.org "b" deleted',
        ]
        assert 'trainjobs.trainer.kubeflow.org "missing" not found' in err
        never = torch_runtime("never-applied")
        rc, out, _ = kt(kubeconfig, "delete", "-f", _write(tmp_path / "c.yaml", trainjob("c"), never))
        assert rc == 1  # the runtime was never applied
        assert 'trainjob.trainer.kubeflow.org "c" deleted' in out
        rc, out, _ = kt(kubeconfig, "delete", "tj", "--all")
        assert rc == 0 and out == 'trainjob.trainer.kubeflow.org "d" deleted\n'
        rc, _, err = kt(kubeconfig, "get", "tj")
        assert "No TrainJobs found in namespace default." in err
        rc, _, err = kt(kubeconfig, "delete", "tj")
        assert rc == 1 and "give the names of the tj to delete, or --all" in err


def test_wait_condition_delete_jsonpath_and_timeout(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        assert kt(kubeconfig, "apply", "-f", _write(tmp_path / "j.yaml", torch_runtime(), trainjob("job")))[0] == 0

        def later() -> None:
            time.sleep(0.5)
            kubelet.trainjob_condition("job", "Complete", "JobSetCompleted", "done")

        threading.Thread(target=later).start()
        rc, out, err = kt(kubeconfig, "wait", "trainjob", "job", "--for=condition=complete", "--timeout=20s")
        assert (rc, out) == (0, "trainjob.trainer.kubeflow.org/job condition met\n"), err
        rc, out, _ = kt(
            kubeconfig, "wait", "tj", "job", "--for=jsonpath={.status.conditions[0].reason}=JobSetCompleted"
        )
        assert rc == 0
        rc, out, err = kt(kubeconfig, "wait", "tj", "job", "--for=condition=Failed", "--timeout=1s")
        assert rc == 1 and "timed out waiting for the condition on trainjobs/job" in err
        rc, _, err = kt(kubeconfig, "wait", "tj", "ghost", "--for=condition=Complete", "--timeout=1s")
        assert rc == 1 and 'trainjobs.trainer.kubeflow.org "ghost" not found' in err
        rc, out, _ = kt(kubeconfig, "wait", "tj", "ghost", "--for=delete", "--timeout=1s")
        assert rc == 0 and "ghost condition met" in out
        rc, _, err = kt(kubeconfig, "wait", "tj", "job", "--for=ready")
        assert rc == 1 and "unrecognized condition 'ready'" in err


def test_describe_as_data(tmp_path: Path) -> None:
    with background_api(tmp_path) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        assert kt(kubeconfig, "apply", "-f", _write(tmp_path / "j.yaml", torch_runtime(), trainjob("job")))[0] == 0
        kubelet.create_jobset("job")
        kubelet.create_pod(pod_manifest("job", "node", 0), running())
        rc, out, _ = kt(kubeconfig, "describe", "trainjob", "job", "-o", "json")
        assert rc == 0
        d = json.loads(out)
        assert d["trainJob"]["metadata"]["name"] == "job"
        assert d["state"]["state"] == "Running"
        assert d["steps"][0]["name"] == "node-0-0" and d["steps"][0]["state"] == "Running"
        rc, out, _ = kt(kubeconfig, "describe", "trainjob", "job", "-o", "yaml")
        assert yaml.safe_load(out)["state"]["state"] == "Running"
        rc, out, _ = kt(kubeconfig, "describe", "trainjob", "job")
        assert "State:" in out and "Running (1/1 trainer pods running)" in out


def _write(path: Path, *docs: dict) -> str:
    path.write_text(yaml.safe_dump_all(list(docs), sort_keys=False))
    return str(path)
