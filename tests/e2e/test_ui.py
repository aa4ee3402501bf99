"""``kubetrain ui`` against a real kube-apiserver (issue #19): the command as a user starts it, a TrainJob submitted
from the form, the local operator process compiling it, the page following its pod, progress and completion, a
confirmed delete, and the API server's 403 for a user without rights shown as such.

As in ``test_cli_cluster.py`` the test stands in for the JobSet controller (it makes the pod and completes the
JobSet); a node's kubelet, when the cluster has one, acts on the pod as it would."""

from __future__ import annotations

import datetime as dt
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.k8s.cli_backend import ClusterBackend
from kubetrain.k8s.client import Client
from kubetrain.k8s.client import resources as r
from tests.e2e.conftest import KUBECONFIG, OperatorProcess, call, complete_jobset, get, setup_runtime, wait_until
from tests.e2e.test_cli_cluster import make_pod, running
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
            [sys.executable, "-m", "kubetrain.cli.main", "ui", "--kubeconfig", kubeconfig, "-n", namespace,
             "--port", "0", "--no-browser"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
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


def _report(name: str, ns: str, percent: int, loss: float) -> None:
    ts = {"progressPercentage": percent, "lastUpdatedTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
          "metrics": [{"name": "loss", "value": str(loss)}]}
    call(lambda c: c.patch_status(r.TRAINJOB, name, ns, {"trainerStatus": ts}))


def test_the_ui_on_a_real_cluster(browser: Any, kubeconfig: str, namespace: str) -> None:
    runtime = setup_runtime(namespace)
    op = OperatorProcess(kubeconfig, namespace, "--namespace", namespace).start()
    ui = UiProcess(kubeconfig, namespace)
    name = f"ui-{uuid.uuid4().hex[:5]}"
    try:
        browser.get(ui.url)
        browser.get(f"{ui.base}/submit?runtime=TrainingRuntime/{namespace}/{runtime}&namespace={namespace}")
        wait_for(browser, lambda d: _text(d, "#check-state") == "valid", what="the form checked against the cluster")
        field = browser.find_element("css selector", 'input[name="name"]')
        field.clear()
        field.send_keys(name)
        browser.find_element("css selector", 'input[name="command"]').send_keys("python train.py")
        wait_for(browser, lambda d: name in _text(d, "#preview"), what="the preview")
        browser.find_element("css selector", "#submit-button").click()
        wait_for(browser, lambda d: d.current_url.endswith(f"/trainjobs/{namespace}/{name}"), what="the job's page")
        wait_until(lambda: get(r.JOBSET, name, namespace), what="the operator's JobSet")
        # The pod, as its Job would make it. This cluster may have a real node whose kubelet then takes the pod
        # over (pulling its image, which may fail here): whatever the cluster says, the page must say the same as
        # `kubetrain describe`.
        make_pod(namespace, name, 0, running())
        backend = ClusterBackend(kubeconfig, None)

        def as_describe_says(d: Any) -> bool:
            st = backend.describe_trainjob(name, namespace).state
            assert st is not None
            return st.state != "Created" and _text(d, "#state .state") == st.state and "node-0-0" in _text(d, "#steps")

        wait_for(browser, as_describe_says, what="the pod's state, as kubetrain describe says it")
        _report(name, namespace, 40, 0.9)
        wait_for(browser, lambda d: _attr(d, '.chart[data-metric="loss"]', "data-drawn") == "1", what="a point")
        _report(name, namespace, 80, 0.4)
        wait_for(browser, lambda d: _attr(d, '.chart[data-metric="loss"]', "data-drawn") == "2", what="2 points")
        complete_jobset(name, namespace)
        wait_for(browser, lambda d: _text(d, "#state .state") == "Complete", timeout=60, what="Complete")
        backend.close()
        browser.refresh()
        wait_for(browser, lambda d: "kind: JobSet" in str(d.execute_script(
            "return document.querySelector('#jobset-yaml pre')?.textContent || ''")), what="the compiled JobSet")
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
    except AssertionError:
        print(ui.stop(), file=sys.stderr)
        print(op.log()[-5000:], file=sys.stderr)
        raise
    finally:
        err = ui.stop() if ui.proc.poll() is None else ""
        op.stop()
        call(lambda c: _delete_quietly(c, name, namespace))
    assert "Traceback" not in err, err


async def _delete_quietly(c: Client, name: str, ns: str) -> None:
    from kubetrain.k8s.client import NotFound

    try:
        await c.delete(r.TRAINJOB, name, ns)
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
        wait_for(browser, lambda d: "403" in _text(d, "#list-error") or "403" in _text(d, ".notice.error"),
                 what="the 403")
        text = _text(browser, "main")
        assert 'User "kubetrain-e2e-nobody" cannot list resource "trainjobs"' in text
        assert "ask a cluster admin" in text
    finally:
        err = ui.stop()
    assert "Traceback" not in err, err
