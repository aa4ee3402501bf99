"""The issue's bar: `make demo`'s job (examples/quickstart) followed in the browser from start to Complete, with
its loss chart and its logs. A real local run (torch, bubblewrap), so it is marked slow."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.cli._backend import local_backend
from tests.requirements import needs_local_sandbox, needs_torch
from tests.ui.harness import js_errors, running_ui, wait_for
from tests.ui.test_browser_local import _attr, _keys, _text

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    needs_torch,
    needs_local_sandbox,
]


def test_the_demo_job_followed_in_the_browser_to_complete(browser: Any) -> None:
    manifest = yaml.safe_load((ROOT / "examples/quickstart/trainjob.yaml").read_text())
    with running_ui(local_backend, label="this machine", workdir=str(ROOT / "examples/quickstart")) as ui:
        browser.get(ui.login_url)
        assert _keys(browser) == []
        applied: list[str] = []
        # As `kubetrain apply` would, from another terminal, while the page is open.
        submit = threading.Thread(target=lambda: applied.extend(local_backend().apply(
            [manifest], namespace="default", workdir=str(ROOT / "examples/quickstart"))))
        submit.start()
        wait_for(browser, lambda d: _keys(d) == ["default/quickstart"], timeout=60, what="the job on the list")
        submit.join(60)
        assert applied == ["trainjob/quickstart created"]
        browser.find_element("link text", "quickstart").click()
        wait_for(browser, lambda d: d.current_url.endswith("/trainjobs/default/quickstart"), what="its page")
        wait_for(browser, lambda d: _text(d, "#state .state") == "Complete", timeout=300, what="Complete")
        wait_for(browser, lambda d: _attr(d, '.chart[data-metric="loss"]', "data-drawn") == "5", what="5 losses")
        assert len(browser.find_elements("css selector", '.chart[data-metric="loss"] .scatterlayer path.point')) == 5
        wait_for(browser, lambda d: "epoch 5/5 loss" in _text(d, "#log"), what="the last epoch's line")
        # The end of the stream comes after its last line: wait for it, not just for the line.
        wait_for(browser, lambda d: "these are all its logs" in _text(d, "#log"), what="the end of the log")
        log = _text(browser, "#log")
        assert "training on 4 processes (2 nodes)" in log and "these are all its logs" in log
        assert _text(browser, "#progress .pct") == "100%"
        steps = browser.execute_script("return [...document.querySelectorAll('#steps tbody tr')].map(r => r.innerText)")
        assert len(steps) == 2 and all("Succeeded" in s for s in steps)
        assert js_errors(browser) == []
