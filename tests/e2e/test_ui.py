"""``kubetrain ui`` on the bed (issue #19): the command as a user starts it, a TrainJob submitted from the form, the
installed operator compiling it and the JobSet controller and kubelet running its pod, the page following the pod, its
real log lines, progress the pod reports with its projected token, completion, a confirmed delete, and the API
server's 403 for a user without rights shown as such. Nothing is written by the test that a controller would write."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.backend.cluster import ClusterBackend
from kubetrain.k8s.client import Client, Resource
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import (
    KUBECONFIG,
    DeployedOperator,
    call,
    get,
    kubectl,
    list_of,
    pod_spec,
    pods_of,
    setup_runtime,
    wait_until,
)
from tests.ui.harness import browser_session, js_errors, wait_for
from tests.ui.test_browser_local import _attr, _keys, _text

pytestmark = pytest.mark.e2e


@pytest.fixture
def browser() -> Iterator[Any]:
    with browser_session() as driver:
        yield driver


class UiProcess:
    """``kubetrain ui`` as a user starts it; ``url`` is the address with the session token it printed."""

    def __init__(self, kubeconfig: str, namespace: str) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kubetrain.cli.main",
                "ui",
                "--kubeconfig",
                kubeconfig,
                "-n",
                namespace,
                "--port",
                "0",
                "--no-browser",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        self.url = ""
        for line in self.proc.stdout:
            if m := re.match(r"open (http://127\.0\.0\.1:\d+)/\?token=\S+$", line.strip()):
                self.url, self.base = line.split(" ", 1)[1].strip(), m.group(1)
                break
        if not self.url:
            err = self.proc.stderr.read() if self.proc.stderr else ""
            raise AssertionError(f"kubetrain ui printed no address: {err}")

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGINT)
        _, err = self.proc.communicate(timeout=30)
        return err


# Reports progress and a loss to the operator's status endpoint with the kubelet's projected token, as the SDK's
# update_trainjob_status does.
REPORT = textwrap.dedent(
    """
    import json, os, ssl, sys, time, urllib.request

    def report(percent, loss):
        token = open(os.environ["KUBEFLOW_TRAINER_SERVER_TOKEN"]).read().strip()
        tls = ssl.create_default_context(cafile=os.environ["KUBEFLOW_TRAINER_SERVER_CA_CERT"])
        body = {"trainerStatus": {"progressPercentage": percent, "lastUpdatedTime": time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "metrics": [{"name": "loss", "value": str(loss)}]}}
        req = urllib.request.Request(os.environ["KUBEFLOW_TRAINER_SERVER_URL"], data=json.dumps(body).encode(),
                                     method="POST", headers={"Content-Type": "application/json",
                                                             "Authorization": "Bearer " + token})
        urllib.request.urlopen(req, context=tls, timeout=30).read()
        print(f"step {percent}% loss={loss}", flush=True)
    """
)

# The trainer: reports once at the start and once more when the test says the page has drawn the first point (a
# file the test creates with kubectl exec), then waits for another file and ends.
REPORTER = REPORT + textwrap.dedent(
    """
    def wait_for(path):
        while not os.path.exists(path):
            time.sleep(0.2)

    report(40, 0.9)
    wait_for("/tmp/next")
    report(80, 0.4)
    wait_for("/tmp/done")
    print("training done", flush=True)
    """
)


def _touch(pod: str, ns: str, path: str) -> None:
    kubectl("exec", "-n", ns, pod, "-c", "node", "--", "touch", path)


def test_the_ui_on_a_real_cluster(browser: Any, kubeconfig: str, namespace: str, operator: DeployedOperator) -> None:
    spec = pod_spec()
    spec["containers"][0]["env"] = [{"name": "REPORTER", "value": REPORTER}]
    runtime = setup_runtime(namespace, spec=spec)
    name = f"ui-{uuid.uuid4().hex[:5]}"
    with ui_for_test(kubeconfig, namespace, r.TRAINJOB, name) as ui:
        browser.get(ui.url)
        browser.get(f"{ui.base}/submit?runtime=TrainingRuntime/{namespace}/{runtime}&namespace={namespace}")
        wait_for(browser, lambda d: _text(d, "#check-state") == "valid", what="the form checked against the cluster")
        field = browser.find_element("css selector", 'input[name="name"]')
        field.clear()
        field.send_keys(name)
        # The kubelet expands $(REPORTER) from the container's environment, as it would any command's.
        browser.find_element("css selector", 'input[name="command"]').send_keys("python3 -c $(REPORTER)")
        wait_for(browser, lambda d: name in _text(d, "#preview"), what="the preview")
        browser.find_element("css selector", "#submit-button").click()
        wait_for(browser, lambda d: d.current_url.endswith(f"/trainjobs/{namespace}/{name}"), what="the job's page")
        wait_until(lambda: get(r.JOBSET, name, namespace), what="the operator's JobSet")
        backend = ClusterBackend(kubeconfig, None)

        def as_describe_says(d: Any) -> bool:
            st = backend.describe_trainjob(name, namespace).state
            assert st is not None
            return st.state == "Running" and _text(d, "#state .state") == "Running" and "node-0-0" in _text(d, "#steps")

        wait_for(browser, as_describe_says, timeout=120, what="the pod Running, as kubetrain describe says it")
        (pod,) = pods_of(name, namespace)
        pod_name = pod["metadata"]["name"]
        wait_for(
            browser,
            lambda d: _attr(d, '.chart[data-metric="loss"]', "data-drawn") == "1",
            timeout=60,
            what="the first reported point",
        )
        wait_for(browser, lambda d: "step 40% loss=0.9" in _text(d, "#log"), timeout=60, what="the pod's log line")
        _touch(pod_name, namespace, "/tmp/next")
        wait_for(
            browser,
            lambda d: _attr(d, '.chart[data-metric="loss"]', "data-drawn") == "2",
            timeout=60,
            what="the second point",
        )
        wait_for(browser, lambda d: "step 80% loss=0.4" in _text(d, "#log"), timeout=60, what="the next log line")
        _touch(pod_name, namespace, "/tmp/done")
        wait_for(browser, lambda d: _text(d, "#state .state") == "Complete", timeout=120, what="Complete")
        backend.close()
        browser.refresh()
        wait_for(
            browser,
            lambda d: (
                "kind: JobSet"
                in str(d.execute_script("return document.querySelector('#jobset-yaml pre')?.textContent || ''"))
            ),
            what="the compiled JobSet",
        )
        browser.get(f"{ui.base}/trainjobs")
        wait_for(browser, lambda d: f"{namespace}/{name}" in _keys(d), what="on the list")
        assert _text(browser, f'tr[data-key="{namespace}/{name}"] .state') == "Complete"
        browser.find_element("link text", name).click()
        browser.find_element("css selector", "#delete").click()
        browser.find_element("css selector", "#confirm-ok").click()
        wait_for(browser, lambda d: "/trainjobs?namespace=" in d.current_url, what="back on the list")
        wait_for(browser, lambda d: f"{namespace}/{name}" not in _keys(d), what="deleted")
        wait_until(lambda: get(r.TRAINJOB, name, namespace) is None, what="gone from the API server")
        assert js_errors(browser) == []


@contextlib.contextmanager
def ui_for_test(kubeconfig: str, namespace: str, made: Resource, name: str) -> Iterator[UiProcess]:
    """``kubetrain ui`` for one test: what it printed goes to the test's output when the test fails, it never
    printed a traceback, and the object the test made (``made`` ``name``) is deleted however the test ends."""
    ui = UiProcess(kubeconfig, namespace)
    try:
        yield ui
    except AssertionError:
        print(ui.stop(), file=sys.stderr)
        raise
    finally:
        err = ui.stop() if ui.proc.poll() is None else ""
        call(lambda c: _delete_quietly(c, made, name, namespace))
    assert "Traceback" not in err, err


async def _delete_quietly(c: Client, made: Resource, name: str, ns: str) -> None:
    from kubetrain.k8s.client import NotFound

    try:
        await c.delete(made, name, ns)
    except NotFound:
        pass


def test_a_user_without_rights_sees_the_403(browser: Any, namespace: str, tmp_path: Path) -> None:
    assert KUBECONFIG
    doc = yaml.safe_load(Path(KUBECONFIG).read_text())
    ctx = next(c for c in doc["contexts"] if c["name"] == doc["current-context"])["context"]
    for user in doc["users"]:
        if user["name"] == ctx["user"]:
            user["user"]["as"] = "kubetrain-e2e-nobody"  # impersonated, as kubectl --as: no RBAC binding at all
            user["user"]["as-groups"] = ["system:authenticated"]
    nobody = tmp_path / "nobody.kubeconfig"
    nobody.write_text(yaml.safe_dump(doc))
    os.chmod(nobody, 0o600)
    ui = UiProcess(str(nobody), namespace)
    try:
        browser.get(ui.url)
        wait_for(
            browser, lambda d: "403" in _text(d, "#list-error") or "403" in _text(d, ".notice.error"), what="the 403"
        )
        text = _text(browser, "main")
        assert 'User "kubetrain-e2e-nobody" cannot list resource "trainjobs"' in text
        assert "ask a cluster admin" in text
    finally:
        err = ui.stop()
    assert "Traceback" not in err, err


# A trial: reports the objective (x - 0.3)² for its value of x, and ends.
TRIAL_REPORTER = REPORT + textwrap.dedent(
    """
    x = float(sys.argv[1])
    report(100, (x - 0.3) ** 2)
    """
)


def test_a_search_from_the_ui_on_a_real_cluster(
    browser: Any, kubeconfig: str, namespace: str, operator: DeployedOperator
) -> None:
    """Issue #27 in the UI on the bed: an OptimizationJob submitted from the form, the operator's controller running
    its trials as real pods, the page following them live (best first, the objective against the parameter), the
    list, and delete taking the trials with it."""
    spec = pod_spec()
    spec["containers"][0]["env"] = [{"name": "TRIAL_REPORTER", "value": TRIAL_REPORTER}]
    runtime = setup_runtime(namespace, spec=spec)
    name = f"ui-oj-{uuid.uuid4().hex[:5]}"
    with ui_for_test(kubeconfig, namespace, r.OPTIMIZATIONJOB, name) as ui:
        browser.get(ui.url)
        browser.get(
            f"{ui.base}/submit?runtime=TrainingRuntime/{namespace}/{runtime}&namespace={namespace}&search=1"
        )
        for field, value in (
            ("name", name),
            ("command", "python3 -c $(TRIAL_REPORTER) {{.x}}"),
            ("parameters", "x = uniform(0, 1)"),
            ("numTrials", "3"),
            ("parallelTrials", "2"),
            ("seed", "7"),
        ):
            element = browser.find_element("css selector", f'[name="{field}"]')
            element.clear()
            element.send_keys(value)
        wait_for(
            browser,
            lambda d: _text(d, "#check-state") == "valid" and "kind: OptimizationJob" in _text(d, "#preview"),
            what="the search checked against the cluster",
        )
        browser.find_element("css selector", "#submit-button").click()
        wait_for(
            browser,
            lambda d: d.current_url.endswith(f"/optimizationjobs/{namespace}/{name}"),
            what="the search's page",
        )
        wait_until(lambda: get(r.OPTIMIZATIONJOB, name, namespace), what="the OptimizationJob on the API server")
        wait_for(browser, lambda d: _text(d, "#state .state") == "Complete", timeout=600, what="the search Complete")
        rows = browser.execute_script(
            """return [...document.querySelectorAll('#trials tbody tr')].map((r) => [
            r.dataset.trial, r.querySelector('.state').innerText, r.querySelector('.objective').innerText,
            r.className])"""
        )
        assert [r[1] for r in rows] == ["Complete"] * 3, rows
        objectives = [float(r[2]) for r in rows]
        assert objectives == sorted(objectives)  # best first
        best = rows[0][0]
        assert rows[0][3] == "best"
        status = (get(r.OPTIMIZATIONJOB, name, namespace) or {}).get("status") or {}
        assert status["result"]["trainJobName"] == best  # what the operator wrote, as the page shows it
        chart = '.chart[data-parameter="x"]'
        wait_for(browser, lambda d: _attr(d, chart, "data-drawn") == "3", what="loss against x, 3 points")
        browser.get(f"{ui.base}/optimizationjobs")
        row = f'tr[data-key="{namespace}/{name}"]'
        wait_for(browser, lambda d: _text(d, f"{row} .state") == "Complete", what="the list row")
        assert _text(browser, f"{row} .best") == best
        browser.get(f"{ui.base}/optimizationjobs/{namespace}/{name}")
        wait_for(browser, lambda d: _text(d, "#live") in ("finished", "live"), what="the page connected")
        browser.find_element("css selector", "#delete").click()
        browser.switch_to.alert.accept()
        wait_for(browser, lambda d: _text(d, "#live") == "deleted", what="deleted")
        wait_until(lambda: get(r.OPTIMIZATIONJOB, name, namespace) is None, what="gone from the API server")
        wait_until(
            lambda: not list_of(r.TRAINJOB, namespace, f"kubetrain.dev/optimizationjob={name}"),
            180,
            "the trials garbage-collected",
        )
        assert js_errors(browser) == []
