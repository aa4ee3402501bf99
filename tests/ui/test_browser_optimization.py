"""OptimizationJobs in ``kubetrain ui`` on this machine, in headless Chromium: a search submitted from the form (the
TrainJob fields plus a search space), its page following the trials live (the table best first, the objective
drawn against each parameter), bad search input reported at its field, the list, and delete. The trials are real
TrainJobs of a real local search (a small script reporting with the Kubeflow SDK), so this needs the sandbox."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubetrain.cli._backend import local_backend
from tests.local.conftest import container, needs_namespaces, rjob, runtime
from tests.ui.harness import RunningUi, js_errors, running_ui, wait_for
from tests.ui.test_browser_local import _attr, _text

pytestmark = [
    needs_namespaces,
    pytest.mark.skipif(importlib.util.find_spec("kubeflow") is None, reason="the kubeflow SDK is not installed"),
]

TRIAL = """
import sys, time
from kubeflow.trainer import update_trainjob_status
x = float(sys.argv[1])
time.sleep(0.5)
update_trainjob_status(progress_percent=100, metrics={"loss": (x - 0.3) ** 2})
"""


@pytest.fixture
def ui(kt_home: Path, tmp_path: Path) -> Iterator[RunningUi]:
    (tmp_path / "trial.py").write_text(TRIAL)
    backend = local_backend()
    backend.apply([runtime("plain", [rjob("node", [container([sys.executable, "-c", "pass"])], ancestor="trainer",
                                          backoff_limit=0)])], namespace="default")
    with running_ui(local_backend, label="this machine", workdir=str(tmp_path)) as running:
        yield running
    for job in backend.list_optimizationjobs(None):
        backend.delete_optimizationjob(job.name, job.namespace)


@pytest.fixture
def kt_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "kthome"
    monkeypatch.setenv("KUBETRAIN_HOME", str(home))
    return home


def _fill(browser: Any, name: str, value: str) -> None:
    field = browser.find_element("css selector", f'[name="{name}"]')
    if field.tag_name == "select":
        from selenium.webdriver.support.ui import Select

        Select(field).select_by_value(value)
        return
    field.clear()
    field.send_keys(value)


def test_a_search_from_the_form_to_its_live_page(browser: Any, ui: RunningUi) -> None:
    js_errors(browser)
    browser.get(ui.login_url)
    browser.get(ui.base + "/submit?runtime=ClusterTrainingRuntime/plain&search=1")
    _fill(browser, "name", "tune-x")
    _fill(browser, "command", f"{sys.executable} trial.py {{{{.x}}}}")
    _fill(browser, "parameters", "x = uniform(0, 1)")
    _fill(browser, "numTrials", "4")
    _fill(browser, "parallelTrials", "9")  # more than numTrials: refused at its field
    field = '.form-field[data-path="spec.parallelTrials"]'
    wait_for(browser, lambda d: "invalid" in (_attr(d, field, "class") or ""), what="parallelTrials marked invalid")
    assert "parallelTrials cannot exceed numTrials (9 > 4)" in _text(browser, f"{field} .field-error")
    _fill(browser, "parallelTrials", "2")
    _fill(browser, "seed", "5")
    wait_for(browser, lambda d: _text(d, "#check-state") == "valid", what="the search checked valid")
    assert "kind: OptimizationJob" in _text(browser, "#preview")
    browser.find_element("css selector", "#submit-button").click()
    wait_for(browser, lambda d: d.current_url.endswith("/optimizationjobs/default/tune-x"), what="the search's page")
    wait_for(browser, lambda d: _text(d, "#state .state") == "Complete", timeout=180, what="the search Complete")
    # Read in one script: the live page may replace the rows at any moment.
    rows = browser.execute_script("""return [...document.querySelectorAll('#trials tbody tr')].map((r) => [
        r.dataset.trial, r.querySelector('.state').innerText, r.querySelector('.objective').innerText,
        r.className])""")
    assert [r[1] for r in rows] == ["Complete"] * 4
    objectives = [float(r[2]) for r in rows]
    assert objectives == sorted(objectives)  # best first
    best = rows[0][0]
    assert rows[0][3] == "best"
    assert _text(browser, "#best").startswith(f"Best: {best} with loss")
    chart = '.chart[data-parameter="x"]'
    wait_for(browser, lambda d: _attr(d, chart, "data-drawn") == "4", what="loss against x, 4 points")
    assert len(browser.find_elements("css selector", f"{chart} .scatterlayer path.point")) == 4
    # The list shows it; delete from its page removes it with its trials.
    browser.get(ui.base + "/optimizationjobs")
    row = 'tr[data-key="default/tune-x"]'
    wait_for(browser, lambda d: _text(d, f"{row} .state") == "Complete", what="the list row")
    assert _text(browser, f"{row} .best") == best
    browser.get(ui.base + "/optimizationjobs/default/tune-x")
    wait_for(browser, lambda d: _text(d, "#live") in ("finished", "live"), what="the page connected")
    browser.find_element("css selector", "#delete").click()
    browser.switch_to.alert.accept()
    wait_for(browser, lambda d: _text(d, "#live") == "deleted", what="deleted")
    assert js_errors(browser) == []


def test_bad_search_lines_are_shown_at_their_field(browser: Any, ui: RunningUi) -> None:
    browser.get(ui.login_url)
    browser.get(ui.base + "/submit?search=1")
    _fill(browser, "parameters", "lr = between(1, 2)")
    field = '.form-field[data-path="spec.parameters"]'
    wait_for(browser, lambda d: "invalid" in (_attr(d, field, "class") or ""), what="the search space marked")
    assert "is not NAME = uniform(MIN, MAX)" in _text(browser, f"{field} .field-error")
