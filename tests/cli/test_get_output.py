"""``kubetrain get`` with kubectl's output habits against a cluster (the in-memory API server): ``-o jsonpath=``,
``-o jsonpath-file=``, ``-o custom-columns=``, ``-o custom-columns-file=``, ``--sort-by`` on every kind, and
``get pods``/``get events`` passed through to the API with label and field selectors. Errors exit 1 with the flag,
where and the fix, never a traceback. (The same locally, over a real run: ``tests/local/test_pod_objects.py``.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kubetrain.cli.main import cli
from tests.k8s.helpers import torch_runtime, trainjob
from tests.k8s.kubelet import Kubelet, crash_loop, pod_manifest, running, terminated
from tests.k8s.threaded import Background, background_api


def kt(kubeconfig: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--kubeconfig", kubeconfig])
    assert "Traceback" not in result.stdout + result.stderr
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Background, str]]:
    """Three TrainJobs, the pods of two of them (running, crash-looping, completed) and some events."""
    tmp = tmp_path_factory.mktemp("cluster")
    with background_api(tmp) as (bg, kubeconfig):
        jobs = []
        for name, team in (("b-job", "vision"), ("a-job", "nlp"), ("c-job", "vision")):
            tj = trainjob(name, trainer={"numNodes": 2})
            tj["metadata"]["labels"] = {"team": team}
            jobs.append(tj)
        path = tmp / "jobs.yaml"
        path.write_text(yaml.safe_dump_all([torch_runtime(), *jobs], sort_keys=False))
        rc, _, err = kt(kubeconfig, "apply", "-f", str(path))
        assert rc == 0, err
        kubelet = Kubelet(bg)
        a0 = pod_manifest("a-job", "node", 0, 0, suffix="aaaaa")
        a0["spec"]["nodeName"] = "w1"
        kubelet.create_pod(a0, {**running(), "podIP": "10.1.0.7"})
        kubelet.create_pod(pod_manifest("a-job", "node", 0, 1, suffix="bbbbb"), crash_loop(3, 1))
        kubelet.create_pod(pod_manifest("b-job", "node", 0, 0, suffix="ccccc"), terminated(0))
        kubelet.event("Pod", "a-job-node-0-1-bbbbb", "BackOff", "Back-off restarting failed container", "Warning")
        kubelet.event("TrainJob", "a-job", "Created", "JobSet a-job created")
        kubelet.event("TrainJob", "b-job", "Completed", "  done  ")
        yield bg, kubeconfig


def test_jsonpath_gives_a_list_for_many_and_the_object_for_one_name(cluster: tuple[Background, str]) -> None:
    _, kc = cluster
    rc, out, _ = kt(kc, "get", "tj", "-o", "jsonpath={.kind} {.items[*].metadata.name}", "--sort-by", ".metadata.name")
    assert (rc, out) == (0, "List a-job b-job c-job")  # no newline added, as kubectl
    rc, out, _ = kt(kc, "get", "tj", "b-job", "-o", "jsonpath={.kind}/{.metadata.name}/{.metadata.labels.team}")
    assert (rc, out) == (0, "TrainJob/b-job/vision")
    rc, out, _ = kt(kc, "get", "tj", "b-job", "c-job", "-o", "jsonpath={.items[*].metadata.name}")
    assert out == "b-job c-job"
    rc, out, _ = kt(kc, "get", "tj", "-l", "team=vision", "-o", "jsonpath={.kind}")
    assert out == "List"  # a selector always gives a List, whatever it matched
    template = (
        '{range .items[?(@.metadata.labels.team=="vision")]}{.metadata.name}{"\\t"}{.spec.trainer.numNodes}{"\\n"}'
        "{end}"
    )
    rc, out, _ = kt(kc, "get", "trainjobs", "-o", f"jsonpath={template}", "--sort-by", "{.metadata.name}")
    assert out == "b-job\t2\nc-job\t2\n"


def test_jsonpath_missing_keys_and_errors(cluster: tuple[Background, str], tmp_path: Path) -> None:
    _, kc = cluster
    rc, out, err = kt(kc, "get", "tj", "a-job", "-o", "jsonpath=[{.metadata.nothere}]")
    assert (rc, out, err) == (0, "[]", "")  # --allow-missing-template-keys defaults to true
    rc, out, err = kt(
        kc, "get", "tj", "a-job", "-o", "jsonpath={.metadata.nothere}", "--allow-missing-template-keys=false"
    )
    assert rc == 1 and out == ""
    assert 'error: error executing jsonpath "{.metadata.nothere}": nothere is not found' in err
    assert "drop --allow-missing-template-keys=false" in err
    rc, out, err = kt(kc, "get", "tj", "-o", "jsonpath={.items[7]}")
    assert rc == 1 and "array index out of bounds: index 7, length 3" in err
    rc, out, err = kt(kc, "get", "tj", "-o", "jsonpath={.items[?(@.kind=TrainJob)]}")
    assert rc == 1 and out == ""
    assert "error: -o jsonpath: cannot parse the template at position 17: unrecognized filter operator '='" in err
    assert "  {.items[?(@.kind=TrainJob)]}\n" in err and "\n  " + " " * 16 + "^\n" in err
    assert "fix: use == to compare" in err
    rc, _, err = kt(kc, "get", "tj", "-o", "jsonpath")
    assert rc == 1 and "-o jsonpath: no template given after 'jsonpath='" in err
    rc, _, err = kt(kc, "get", "tj", "-o", "yml")
    assert rc == 1 and "-o/--output: unknown format 'yml' (fix: use one of table, wide, yaml, json, name" in err

    tmpl = tmp_path / "names.tmpl"
    tmpl.write_text('{range .items[*]}{.metadata.name}{"\\n"}{end}')
    rc, out, _ = kt(kc, "get", "tj", "-o", f"jsonpath-file={tmpl}", "--sort-by", "metadata.name")
    assert out == "a-job\nb-job\nc-job\n"
    rc, _, err = kt(kc, "get", "tj", "-o", f"jsonpath-file={tmp_path / 'missing.tmpl'}")
    assert rc == 1 and "-o jsonpath-file: cannot read" in err and "No such file or directory" in err


def test_custom_columns_inline_and_from_a_file(cluster: tuple[Background, str], tmp_path: Path) -> None:
    _, kc = cluster
    spec = "NAME:.metadata.name,TEAM:{.metadata.labels.team},NODES:spec.trainer.numNodes,GONE:.status.nothere"
    rc, out, _ = kt(kc, "get", "tj", "-o", f"custom-columns={spec}", "--sort-by", ".metadata.name")
    assert rc == 0
    assert [line.split() for line in out.splitlines()] == [
        ["NAME", "TEAM", "NODES", "GONE"],
        ["a-job", "nlp", "2", "<none>"],
        ["b-job", "vision", "2", "<none>"],
        ["c-job", "vision", "2", "<none>"],
    ]
    rc, out, _ = kt(
        kc, "get", "tj", "c-job", "-o", "custom-columns=N:.metadata.name,L:.metadata.labels", "--no-headers"
    )
    assert out.split() == ["c-job", "map[team:vision]"]  # values as kubectl's fmt.Sprint writes them
    rc, out, _ = kt(kc, "get", "runtimes", "-o", "custom-columns=KIND:.kind,NAME:.metadata.name")
    assert out.splitlines()[1].split() == ["ClusterTrainingRuntime", "torch-distributed"]

    columns = tmp_path / "cols.txt"
    columns.write_text("NAME      TEAM\n.metadata.name   .metadata.labels.team\n")
    rc, out, _ = kt(kc, "get", "tj", "-o", f"custom-columns-file={columns}", "--sort-by", "{.metadata.labels.team}")
    assert [line.split() for line in out.splitlines()] == [["NAME", "TEAM"], ["a-job", "nlp"], ["b-job", "vision"],
                                                           ["c-job", "vision"]]
    columns.write_text("NAME TEAM\n.metadata.name\n")
    rc, _, err = kt(kc, "get", "tj", "-o", f"custom-columns-file={columns}")
    assert rc == 1 and "number of headers (2) and field specifications (1) don't match" in err
    rc, _, err = kt(kc, "get", "tj", "-o", "custom-columns=NAME")
    assert rc == 1 and "unexpected custom-columns spec 'NAME', expected <header>:<json-path-expr>" in err
    rc, _, err = kt(kc, "get", "tj", "-o", "custom-columns=NAME:.metadata[")
    assert rc == 1 and "-o custom-columns (NAME): cannot parse the template" in err


def test_sort_by_takes_kubectls_paths_on_every_kind(cluster: tuple[Background, str]) -> None:
    _, kc = cluster
    rc, out, _ = kt(kc, "get", "tj", "--sort-by", "{.metadata.name}", "--no-headers")
    assert [line.split()[0] for line in out.splitlines()] == ["a-job", "b-job", "c-job"]
    rc, out, _ = kt(kc, "get", "pods", "--sort-by", ".metadata.name", "-o", "name")
    assert out.splitlines() == ["pod/a-job-node-0-0-aaaaa", "pod/a-job-node-0-1-bbbbb", "pod/b-job-node-0-0-ccccc"]
    rc, out, _ = kt(kc, "get", "pods", "--sort-by", ".status.containerStatuses[0].restartCount", "-o", "name")
    assert out.splitlines()[-1] == "pod/a-job-node-0-1-bbbbb"  # 3 restarts: last
    rc, _, err = kt(kc, "get", "tj", "--sort-by", ".metadata.nmae")
    assert rc == 1 and 'couldn\'t find any field with path "{.metadata.nmae}" in the list of objects' in err
    rc, _, err = kt(kc, "get", "tj", "--sort-by", "{.a}{.b}")
    assert rc == 1 and "--sort-by: unexpected path '{.a}{.b}'" in err


def test_get_pods_like_kubectl_with_label_and_field_selectors(cluster: tuple[Background, str]) -> None:
    _, kc = cluster
    rc, out, _ = kt(kc, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=a-job")
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert rows[1][:4] == ["a-job-node-0-0-aaaaa", "1/1", "Running", "0"]
    assert rows[2][:4] == ["a-job-node-0-1-bbbbb", "0/1", "CrashLoopBackOff", "3"]
    rc, out, _ = kt(kc, "get", "pods", "a-job-node-0-0-aaaaa", "-o", "wide")
    assert out.splitlines()[0].split()[5:] == ["IP", "NODE", "NOMINATED", "NODE", "READINESS", "GATES"]
    assert out.splitlines()[1].split()[5:] == ["10.1.0.7", "w1", "<none>", "<none>"]
    rc, out, _ = kt(kc, "get", "pods", "--field-selector", "status.phase=Succeeded", "-o", "name")
    assert out == "pod/b-job-node-0-0-ccccc\n"
    rc, out, _ = kt(kc, "get", "pods", "--field-selector", "status.phase!=Succeeded,spec.nodeName=w1", "-o", "name")
    assert out == "pod/a-job-node-0-0-aaaaa\n"
    rc, out, _ = kt(
        kc, "get", "po", "-l", "jobset.sigs.k8s.io/jobset-name=b-job", "-o", "jsonpath={.items[0].status.phase}"
    )
    assert out == "Succeeded"
    rc, out, _ = kt(kc, "get", "pods", "-o", "yaml", "--field-selector", "metadata.name=b-job-node-0-0-ccccc")
    assert yaml.safe_load(out)["kind"] == "Pod"
    rc, _, err = kt(kc, "get", "pods", "--field-selector", "spec.containers=x")
    assert rc == 1 and "field label not supported for pods: 'spec.containers' (fix: use one of metadata.name" in err
    rc, _, err = kt(kc, "get", "pods", "x", "--field-selector", "status.phase=Running")
    assert rc == 1 and "a name and --field-selector cannot be used together" in err
    rc, _, err = kt(kc, "get", "pods", "nope")
    assert rc == 1 and 'pods "nope" not found in namespace "default"' in err
    rc, _, err = kt(kc, "get", "pods", "-n", "empty")
    assert rc == 0 and "No resources found in namespace empty." in err


def test_get_events_like_kubectl(cluster: tuple[Background, str]) -> None:
    _, kc = cluster
    rc, out, _ = kt(kc, "get", "events", "--field-selector", "involvedObject.name=a-job")
    rows = out.splitlines()
    assert rows[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert rows[1].split()[1:] == ["Normal", "Created", "trainjob/a-job", "JobSet", "a-job", "created"]
    assert len(rows) == 2
    rc, out, _ = kt(kc, "get", "ev", "--field-selector", "type=Warning", "-o", "wide")
    header, row = out.splitlines()
    assert header.split()[:9] == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE",
                                  "FIRST"]
    assert "pod/a-job-node-0-1-bbbbb" in row and "Back-off restarting failed container" in row
    rc, out, _ = kt(kc, "get", "events", "-o", "jsonpath={range .items[*]}{.reason}:{.message}|{end}",
                    "--sort-by", ".reason")
    assert rc == 0
    assert out == "BackOff:Back-off restarting failed container|Completed:  done  |Created:JobSet a-job created|"
    _, out, _ = kt(kc, "get", "events", "-o", "json", "--field-selector", "reason=Completed")
    assert json.loads(out)["message"] == "  done  "


def test_wait_for_jsonpath_speaks_the_same_dialect(cluster: tuple[Background, str]) -> None:
    _, kc = cluster
    rc, out, _ = kt(kc, "wait", "tj", "a-job", "--for=jsonpath={.metadata.labels.team}=nlp", "--timeout=5s")
    assert (rc, out) == (0, "trainjob.trainer.kubeflow.org/a-job condition met\n")
    rc, out, _ = kt(kc, "wait", "tj", "a-job", "--for=jsonpath=.spec.trainer.numNodes=2", "--timeout=5s")
    assert rc == 0
    rc, _, err = kt(kc, "wait", "tj", "a-job", "--for=jsonpath={.metadata.*}=x", "--timeout=5s")
    assert rc == 1 and "given jsonpath expression matches more than one value ({.metadata.*})" in err
    rc, _, err = kt(kc, "wait", "tj", "a-job", "--for=jsonpath={.metadata.labels}=x", "--timeout=5s")
    assert rc == 1 and "jsonpath leads to a nested object or list which is not supported" in err
    rc, _, err = kt(kc, "wait", "tj", "a-job", "--for=jsonpath={.metadata[}=x", "--timeout=5s")
    assert rc == 1 and "--for=jsonpath: cannot parse the template at position 11: unterminated array" in err
