"""``kubetrain ui`` against a cluster (the in-memory API server with the operator; pods and logs written as a
kubelet would, ``tests/k8s/kubelet.py``), in headless Chromium: a TrainJob submitted from the form appears and
runs, its logs follow, its chart grows from the reports the page sees, its compiled JobSet is shown, and the
cluster's 403 is shown plainly, on an action and on a list. The real kube-apiserver: ``tests/e2e/test_ui.py``."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.k8s.backend.cluster import ClusterBackend
from tests.k8s.helpers import torch_runtime
from tests.k8s.kubelet import Kubelet, pod_manifest, running
from tests.k8s.threaded import Background, background_api
from tests.ui.harness import js_errors, running_ui, wait_for
from tests.ui.test_browser_local import _attr, _keys, _text


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Background, str]]:
    with background_api(tmp_path, operator=True) as (bg, kubeconfig):
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([torch_runtime()], namespace="default")
        backend.close()
        yield bg, kubeconfig


def _report(bg: Background, name: str, percent: int, loss: float) -> None:
    """What the operator's status endpoint writes for a report: status.trainerStatus (the API keeps the latest)."""
    store = bg.api.store

    async def go() -> None:
        live = store.get("trainer.kubeflow.org", "trainjobs", "default", name)
        live.setdefault("status", {})["trainerStatus"] = {
            "progressPercentage": percent,
            "lastUpdatedTime": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "metrics": [{"name": "loss", "value": str(loss)}],
        }
        store.replace("trainer.kubeflow.org", "trainjobs", "default", name, live, "status-endpoint", "status")

    bg.call(go())


def test_a_cluster_job_from_the_form_to_its_logs_chart_and_deletion(
    browser: Any, cluster: tuple[Background, str]
) -> None:
    bg, kubeconfig = cluster
    kubelet = Kubelet(bg)
    with running_ui(lambda: ClusterBackend(kubeconfig, None), cluster=True, label="cluster test") as ui:
        js_errors(browser)
        browser.get(ui.login_url)
        browser.get(ui.base + "/submit")
        wait_for(browser, lambda d: _text(d, "#check-state") == "valid", what="the form checked against the cluster")
        name = browser.find_element("css selector", 'input[name="name"]')
        name.clear()
        name.send_keys("from-form")
        browser.find_element("css selector", 'input[name="command"]').send_keys("python train.py --epochs 2")
        wait_for(browser, lambda d: "from-form" in _text(d, "#preview"), what="the preview")
        assert "- --epochs" in _text(browser, "#preview")
        browser.find_element("css selector", "#submit-button").click()
        wait_for(browser, lambda d: d.current_url.endswith("/trainjobs/default/from-form"), what="the job's page")
        trainjob = bg.api.store.get("trainer.kubeflow.org", "trainjobs", "default", "from-form")
        assert trainjob["spec"]["trainer"]["command"] == ["python", "train.py", "--epochs", "2"]

        # The operator compiles it; the page shows the JobSet once it exists (on reload) and the state live.
        wait_for(browser, lambda d: _has_jobset(bg, "from-form"), what="the operator's JobSet")
        pod = kubelet.create_pod(pod_manifest("from-form", "node", 0), running())
        wait_for(browser, lambda d: _text(d, "#state .state") == "Running", what="Running on the job's page")
        kubelet.log(pod, "hello from the cluster \x1b[32mgreen\x1b[0m\n")
        wait_for(browser, lambda d: "hello from the cluster green" in _text(d, "#log"), what="the pod's log line")
        assert [e.text for e in browser.find_elements("css selector", "#log .ansi-fg-2")] == ["green"]
        kubelet.log(pod, "second line\n")
        wait_for(browser, lambda d: "second line" in _text(d, "#log"), what="a followed line")

        # A cluster keeps the latest report only: the chart grows with what the page sees.
        _report(bg, "from-form", 10, 2.0)
        wait_for(browser, lambda d: _attr(d, '.chart[data-metric="loss"]', "data-drawn") == "1", what="1 point")
        _report(bg, "from-form", 50, 0.7)
        wait_for(browser, lambda d: _attr(d, '.chart[data-metric="loss"]', "data-drawn") == "2", what="2 points")
        assert _text(browser, "#progress .pct") == "50%"
        assert "what this page has seen since it opened" in _text(browser, "#charts-note")

        browser.refresh()
        wait_for(browser, lambda d: "kind: JobSet" in _attr_text(d, "#jobset-yaml pre"), what="the compiled JobSet")

        # The list shows it too.
        browser.get(ui.base + "/trainjobs")
        wait_for(browser, lambda d: _keys(d) == ["default/from-form"], what="on the list")
        assert _text(browser, 'tr[data-key="default/from-form"] .pct') == "50%"

        # The user's RBAC decides: a 403 is shown plainly in the dialog, and nothing is deleted.
        bg.api.inject("DELETE", r"/trainjobs/from-form", 403, reason="Forbidden",
                      message='trainjobs.trainer.kubeflow.org "from-form" is forbidden: User "alice" cannot delete '
                              'resource "trainjobs" in API group "trainer.kubeflow.org" in the namespace "default"')
        browser.get(ui.base + "/trainjobs/default/from-form")
        browser.find_element("css selector", "#delete").click()
        browser.find_element("css selector", "#confirm-ok").click()
        wait_for(browser, lambda d: "403" in _text(d, "#confirm-error"), what="the 403 in the dialog")
        assert 'User "alice" cannot delete' in _text(browser, "#confirm-error")
        assert "RBAC" in _text(browser, "#confirm-error")
        assert bg.api.store.get("trainer.kubeflow.org", "trainjobs", "default", "from-form")
        browser.find_element("css selector", "#confirm-ok").click()  # allowed now
        wait_for(browser, lambda d: d.current_url.endswith("/trainjobs?namespace=default"), what="the list")
        wait_for(browser, lambda d: _keys(d) == [], what="deleted")
        assert js_errors(browser) == []


def test_a_forbidden_list_is_shown_plainly(browser: Any, cluster: tuple[Background, str]) -> None:
    bg, kubeconfig = cluster
    bg.api.inject("GET", r"/namespaces/team-secret/trainjobs", 403, times=1000, reason="Forbidden",
                  message='trainjobs.trainer.kubeflow.org is forbidden: User "alice" cannot list resource "trainjobs" '
                          'in API group "trainer.kubeflow.org" in the namespace "team-secret"')
    with running_ui(lambda: ClusterBackend(kubeconfig, None), cluster=True) as ui:
        browser.get(ui.login_url)
        browser.get(ui.base + "/trainjobs?namespace=team-secret")
        wait_for(browser, lambda d: "403" in _text(d, "#list-error"), what="the 403 on the list page")
        assert 'User "alice" cannot list resource "trainjobs"' in _text(browser, "#list-error")
        assert "ask a cluster admin" in _text(browser, "#list-error")


def _has_jobset(bg: Background, name: str) -> bool:
    try:
        bg.api.store.get("jobset.x-k8s.io", "jobsets", "default", name)
    except Exception:
        return False
    return True


def _attr_text(browser: Any, css: str) -> str:
    return str(browser.execute_script("const e = document.querySelector(arguments[0]); return e ? e.textContent : ''",
                                      css))
