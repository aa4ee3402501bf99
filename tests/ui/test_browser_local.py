"""``kubetrain ui`` on this machine, in headless Chromium: the list follows a running TrainJob's progress, the log
view follows new lines (colours rendered, HTML shown as text and never run), a metric chart is drawn with its
points, delete asks for confirmation and removes the job, and the form reports bad input at its field paths.

The TrainJobs' supervisor is a stand-in the test drives (``StandInJob``): it writes what a supervisor writes, so
these tests need no sandbox; ``test_demo.py`` runs the real quickstart job with the page open."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from kubetrain.cli._backend import local_backend
from tests.ui.harness import RunningUi, StandInJob, js_errors, running_ui, wait_for


@pytest.fixture
def ui() -> Iterator[RunningUi]:
    with running_ui(local_backend, label="this machine") as running:
        yield running


@pytest.fixture
def job() -> Iterator[StandInJob]:
    j = StandInJob("mnist")
    try:
        yield j
    finally:
        j.close()


def _open(browser: Any, ui: RunningUi, path: str) -> None:
    js_errors(browser)  # forget what earlier tests' pages logged
    browser.get(ui.login_url)
    browser.get(ui.base + path)


def _text(browser: Any, css: str) -> str:
    """The element's rendered text (read in one script: the page may replace the element at any moment)."""
    return str(browser.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : ''",
                                      css)).strip()


def test_the_list_follows_a_running_jobs_progress(browser: Any, ui: RunningUi, job: StandInJob) -> None:
    _open(browser, ui, "/trainjobs")
    row = 'tr[data-key="default/mnist"]'
    wait_for(browser, lambda d: _text(d, f"{row} .state") == "Running", what="the job listed as Running")
    assert _text(browser, f"{row} .progress-cell") == "–"
    assert _text(browser, f"{row} .runtime") == "torch-distributed" and _text(browser, f"{row} .nodes") == "2"
    job.report(10, eta=900, loss=2.5)
    wait_for(browser, lambda d: _text(d, f"{row} .pct") == "10%", what="10% on the list")
    assert _text(browser, f"{row} .eta").startswith("ETA 1")  # 15m00s, counting down
    job.report(60, eta=300, loss=0.5)
    wait_for(browser, lambda d: _text(d, f"{row} .pct") == "60%", what="60% on the list")
    assert browser.find_element("css selector", f"{row} progress").get_attribute("value") == "60"
    job.complete()
    wait_for(browser, lambda d: _text(d, f"{row} .state") == "Complete", what="Complete on the list")
    assert _text(browser, f"{row} .eta") == ""  # a finished job has no ETA
    # A second job appears without a reload, newest first.
    other = StandInJob("newer")
    try:
        wait_for(browser, lambda d: _keys(d)[:1] == ["default/newer"], what="the new job at the top")
        assert _text(browser, "#count") == "2 TrainJobs"
    finally:
        other.close()
    assert js_errors(browser) == []


