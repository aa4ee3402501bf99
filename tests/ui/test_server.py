"""The UI's server without a browser: the session token and its cookie, the Host check, CSRF, the security
headers, and errors on every entry point (a missing TrainJob, bad form input, a bad selector) as plain JSON or a
page, never a traceback."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from kubetrain.cli._backend import local_backend
from tests.ui.harness import Http, RunningUi, StandInJob, running_ui


@pytest.fixture
def ui() -> Iterator[RunningUi]:
    with running_ui(local_backend) as running:
        yield running


def test_the_token_link_sets_a_cookie_and_leaves_the_address_bar(ui: RunningUi) -> None:
    anonymous = Http(ui, login=False)
    status, _, body = anonymous.get("/trainjobs")
    assert status == 401 and "open the address `kubetrain ui` printed" in body
    status, _, body = anonymous.get("/?token=not-the-token")
    assert status == 401 and "token is not the one of the running" in body
    status, _, body = anonymous.get("/api/trainjobs/default/x/metrics")
    assert status == 401 and json.loads(body)["error"] == "this browser has no session with this `kubetrain ui`"

    browser = Http(ui, login=False)
    req = browser.opener.open(ui.login_url)  # follows the 303 to the page, cookie set
    assert req.status == 200 and req.url == ui.base + "/trainjobs"
    status, _, _ = browser.get("/trainjobs")
    assert status == 200
    cookie = next(c for c in browser.jar if c.name == f"kubetrain_ui_{ui.ui.settings.port}")
    assert cookie.value == ui.ui.session.token and cookie.has_nonstandard_attr("HttpOnly")


def test_security_headers_host_check_and_csrf(ui: RunningUi) -> None:
    http = Http(ui)
    status, headers, _ = http.get("/trainjobs")
    assert status == 200
    csp = headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
    assert "frame-ancestors 'none'" in csp and headers["X-Frame-Options"] == "DENY"
    assert headers["Cache-Control"] == "no-store"
    # A page of another site that resolves its own name to 127.0.0.1 (DNS rebinding) is refused.
    status, _, body = http.get("/trainjobs", headers={"Host": f"evil.example:{ui.ui.settings.port}"})
    assert status == 421 and "does not answer for host" in body
    # Changes need the page's CSRF token, and a browser's Origin must be this server.
    status, _, body = http.post("/api/trainjobs/default/x/delete", csrf=False)
    assert status == 403 and json.loads(body)["error"] == "refused a change without this page's CSRF token"
    status, _, body = http.post("/api/trainjobs/default/x/delete", headers={"Origin": "http://evil.example"})
    assert status == 403 and "another site" in json.loads(body)["error"]
    status, _, body = http.request("GET", "/api/trainjobs/default/x/delete")
    assert status == 405 and json.loads(body)["fix"] == "use POST"


def test_errors_are_one_plain_sentence(ui: RunningUi) -> None:
    http = Http(ui)
    job = StandInJob("mnist-ddp")
    try:
        status, _, body = http.post("/api/trainjobs/default/mnist-dpp/delete")
        error = json.loads(body)
        assert status == 404 and error["error"].startswith('trainjob "mnist-dpp" not found in namespace "default"')
        assert "did you mean 'mnist-ddp'?" in error["error"]
        status, _, page = http.get("/trainjobs/default/mnist-dpp")
        assert status == 404 and "did you mean" in page and "Traceback" not in page
        status, _, page = http.get("/trainjobs/default/Not_A_Name")
        assert status == 400 and "is not a valid Kubernetes name" in page
        status, _, page = http.get("/trainjobs?selector=team%3D%3Dx%3D")
        assert status == 200 and "label selector" in page
        status, _, body = http.post("/api/trainjobs/default/mnist-ddp/scale", {"replicas": "many"})
        assert status == 422 and "whole number" in json.loads(body)["error"]
        status, _, body = http.post("/api/trainjobs/default/mnist-ddp/scale", {"replicas": 3})
        assert status == 400 and "elastic" in json.loads(body)["error"]  # the backend's own words
        status, _, body = http.post("/api/trainjobs/default/mnist-ddp/suspend", b"not json")
        assert status == 400 and json.loads(body)["error"] == "the request body is not JSON"
        status, _, body = http.get("/no/such/page")
        assert status == 404 and "no page at /no/such/page" in body
        # An event stream answers its errors as its one event (a browser's EventSource cannot read a 400).
        status, headers, body = http.get("/api/trainjobs/default/mnist-ddp/logs?tail=lots")
        assert status == 200 and headers["Content-Type"] == "text/event-stream"
        event, data = body.strip().splitlines()
        assert event == "event: failure"
        message = json.loads(data.removeprefix("data: "))["message"]
        assert message == "tail: expected a number of lines or 'all', got 'lots'"
        status, _, body = http.get("/api/trainjobs/default/missing/watch")
        assert '"status":404' in body and 'trainjob \\"missing\\" not found' in body
    finally:
        job.close()


def test_bad_form_input_is_reported_at_its_field_paths(ui: RunningUi) -> None:
    http = Http(ui)
    form = {"name": "Bad_Name", "namespace": "default", "runtime": "ClusterTrainingRuntime/torch-distributed",
            "numNodes": "two", "env": "EPOCHS=5\nNOT A VARIABLE", "command": "python 'train.py"}
    status, _, body = http.post("/api/validate", form)
    assert status == 200
    found = {(f["path"], f["severity"]) for f in json.loads(body)["errors"]}
    assert ("metadata.name", "error") in found
    assert ("spec.trainer.numNodes", "error") in found
    assert ("spec.trainer.env[1]", "error") in found
    assert ("spec.trainer.command", "error") in found
    status, _, body = http.post("/api/submit", form)
    result = json.loads(body)
    assert status == 422 and result["error"].endswith("nothing was created") and result["errors"]
    status, _, body = http.post("/api/validate", {**form, "runtime": "ClusterTrainingRuntime/no-such-runtime",
                                                 "name": "ok", "numNodes": "2", "env": "", "command": ""})
    errors = json.loads(body)["errors"]
    assert [e["path"] for e in errors] == ["spec.runtimeRef.name"] and "no-such-runtime" in errors[0]["message"]
    status, _, body = http.post("/api/validate", {"nme": "typo"})
    assert status == 400 and "unknown form field 'nme'" in json.loads(body)["error"]


def test_compiled_objects_never_show_a_secret_value(ui: RunningUi) -> None:
    http = Http(ui)
    job = StandInJob("mpi-job", runtime="deepspeed-distributed", nodes=2)
    try:
        status, _, page = http.get("/trainjobs/default/mpi-job")
        assert status == 200
        assert "Secret/mpi-job-mpi-ssh-auth" in page
        assert "PRIVATE KEY" not in page and "ssh-privatekey" not in page.split("Compiled JobSet")[0]
        secret = next(o for o in local_backend().compiled_objects("mpi-job", "default") if o["kind"] == "Secret")
        assert secret["data"] and all(re.fullmatch(r"<\d+ bytes, hidden>", v) for v in secret["data"].values())
        data = json.loads(re.search(r'<script type="application/json" id="page-data">(.*?)</script>', page, re.S)[1])
        assert data["name"] == "mpi-job" and data["details"]["state"]["state"] == "Running"
    finally:
        job.close()
