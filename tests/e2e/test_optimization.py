"""OptimizationJobs on the bed: the CRD as the real API server serves it (upstream's CEL rules, ``kubectl explain``),
the admission webhook, and the operator's controller running real trials: the quickstart's learning rate tuned over
6 trials of 2 torch nodes, 2 at a time, each reporting its loss through the operator's status endpoint; then the
same search's trials garbage-collected with it. And ``Client.optimize`` against the cluster."""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.client import resources as r
from kubetrain.testing.reports import REPORT_ONCE
from tests.builders import optimizationjob
from tests.e2e.conftest import (
    IMAGE,
    KUBECONFIG,
    REPO,
    DeployedOperator,
    get,
    kubectl,
    kubetrain,
    list_of,
    wait_until,
)

pytestmark = pytest.mark.e2e
QUICKSTART = REPO / "examples" / "quickstart"


def oj_status(name: str, ns: str) -> dict[str, Any]:
    return (get(r.OPTIMIZATIONJOB, name, ns) or {}).get("status") or {}


def oj_state(name: str, ns: str) -> dict[str, Any] | None:
    conds = {c["type"]: c for c in oj_status(name, ns).get("conditions") or []}
    return next((conds[t] for t in ("Complete", "Failed") if conds.get(t, {}).get("status") == "True"), None)


def trials(name: str, ns: str) -> list[dict[str, Any]]:
    return list_of(r.TRAINJOB, ns, f"kubetrain.dev/optimizationjob={name}")


def test_the_api_server_enforces_upstreams_rules_and_explains_the_kind(fresh_namespace: str,
                                                                      operator: DeployedOperator) -> None:
    ns = fresh_namespace
    explained = kubectl("explain", "optimizationjob.spec.parameters.searchSpace.logUniform").stdout
    assert "min" in explained and "max" in explained and "greater than 0" in explained
    bad = optimizationjob("bad", parallelTrials=9)
    bad["metadata"]["namespace"] = ns
    refused = kubectl("apply", "--server-side", "-f", "-", input=json.dumps(bad), check=False)
    assert refused.returncode != 0
    assert "parallelTrials cannot exceed numTrials" in refused.stderr
    # What only the webhook knows: a placeholder naming no parameter, the template's runtime.
    typo = optimizationjob("typo", trainer={"command": ["python", "t.py", "--lr={{.lrr}}", "{{.bs}}"]})
    typo["metadata"]["namespace"] = ns
    refused = kubectl("apply", "--server-side", "-f", "-", input=json.dumps(typo), check=False)
    assert refused.returncode != 0
    assert "placeholder {{.lrr}} names no parameter" in refused.stderr and "did you mean {{.lr}}?" in refused.stderr
    # Immutable spec, mutable labels.
    ok = optimizationjob("ok", numTrials=1, parallelTrials=1, trainer={"command": ["sh", "-c", "exit 1", "{{.lr}}",
                                                                                   "{{.bs}}"]})
    ok["metadata"]["namespace"] = ns
    kubectl("apply", "--server-side", "-f", "-", input=json.dumps(ok))
    changed = copy.deepcopy(ok)
    changed["spec"]["numTrials"] = 2
    refused = kubectl("apply", "--server-side", "-f", "-", input=json.dumps(changed), check=False)
    assert refused.returncode != 0 and "OptimizationJobSpec is immutable" in refused.stderr
    kubectl("label", "optimizationjob", "ok", "team=vision", "-n", ns)
    kubectl("delete", "optimizationjob", "ok", "-n", ns)