def test_a_long_list_gets_its_other_rows_after_the_first_paint(
    browser: Any, ui: RunningUi, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kubetrain.ui import pages

    monkeypatch.setattr(pages, "FIRST_ROWS", 2)  # the page carries 2 rows; the stream brings the third
    jobs = [StandInJob(f"job-{i}") for i in range(3)]
    try:
        _open(browser, ui, "/trainjobs")
        wait_for(browser, lambda d: sorted(_keys(d)) == ["default/job-0", "default/job-1", "default/job-2"],
                 what="all three rows")
        assert _text(browser, "#count") == "3 TrainJobs"
    finally:
        for j in jobs:
            j.close()


def test_the_label_filter_and_all_namespaces(browser: Any, ui: RunningUi) -> None:
    jobs = [StandInJob("vision-a", labels={"team": "vision"}), StandInJob("nlp-a", labels={"team": "nlp"}),
            StandInJob("other-ns", namespace="team-b", labels={"team": "vision"})]
    try:
        _open(browser, ui, "/trainjobs?selector=team%3Dvision")
        wait_for(browser, lambda d: _keys(d) == ["default/vision-a"], what="only vision-a in default")
        browser.get(ui.base + "/trainjobs?all=1&selector=team%3Dvision")
        wait_for(browser, lambda d: sorted(_keys(d)) == ["default/vision-a", "team-b/other-ns"], what="both namespaces")
        assert _text(browser, 'tr[data-key="team-b/other-ns"] .ns') == "team-b"
        browser.get(ui.base + "/trainjobs?selector=team%3D%3D%3D")
        assert "label selector" in _text(browser, ".notice.error")
    finally:
        for j in jobs:
            j.close()


def _keys(browser: Any) -> list[str]:
    return list(browser.execute_script(
        "return [...document.querySelectorAll('#trainjobs tbody tr')].map((tr) => tr.dataset.key)"))


def test_the_log_view_follows_new_lines_as_text(browser: Any, ui: RunningUi, job: StandInJob) -> None:
    job.write_log("node-0-0", "starting\n")
    _open(browser, ui, "/trainjobs/default/mnist")
    log = "#log"
    wait_for(browser, lambda d: "starting" in _text(d, log), what="the first line")
    job.write_log("node-0-0", "epoch 1/3 \x1b[31mloss 0.91\x1b[0m\n")
    job.write_log("node-0-1", "<img src=x onerror=\"window.pwned=1\"><b>not bold</b>\n")
    wait_for(browser, lambda d: "not bold" in _text(d, log), what="the HTML line")
    red = browser.find_elements("css selector", "#log .ansi-fg-1")
    assert [r.text for r in red] == ["loss 0.91"]
    assert "\x1b" not in _text(browser, log) and "[31m" not in _text(browser, log)
    assert '<img src=x onerror="window.pwned=1"><b>not bold</b>' in _text(browser, log)
    assert browser.find_elements("css selector", "#log img, #log b") == []
    assert browser.execute_script("return window.pwned === undefined")
    # Lines are labelled with their pod; a progress bar redrawn with \r shows its last state.
    assert "[node-0/1]" in _text(browser, log)
    job.write_log("node-0-0", "step 1/4\rstep 2/4\rstep 3/4")
    wait_for(browser, lambda d: "step 3/4" in _text(d, log) and "step 2/4" not in _text(d, log), what="the live bar")
    job.write_log("node-0-0", "\rstep 4/4\n")
    wait_for(browser, lambda d: "step 4/4" in _text(d, log) and "step 3/4" not in _text(d, log), what="the bar done")
    # Following keeps the newest line in view.
    for i in range(200):
        job.write_log("node-0-0", f"line {i}\n")
    wait_for(browser, lambda d: "line 199" in _text(d, log), what="200 more lines")
    assert browser.execute_script(
        "const v = document.querySelector('#log'); return v.scrollTop + v.clientHeight >= v.scrollHeight - 30")
    # Search keeps the matching lines.
    browser.find_element("css selector", "#log-search").send_keys("loss")
    wait_for(browser, lambda d: _text(d, "#log-count") == "1 of 204 lines match", what="search")
    assert [m.text for m in browser.find_elements("css selector", "#log mark")] == ["loss"]
    # One pod's log only.
    browser.execute_script("const s = document.querySelector('#log-search'); s.value = '';"
                           " s.dispatchEvent(new Event('input'))")
    wait_for(browser, lambda d: _text(d, "#log-count") == "204 lines", what="search cleared")
    browser.execute_script("const s = document.querySelector('#log-step'); s.value = 'node-0-1';"
                           " s.dispatchEvent(new Event('change'))")
    wait_for(browser, lambda d: "not bold" in _text(d, log) and "starting" not in _text(d, log), what="node-0-1 only")
    job.complete()
    wait_for(browser, lambda d: "these are all its logs" in _text(d, log), what="the end of the logs")
    assert js_errors(browser) == []


def test_a_metric_chart_is_drawn_with_its_points(browser: Any, ui: RunningUi, job: StandInJob) -> None:
    for i, loss in enumerate((2.0, 1.1, 0.7)):
        job.report(10 * (i + 1), eta=60, loss=loss, throughput=100.0 + i)
    _open(browser, ui, "/trainjobs/default/mnist")
    chart = '.chart[data-metric="loss"]'
    wait_for(browser, lambda d: _attr(d, chart, "data-drawn") == "3", what="the loss chart with 3 points")
    assert len(browser.find_elements("css selector", f"{chart} .scatterlayer path.point")) == 3
    titles = [c.get_attribute("data-metric") for c in browser.find_elements("css selector", ".chart")]
    assert titles == ["loss", "throughput", "progress %"]
    job.report(40, eta=30, loss=0.4, throughput=104.0)  # a report while the page is open
    wait_for(browser, lambda d: _attr(d, chart, "data-drawn") == "4", what="the 4th point")
    assert len(browser.find_elements("css selector", f"{chart} .scatterlayer path.point")) == 4
    assert _text(browser, "#progress .pct") == "40%" and "loss 0.4" in _text(browser, "#metrics")
    assert js_errors(browser) == []


def _attr(browser: Any, css: str, name: str) -> str | None:
    value = browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.getAttribute(arguments[1]) : null", css, name)
    return None if value is None else str(value)


def test_delete_asks_for_confirmation_then_removes_the_job(browser: Any, ui: RunningUi, job: StandInJob) -> None:
    _open(browser, ui, "/trainjobs/default/mnist")
    dialog = "#confirm"
    browser.find_element("css selector", "#delete").click()
    wait_for(browser, lambda d: d.find_element("css selector", dialog).get_attribute("open") is not None,
             what="the confirmation dialog")
    assert "Delete mnist in namespace default?" in _text(browser, "#confirm-text")
    browser.find_element("css selector", "#confirm-cancel").click()
    wait_for(browser, lambda d: d.find_element("css selector", dialog).get_attribute("open") is None, what="closed")
    assert local_backend().get_trainjob("mnist", "default").name == "mnist"  # nothing happened
    browser.find_element("css selector", "#delete").click()
    browser.find_element("css selector", "#confirm-ok").click()
    wait_for(browser, lambda d: d.current_url.endswith("/trainjobs?namespace=default"), what="back on the list")
    wait_for(browser, lambda d: _keys(d) == [], what="the job gone from the list")
    assert local_backend().list_trainjobs("default") == []
    assert job.supervisor.poll() is not None  # its supervisor was stopped, as delete stops a real one


def test_suspend_is_confirmed_then_resume_is_offered(browser: Any, ui: RunningUi, job: StandInJob) -> None:
    _open(browser, ui, "/trainjobs/default/mnist")
    assert _attr(browser, "#scale", "class") == "hidden"  # torch-distributed is not elastic
    browser.find_element("css selector", "#suspend").click()
    browser.find_element("css selector", "#confirm-ok").click()
    wait_for(browser, lambda d: local_backend().get_trainjob("mnist", "default").spec.suspend is True,
             what="spec.suspend set")
    wait_for(browser, lambda d: _attr(d, "#resume", "class") == "" and _attr(d, "#suspend", "class") == "hidden",
             what="Resume offered instead of Suspend")


def test_the_form_reports_bad_input_at_its_fields(browser: Any, ui: RunningUi) -> None:
    _open(browser, ui, "/submit")
    wait_for(browser, lambda d: _text(d, "#check-state") == "valid", what="the default form is valid")
    nodes = browser.find_element("css selector", 'input[name="numNodes"]')
    nodes.send_keys("two")
    field = '.form-field[data-path="spec.trainer.numNodes"]'
    wait_for(browser, lambda d: "invalid" in (_attr(d, field, "class") or ""), what="numNodes marked invalid")
    assert "spec.trainer.numNodes" in _text(browser, "#findings")
    assert _text(browser, f"{field} .field-error")
    nodes.clear()
    nodes.send_keys("2")
    wait_for(browser, lambda d: _text(d, "#check-state") == "valid", what="valid again")
    assert "numNodes: 2" in _text(browser, "#preview")
