"""The local JobSet + Job controller: runs one compiled TrainJob's pods on this machine until it finishes.

One supervisor per TrainJob (a thread of ``kubetrain run``, or a detached process started by ``apply``). All state
it owns is written to the store as it changes, so ``get``/``describe`` from other processes see it live and a
killed supervisor can be reconciled by the next command (``kubetrain.local.reaper``).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kubetrain.api import KubetrainError
from kubetrain.api import constants as C
from kubetrain.local import gang, namespaces, paths, pods, status
from kubetrain.local.failure_policy import FailurePolicy
from kubetrain.local.jobstate import JobRun, PodRun
from kubetrain.local.launch import STOP_GRACE
from kubetrain.local.logindex import LogClock
from kubetrain.local.readiness import PROBE_RETRY, ReadinessGate
from kubetrain.local.store import Store

__all__ = [
    "PROBE_RETRY",
    "STOP_GRACE",
    "TICK",
    "JobRun",
    "PodRun",
    "Supervisor",
    "configure_logging",
    "main",
    "record_start_failure",
    "supervise",
]

log = logging.getLogger("kubetrain.local.supervisor")

TICK = 0.05


class Supervisor(ReadinessGate, FailurePolicy):
    """The main loop over a TrainJob's state (``jobstate``), pods (``launch``), gating (``readiness``) and
    policies (``failure_policy``): suspend, activeDeadlineSeconds and gang admission are decided here."""

    # Main loop.
    def run(self) -> dict[str, Any]:
        """Returns the final TrainJob status."""
        namespaces.check_available()
        self.dir.mkdir(parents=True, exist_ok=True)
        log.info(
            "supervisor start trainjob=%s/%s pid=%d netns=%s",
            self.namespace,
            self.name,
            os.getpid(),
            self.netns,
        )
        try:
            # Inside the try: whatever part of the setup fails, the finally below undoes the rest.
            (self.dir / "hosts").write_text(self.plan.hosts_file())
            namespaces.create_netns(self.netns)
            self._outbound = namespaces.start_outbound(self.netns)
            if self._outbound is not None:
                (self.dir / "resolv.conf").write_text(f"nameserver {namespaces.SLIRP_DNS}\n")
                self.ctx.resolv_conf = str(self.dir / "resolv.conf")
            self._prober = ThreadPoolExecutor(
                max_workers=2,
                initializer=namespaces.enter_netns_thread,
                initargs=(self.netns,),
                thread_name_prefix="probe",
            )
            self._preflight()
            if self._outbound is None:
                self.event(
                    "Warning",
                    "NoOutboundNetwork",
                    (
                        "slirp4netns is not installed: pods reach each other but not the host's network or the "
                        "internet (install it with `make system-deps` for downloads such as dataset initializers)"
                    ),
                )
            self.event(
                "Normal",
                "LocalImages",
                (
                    f"images are not pulled locally; pods run in the Python environment {pods.image_env_prefix(None)} "
                    f"(map images to environments in {paths.home() / 'images.yaml'})"
                ),
            )
            clock = LogClock(self.dir / "logs")  # when log lines were written: --timestamps, --since
            try:
                while not status.finished(self.status):
                    self._tick()
                    self._persist_pods()
                    self._persist_status()
                    clock.sample()
                    time.sleep(TICK)
            finally:
                clock.close()
        except KubetrainError as exc:
            status.fail(self.status, status.REASON_START_FAILED, str(exc))
            self.event("Warning", status.REASON_START_FAILED, str(exc))
        finally:
            self._stop_all()
            self._persist_pods()
            self._persist_status()
            if self._prober is not None:
                self._prober.shutdown(wait=False, cancel_futures=True)
            if self._outbound is not None:
                self._outbound.stop()
            namespaces.delete_netns(self.netns)
            self.store.set_supervisor(self.namespace, self.name, None, None)
            log.info(
                "supervisor exit trainjob=%s/%s state=%s",
                self.namespace,
                self.name,
                status.state_of(self.status),
            )
        return self.status

    def _preflight(self) -> None:
        if gang.gpu_count() == 0:
            for p in self.plan.pods():
                for c in p.spec.get("containers") or []:
                    for e in c.get("env") or []:
                        if e.get("name") == C.PET_NPROC_PER_NODE and e.get("value") == "gpu":
                            raise KubetrainError(
                                "spec.trainer.numProcPerNode: 'gpu' needs GPUs, and this machine has none "
                                "(nvidia-smi finds no GPU); use 'cpu', 'auto' or a number of processes"
                            )

    def _tick(self) -> None:
        if self._terminate:
            self._stop_all()
            msg = f"the local supervisor was stopped ({self._terminate}); every process of the TrainJob was stopped"
            status.fail(self.status, status.REASON_TERMINATED, msg)
            self.event("Warning", status.REASON_TERMINATED, msg)
            return
        now = time.time()
        if now - self._last_reload > 0.3:
            self._last_reload = now
            row = self.store.get_trainjob(self.namespace, self.name)
            if row is None:
                self.terminate("TrainJob deleted")
                return
            self.trainjob["spec"] = row.trainjob["spec"]
        spec = self.trainjob["spec"]
        if self._handle_suspend(bool(spec.get("suspend"))):
            return
        if self._deadline_exceeded(spec.get("activeDeadlineSeconds")):
            return
        if not self._admit():
            return
        self._start_ready_jobs()
        self._poll()
        self._probe()
        self._evaluate()

    def _handle_suspend(self, suspend: bool) -> bool:
        cond = next((c for c in self.status.get("conditions") or [] if c["type"] == C.COND_SUSPENDED), None)
        if suspend:
            if cond is None or cond["status"] != "True":
                self._stop_all()
                self._reset_jobs()
                status.set_condition(
                    self.status, C.COND_SUSPENDED, "True", C.REASON_SUSPENDED, C.MSG_SUSPENDED
                )
                self.event("Normal", C.REASON_SUSPENDED, C.MSG_SUSPENDED)
            return True
        if cond is not None and cond["status"] == "True":
            status.set_condition(self.status, C.COND_SUSPENDED, "False", C.REASON_RESUMED, C.MSG_RESUMED)
            self.event("Normal", C.REASON_RESUMED, C.MSG_RESUMED)
            self._started_at = time.time()
            self._admitted = False
        return False

    def _deadline_exceeded(self, seconds: int | None) -> bool:
        if not seconds:
            return False
        start = self.row.created
        cond = next((c for c in self.status.get("conditions") or [] if c["type"] == C.COND_SUSPENDED), None)
        if cond is not None and cond["status"] == "False":
            start = self._started_at
        if time.time() <= start + seconds:
            return False
        self._stop_all()
        status.fail(self.status, C.REASON_DEADLINE, C.MSG_DEADLINE)
        self.event("Warning", C.REASON_DEADLINE, C.MSG_DEADLINE)
        return True

    def _admit(self) -> bool:
        """Gang admission: with a PodGroup, nothing starts until the whole group fits on this machine."""
        if self._admitted:
            return True
        pg = gang.find_podgroup(self.row.objects)
        if pg is None:
            self._admitted = True
            return True
        pg_spec = pg.get("spec") or {}
        missing = gang.missing_resources(pg_spec.get("minResources") or {}, gang.Capacity.of_machine())
        if not missing:
            self._admitted = True
            self.event("Normal", "Scheduled", f"pod group {pg['metadata']['name']} fits on this machine")
            return True
        now = time.time()
        if self._gang_wait_since is None:
            self._gang_wait_since = now
            self.event(
                "Warning",
                "FailedScheduling",
                f"pod group {pg['metadata']['name']} does not fit on this machine: {'; '.join(missing)}",
            )
        timeout = int(pg_spec.get("scheduleTimeoutSeconds") or 60)
        if now - self._gang_wait_since >= timeout:
            msg = (
                f"pod group {pg['metadata']['name']} could not be scheduled within scheduleTimeoutSeconds="
                f"{timeout}: {'; '.join(missing)}"
            )
            status.fail(self.status, status.REASON_UNSCHEDULABLE, msg)
            self.event("Warning", status.REASON_UNSCHEDULABLE, msg)
        return False


def record_start_failure(store: Store, namespace: str, name: str, message: str) -> None:
    """A TrainJob whose supervisor cannot even start (e.g. an invalid JobSet) ends Failed, not SupervisorLost."""
    row = store.get_trainjob(namespace, name)
    if row is None:
        return
    st = row.trainjob.get("status") or {}
    status.fail(st, status.REASON_START_FAILED, message)
    row.trainjob["status"] = st
    store.update_trainjob(namespace, name, row.trainjob)
    store.add_event(namespace, name, "Warning", status.REASON_START_FAILED, message)
    store.set_supervisor(namespace, name, None, None)


def supervise(store: Store, namespace: str, name: str, *, install_signals: bool) -> dict[str, Any]:
    try:
        sup = Supervisor(store, namespace, name)
    except KubetrainError as exc:
        record_start_failure(store, namespace, name, str(exc))
        raise
    if install_signals:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda s, _f: sup.terminate(signal.Signals(s).name))
    return sup.run()


def configure_logging() -> None:
    handler = logging.FileHandler(paths.supervisor_log())
    handler.setFormatter(
        logging.Formatter("time=%(asctime)s level=%(levelname)s pid=%(process)d %(message)s")
    )
    root = logging.getLogger("kubetrain")
    if not any(isinstance(h, logging.FileHandler) for h in root.handlers):
        root.addHandler(handler)
    root.setLevel(logging.INFO)


def main() -> None:
    parser = argparse.ArgumentParser(description="kubetrain local supervisor (started by `kubetrain apply`)")
    parser.add_argument("namespace")
    parser.add_argument("name")
    args = parser.parse_args()
    configure_logging()
    store = Store()
    try:
        supervise(store, args.namespace, args.name, install_signals=True)
    except KubetrainError as exc:
        log.error("supervisor failed trainjob=%s/%s error=%r", args.namespace, args.name, str(exc))
        raise SystemExit(1) from None


if __name__ == "__main__":
    threading.current_thread().name = "supervisor"
    main()