def test_the_quickstart_learning_rate_tuned_on_the_cluster(fresh_namespace: str, operator: DeployedOperator,
                                                          tmp_path: Path) -> None:
    ns = fresh_namespace
    kubectl("create", "configmap", "quickstart-code", f"--from-file={QUICKSTART / 'train.py'}", "-n", ns)
    search = yaml.safe_load((QUICKSTART / "tune-lr.yaml").read_text())
    cluster = yaml.safe_load((QUICKSTART / "cluster.yaml").read_text())
    spec = search["spec"]["trainJobTemplate"]["spec"]
    spec["trainer"]["image"] = IMAGE
    spec["runtimePatches"] = cluster["spec"]["runtimePatches"]  # the code from the ConfigMap, as cluster.yaml
    path = tmp_path / "tune-lr.yaml"
    path.write_text(yaml.safe_dump(search))
    out = kubetrain("apply", "-f", str(path), "-n", ns).stdout
    assert "optimizationjob.trainer.kubeflow.org/quickstart-lr" in out
    wait_until(lambda: len(trials("quickstart-lr", ns)) == 2, 120, "the first two trials")
    # Never more than parallelTrials unfinished trials, watched while the search runs.
    most = 0

    def done() -> dict[str, Any] | None:
        nonlocal most
        unfinished = [t for t in trials("quickstart-lr", ns) if not any(
            c["type"] in ("Complete", "Failed") and c["status"] == "True"
            for c in (t.get("status") or {}).get("conditions") or [])]
        most = max(most, len(unfinished))
        return oj_state("quickstart-lr", ns)

    end = wait_until(done, 2400, "the search to finish",
                     lambda: kubetrain("describe", "oj", "quickstart-lr", "-n", ns, check=False).stdout)
    assert (end["type"], end["reason"]) == ("Complete", "MaxTrialsReached"), end
    assert most <= 2
    shown = json.loads(kubetrain("describe", "oj", "quickstart-lr", "-n", ns, "-o", "json").stdout)
    listed = shown["trials"]
    assert len(listed) == 6 and {t["state"] for t in listed} == {"Complete"}
    scored = [t["objective"] for t in listed if t["objective"] is not None]
    assert len(scored) >= 5 and scored == sorted(scored)
    best = listed[0]
    result = oj_status("quickstart-lr", ns)["result"]
    assert result["trainJobName"] == best["name"] == shown["best"]
    assert result["parameters"] == [{"name": "lr", "value": best["parameters"]["lr"]}]
    table = kubetrain("describe", "oj", "quickstart-lr", "-n", ns).stdout
    print(table)
    assert f"{best['name']}*" in table
    # Each trial is owned by the search: deleting it deletes them (the garbage collector).
    uid = get(r.OPTIMIZATIONJOB, "quickstart-lr", ns)["metadata"]["uid"]  # type: ignore[index]
    for t in trials("quickstart-lr", ns):
        (ref,) = t["metadata"]["ownerReferences"]
        assert (ref["kind"], ref["uid"], ref["controller"], ref["blockOwnerDeletion"]) == (
            "OptimizationJob", uid, True, True)
    kubetrain("delete", "oj", "quickstart-lr", "-n", ns)
    wait_until(lambda: not trials("quickstart-lr", ns), 180, "the trials garbage-collected")




def test_client_optimize_against_the_cluster(fresh_namespace: str, operator: DeployedOperator) -> None:
    from kubetrain import Client, GridSearch, Objective, Search

    client = Client(namespace=fresh_namespace, kubeconfig=KUBECONFIG)
    name = client.optimize(
        command=["python3", "-c", REPORT_ONCE, "{{.x}}"], image=IMAGE, num_nodes=1, name="grid-x",
        search_space={"x": Search.choice([0.1, 0.3, 0.9])}, algorithm=GridSearch(),
        objectives=Objective("loss", "Minimize"), num_trials=3, parallel_trials=3,
    )
    view = client.wait_for_optimization_job(name, timeout=900, poll=2)
    assert (view.state, view.reason) == ("Complete", "MaxTrialsReached"), view.message
    best = client.get_best_results(name)
    assert best is not None and best.parameters == {"x": "0.3"} and best.objective == 0.0
    assert [t.parameters["x"] for t in view.trials] == ["0.3", "0.1", "0.9"]
    started = time.monotonic()
    client.delete_optimization_job(name)
    wait_until(lambda: not trials(name, fresh_namespace), 180, "the trials garbage-collected")
    assert time.monotonic() - started < 180
