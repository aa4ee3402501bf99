"""Running ``kubetrain ui`` inside a test: the server on a background thread (port 0), an HTTP client that keeps
its cookie like a browser, headless Chromium, and local TrainJobs whose supervisor is a stand-in the test drives."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from http.cookiejar import CookieJar
from pathlib import Path
from typing import Any

import pytest

from kubetrain.api.views import Backend
from kubetrain.ui.app import bind, serve
from kubetrain.ui.state import Ui, UiSettings

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync", "--window-size=1400,1000",
]


@dataclass
class RunningUi:
    ui: Ui
    base: str

    @property
    def login_url(self) -> str:
        return f"{self.base}/?token={self.ui.session.token}"


@contextmanager
def running_ui(factory: Callable[[], Backend], *, cluster: bool = False, label: str = "test",
               namespace: str = "default", workdir: str | None = None) -> Iterator[RunningUi]:
    settings = UiSettings(namespace=namespace, cluster=cluster, port=0, workdir=workdir or os.getcwd())
    sock = bind(settings)
    ui = Ui(settings, factory, label=label)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="ui-test-loop", daemon=True)
    thread.start()
    started = threading.Event()

    async def make_stop() -> asyncio.Event:
        return asyncio.Event()

    stop = asyncio.run_coroutine_threadsafe(make_stop(), loop).result(10)
    served: Future[None] = asyncio.run_coroutine_threadsafe(serve(ui, sock, started.set, stop), loop)
    if not started.wait(30):
        raise RuntimeError(f"the UI server did not start: {served.exception(0) if served.done() else 'timeout'}")
    try:
        yield RunningUi(ui, f"http://127.0.0.1:{settings.port}")
    finally:
        loop.call_soon_threadsafe(stop.set)
        served.result(30)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


class Http:
    """A client that logs in with the token link and keeps the session cookie, as a browser does."""

    def __init__(self, running: RunningUi, *, login: bool = True) -> None:
        self.running = running
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))
        if login:
            status, _, _ = self.get("/?token=" + running.ui.session.token)
            assert status == 200

    def request(self, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None,
                csrf: bool = True) -> tuple[int, dict[str, str], str]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.running.base + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        if csrf and method != "GET":
            req.add_header("X-CSRF-Token", self.running.ui.session.csrf)
        for k, v in (headers or {}).items():
            req.add_header(k, v)
        try:
            with self.opener.open(req, timeout=60) as resp:
                return resp.status, dict(resp.headers), resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()

    def get(self, path: str, **kw: Any) -> tuple[int, dict[str, str], str]:
        return self.request("GET", path, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> tuple[int, dict[str, str], str]:
        return self.request("POST", path, body if body is not None else {}, **kw)


@contextlib.contextmanager
def browser_session() -> Iterator[Any]:
    """A headless Chromium (``chromium``), quit afterwards whatever happened."""
    driver = chromium()
    try:
        yield driver
    finally:
        driver.quit()


def chromium() -> Any:
    """Headless Chromium under Selenium, or the test is skipped saying what is missing."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("needs Debian's chromium and chromium-driver (`make system-deps` installs them as root)")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("needs selenium (pip install -e '.[dev]')")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='kubetrain-ui-chromium-')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=options)


def wait_for(driver: Any, condition: Callable[[Any], Any], timeout: float = 30.0, what: str = "") -> Any:
    """Wait for a condition on the page (checked every 50 ms: the page changes on server-sent events)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout, poll_frequency=0.05).until(condition, message=what)
    except TimeoutException:
        shown = driver.execute_script("const m = document.querySelector('main'); return m ? m.innerText : ''")
        raise AssertionError(f"timed out waiting for {what}; the page ({driver.current_url}) shows:\n"
                             f"{str(shown)[:3000]}") from None


def js_errors(driver: Any) -> list[str]:
    """Script errors the page logged (a refused request, which the page shows, is the network's entry, not one)."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE" and e.get("source") != "network"]


class StandInJob:
    """A local TrainJob whose supervisor is a stand-in the test drives.

    A sleeping child process is recorded as its supervisor (readers see it alive, ``delete`` stops it as it stops a
    real one), and the test writes what a supervisor writes: pods, the status, progress reports and log lines."""

    def __init__(self, name: str, *, namespace: str = "default", nodes: int = 2, runtime: str = "torch-distributed",
                 labels: dict[str, str] | None = None) -> None:
        from kubetrain.api import TrainJob
        from kubetrain.compiler import compile_trainjob, fixed_keygen, resolve_runtime
        from kubetrain.local import paths
        from kubetrain.local.sandbox import pods
        from kubetrain.local.store.db import PodRow, Store
        from kubetrain.local.store.status import now_rfc3339
        from kubetrain.runtimes import builtin_runtimes

        self.name, self.namespace = name, namespace
        self.store = Store()
        tj = TrainJob.model_validate({
            "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {"runtimeRef": {"name": runtime},
                     "trainer": {"numNodes": nodes, "command": ["python", "train.py"]}},
        })
        rt, _ = resolve_runtime(tj, builtin_runtimes())
        assert rt is not None
        objects = compile_trainjob(tj, rt, keygen=fixed_keygen())
        self.uid = f"uid-{name}-{time.monotonic_ns()}"
        tj.metadata.uid, tj.metadata.creation_timestamp = self.uid, now_rfc3339()
        self.wire = tj.to_wire()
        self.supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"],
                                           start_new_session=True)
        threading.Thread(target=self.supervisor.wait, daemon=True).start()  # reaped at once when it is stopped
        owner = (self.supervisor.pid, pods.proc_start_time(self.supervisor.pid))
        self.store.create_trainjob(copy.deepcopy(self.wire), objects, str(Path.cwd()), owner)
        logs = paths.trainjob_dir(namespace, name, self.uid) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.logs = {f"node-0-{i}": logs / f"node-0-{i}.log" for i in range(nodes)}
        for path in self.logs.values():
            path.touch()
        self.pods = [PodRow(namespace, name, step, "node", "Running", None, None, None, 0, None, str(path))
                     for step, path in self.logs.items()]
        self.store.put_pods(self.pods)
        self.status: dict[str, Any] = {}
        self.set_status({"conditions": []})

    def set_status(self, status: dict[str, Any]) -> None:
        self.status = status
        assert self.store.set_status(self.namespace, self.name, self.uid, copy.deepcopy(status))

    def report(self, percent: int, eta: int | None = None, **metrics: float) -> None:
        """What the status endpoint records for a report: the status, and a row of the history."""
        ts: dict[str, Any] = {
            "progressPercentage": percent,
            "lastUpdatedTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "metrics": [{"name": k, "value": f"{v:g}"} for k, v in metrics.items()],
        }
        if eta is not None:
            ts["estimatedRemainingSeconds"] = eta
        self.store.add_progress(self.namespace, self.name, self.uid, "report", ts)
        self.set_status({**self.status, "trainerStatus": ts})

    def write_log(self, step: str, text: str) -> None:
        with open(self.logs[step], "a") as f:
            f.write(text)

    def complete(self) -> None:
        from kubetrain.local.store.db import PodRow

        self.store.put_pods([PodRow(p.namespace, p.trainjob, p.name, p.rjob, "Succeeded", None, None, 0, 0, None, p.log)
                             for p in self.pods])
        self.set_status({**self.status, "conditions": [{
            "type": "Complete", "status": "True", "reason": "AllJobsCompleted",
            "message": "jobset completed successfully",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]})
        self.stop_supervisor()

    def stop_supervisor(self) -> None:
        if self.supervisor.poll() is None:
            os.kill(self.supervisor.pid, signal.SIGKILL)

    def close(self) -> None:
        self.stop_supervisor()
        self.store.close()
