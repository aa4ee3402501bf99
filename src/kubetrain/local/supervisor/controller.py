"""The local JobSet + Job controller: runs one compiled TrainJob's pods on this machine until it finishes.

One supervisor per TrainJob (a thread of ``kubetrain run``, or a detached process started by ``apply``). All state
it owns is written to the store as it changes, so ``get``/``describe`` from other processes see it live and a
killed supervisor can be reconciled by the next command (``kubetrain.local.store.reaper``).
"""

from __future__ import annotations

import logging
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubetrain.api import constants as C
from kubetrain.api.errors import KubetrainError
from kubetrain.local import paths
from kubetrain.local.logs.index import LogClock
from kubetrain.local.sandbox import namespaces
from kubetrain.local.sandbox.netns import SLIRP_DNS, NetworkNamespace, outbound_available, start_outbound
from kubetrain.local.scheduling.resources import GPU
from kubetrain.local.store import status
from kubetrain.local.store.db import Store, StoreError
from kubetrain.local.supervisor.autoscaling import Autoscaling
from kubetrain.local.supervisor.failure_policy import FailurePolicy
from kubetrain.local.supervisor.jobstate import JobRun, PodRun
from kubetrain.local.supervisor.readiness import PROBE_RETRY, ReadinessGate
from kubetrain.local.supervisor.scaling import Rescaler

if TYPE_CHECKING:
    from kubetrain.local.statusendpoint.server import Certificates, StatusServer

__all__ = [
    "PROBE_RETRY",
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
GO = b"go\n"  # what a detached supervisor waits for on stdin before it acts (see LocalBackend._spawn_supervisor)


class Supervisor(ReadinessGate, FailurePolicy, Rescaler, Autoscaling):
    """The main loop over a TrainJob's state (``jobstate``), pods (``launch``), gating (``readiness``) and
    policies (``failure_policy``): suspend, activeDeadlineSeconds and gang admission are decided here."""

    # Main loop.
    def run(self, netns: NetworkNamespace | None = None, certificates: Certificates | None = None) -> dict[str, Any]:
        """Returns the final TrainJob status. ``netns``: a namespace holder started earlier (it starts while the
        caller does other work); this supervisor owns it from now on. ``certificates``: the status endpoint's,
        likewise begun earlier."""
        namespaces.check_available()
        log.info("supervisor start trainjob=%s/%s pid=%d", self.namespace, self.name, os.getpid())
        self.netns = netns
        try:
            # Inside the try: whatever part of the setup fails, the finally below undoes the rest.
            if self.netns is None:
                self.netns = NetworkNamespace.start()
            self.dir.mkdir(parents=True, exist_ok=True)
            self._write_hosts()
            status_server = self._prepare_status_server(certificates)  # made while the steps below wait
            self._preflight()
            self.netns.ready()
            # The holder makes every pod's network while the outbound NAT and the status endpoint come up.
            self.netns.prefetch([(p.name, p.address) for p in self.plan.pods()])
            self.ctx.network, self.ctx.rootless = self.netns.pod_network, self.netns.rootless
            outbound_problem = self._start_outbound()
            self._start_status_server(status_server)
            if outbound_problem:
                self.event(
                    "Warning",
                    "NoOutboundNetwork",
                    f"{outbound_problem}: pods reach each other but not the host's network or the internet "
                    "(needed for downloads such as dataset initializers; see docs/local.md)",
                )
            self.event(
                "Normal",
                "LocalImages",
                f"{self.environments()} (the rule, and images.yaml at {paths.home() / 'images.yaml'}: docs/local.md)",
            )
            clock = LogClock(self.dir / "logs")  # when log lines were written: --timestamps, --since
            try:
                while True:
                    self._tick()
                    self.progress.poll(self.status, self._progress_logs())
                    self._persist_pods()
                    self._persist_status()
                    self._sample(clock)
                    if status.finished(self.status):
                        break
                    self._wait()
            finally:
                self._sample(clock, close=True)
        except KubetrainError as exc:
            error = str(exc)
            status.fail(self.status, status.REASON_START_FAILED, error)
            self._best_effort(lambda: self.event("Warning", status.REASON_START_FAILED, error))
        except OSError as exc:
            msg = f"the local supervisor could not write its files under {self.dir}: {exc}"
            status.fail(self.status, status.REASON_START_FAILED, msg)
            self._best_effort(lambda: self.event("Warning", status.REASON_START_FAILED, msg))
        finally:
            # Each step on its own: a failing store (disk full) must not keep pods running or the namespace alive.
            self._best_effort(self._stop_all)
            self._close_pidfds()
            if self.status_server is not None:
                self.status_server.close()
            self._best_effort(lambda: self.progress.poll(self.status, self._progress_logs(), final=True))
            self._best_effort(self._persist_pods)
            self._best_effort(self._persist_status)
            if self._exec_probes is not None:
                self._exec_probes.shutdown(wait=False, cancel_futures=True)
            if self._outbound is not None:
                self._outbound.stop()
            if self.netns is not None:
                self.netns.close()
            self.release_images()
            self._best_effort(self.scheduler.release_all)
            self._best_effort(lambda: self.store.set_supervisor(self.namespace, self.name, None, None))
            log.info(
                "supervisor exit trainjob=%s/%s state=%s",
                self.namespace,
                self.name,
                status.state_of(self.status),
            )
        return self.status

    def _wait(self) -> None:
        """Until a container exits, or one tick: exits are handled at once, everything else is polled."""
        fds = []
        for j in self.jobs:
            for p in j.pods:
                for c in p.containers:
                    if c.proc is None:
                        continue
                    if c.proc.returncode is not None:
                        if c.pidfd is not None:
                            os.close(c.pidfd)
                            c.pidfd = None
                        continue
                    if c.pidfd is None:
                        try:
                            c.pidfd = os.pidfd_open(c.proc.pid)
                        except OSError:
                            continue
                    fds.append(c.pidfd)
        if fds:
            select.select(fds, [], [], TICK)
        else:
            time.sleep(TICK)

    @staticmethod
    def _sample(clock: LogClock, *, close: bool = False) -> None:
        # Log timestamps are a convenience: a full disk costs them, never the job.
        try:
            clock.close() if close else clock.sample()
        except OSError:
            pass

    def _close_pidfds(self) -> None:
        for j in self.jobs:
            for p in j.pods:
                self._close_pidfds_of(p.containers)

    @staticmethod
    def _best_effort(step: Callable[[], object]) -> None:
        try:
            step()
        except KubetrainError as exc:
            log.error("cleanup step failed: %s", exc)

    def _write_hosts(self) -> None:
        from kubetrain.local.statusendpoint.server import ADDRESS, HOST

        (self.dir / "hosts").write_text(self.plan.hosts_file() + f"{ADDRESS}\t{HOST}\n")

    def _prepare_status_server(self, certificates: Certificates | None) -> StatusServer:
        from kubetrain.local.statusendpoint.server import StatusServer

        return StatusServer(self.namespace, self.name, self.dir / "status", self.progress.report, certificates)

    def _start_status_server(self, server: StatusServer) -> None:
        """The endpoint pods report progress to (``status_server``); a TrainJob runs without it if it fails."""
        from kubetrain.local.statusendpoint.server import no_proxy

        assert self.netns is not None
        try:
            server.start(self.netns)
        except (KubetrainError, OSError) as exc:  # ssl.SSLError is an OSError
            self.event(
                "Warning",
                "StatusEndpointUnavailable",
                f"pods cannot report progress (kubeflow.trainer.update_trainjob_status): {exc}",
            )
            return
        self.status_server = server
        self.ctx.extra_env.update(server.env())
        self.ctx.extra_env.update(no_proxy(dict(os.environ)))

    def _progress_logs(self) -> list[Path]:
        """The trainer pods' logs (every pod's when no pod is marked as the trainer)."""
        pods_ = self.plan.pods()
        trainers = [p for p in pods_ if p.labels.get(C.LABEL_ANCESTOR) == C.ANCESTOR_TRAINER] or pods_
        return [self.log_path(p) for p in trainers]

    def _start_outbound(self) -> str | None:
        """Outbound NAT when possible; otherwise why not (pods then reach only each other)."""
        assert self.netns is not None
        if not outbound_available():
            return "slirp4netns is not installed (`make system-deps`)"
        try:
            self._outbound = start_outbound(self.netns)
            self.netns.forward_outbound()
        except KubetrainError as exc:
            if self._outbound is not None:
                self._outbound.stop()
                self._outbound = None
            return str(exc)
        (self.dir / "resolv.conf").write_text(f"nameserver {SLIRP_DNS}\n")
        self.ctx.resolv_conf = str(self.dir / "resolv.conf")
        return None

    def _preflight(self) -> None:
        """``numProcPerNode: gpu`` resolves inside each pod, from the GPUs it was given (torchrun counts what CUDA
        sees there), not from this machine's: a pod that asks for none sees none, as on a cluster."""
        for p in self.plan.pods():
            if not any(
                e.get("name") == C.PET_NPROC_PER_NODE and e.get("value") == "gpu"
                for c in p.spec.get("containers") or []
                for e in c.get("env") or []
            ):
                continue
            if self.capacity.gpus == 0:
                raise KubetrainError(
                    "spec.trainer.numProcPerNode: 'gpu' needs GPUs, and this machine has none "
                    "(nvidia-smi finds no GPU); use 'cpu', 'auto' or a number of processes"
                )
            if not self.requests.get(p.short, {}).get(GPU):
                raise KubetrainError(
                    f"spec.trainer.numProcPerNode: 'gpu' starts one process per GPU of each node, and pod "
                    f"{p.short} asks for no nvidia.com/gpu, so it would see none (as on a cluster). Fix: set "
                    "spec.trainer.resourcesPerNode.limits: {nvidia.com/gpu: N}, or use 'cpu', 'auto' or a number"
                )

    def _tick(self) -> None:
        if self._terminate:
            self._stop_all(f"stopped: {self._terminate}")
            msg = f"the local supervisor was stopped ({self._terminate}); every process of the TrainJob was stopped"
            status.fail(self.status, status.REASON_TERMINATED, msg)
            self.event("Warning", status.REASON_TERMINATED, msg)
            return
        now = time.time()
        if now - self._last_reload > 0.3:
            self._last_reload = now
            try:
                row = self.store.get_trainjob(self.namespace, self.name)
            except StoreError as exc:
                self._store_trouble(exc)
                row = self.row
            if row is None or row.uid != self.row.uid:
                self.terminate("TrainJob deleted")
                return
            self.trainjob["spec"] = row.trainjob["spec"]
            self._latest_objects = row.objects
            self.stored_trainer_status = (row.trainjob.get("status") or {}).get("trainerStatus")
        spec = self.trainjob["spec"]
        if self._handle_suspend(bool(spec.get("suspend"))):
            return
        if self._deadline_exceeded(spec.get("activeDeadlineSeconds")):
            return
        self._maybe_rescale()
        if not self._check_gangs():
            return
        self._restart_due_pods()
        self._start_ready_jobs()
        if status.finished(self.status):
            return
        self._poll()
        self._probe()
        self._evaluate()
        if not status.finished(self.status):
            self._autoscale()

    def _handle_suspend(self, suspend: bool) -> bool:
        cond = next((c for c in self.status.get("conditions") or [] if c["type"] == C.COND_SUSPENDED), None)
        if suspend:
            if cond is None or cond["status"] != "True":
                self._stop_all("stopped: the TrainJob was suspended")
                self._reset_jobs()
                self._clear_queued("nothing (suspended)")
                status.set_condition(
                    self.status, C.COND_SUSPENDED, "True", C.REASON_SUSPENDED, C.MSG_SUSPENDED
                )
                self.event("Normal", C.REASON_SUSPENDED, C.MSG_SUSPENDED)
            return True
        if cond is not None and cond["status"] == "True":
            latest = self._latest_objects
            if latest != self.objects:
                # runtimePatches changed while suspended: the JobSet is recreated from the new objects.
                self._load_objects(latest)
                self._write_hosts()
                self._reset_jobs()
            status.set_condition(self.status, C.COND_SUSPENDED, "False", C.REASON_RESUMED, C.MSG_RESUMED)
            self.event("Normal", C.REASON_RESUMED, C.MSG_RESUMED)
            self._started_at = time.time()
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
        self._stop_all("stopped: activeDeadlineSeconds exceeded")
        status.fail(self.status, C.REASON_DEADLINE, C.MSG_DEADLINE)
        self.event("Warning", C.REASON_DEADLINE, C.MSG_DEADLINE)
        return True


def record_start_failure(store: Store, namespace: str, name: str, message: str) -> None:
    """A TrainJob whose supervisor cannot even start (e.g. an invalid JobSet) ends Failed, not SupervisorLost."""
    with store.transaction():
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
        # The first SIGTERM/SIGINT stops the pods gracefully; a second one cuts their grace period short.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda s, _f: sup.terminate(signal.Signals(s).name))
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return sup.run()


def configure_logging() -> None:
    try:
        handler = logging.FileHandler(paths.supervisor_log())
    except (OSError, KubetrainError):
        return  # logging is best effort; the store has the events (and an unusable home is reported elsewhere)
    handler.setFormatter(
        logging.Formatter("time=%(asctime)s level=%(levelname)s pid=%(process)d %(message)s")
    )
    root = logging.getLogger("kubetrain")
    if not any(isinstance(h, logging.FileHandler) for h in root.handlers):
        root.addHandler(handler)
    else:
        handler.close()
    root.setLevel(logging.INFO)
    root.propagate = False


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description="kubetrain local supervisor (started by `kubetrain apply`)")
    parser.add_argument("namespace")
    parser.add_argument("name")
    args = parser.parse_args()
    # Wait until the process that started us has recorded our pid with the TrainJob: if it died before that,
    # the TrainJob is (rightly) recorded as lost by the next reader, and we must not run it behind its back.
    if sys.stdin.buffer.read(len(GO)) != GO:
        return
    configure_logging()
    try:
        supervise(Store(), args.namespace, args.name, install_signals=True)
    except KubetrainError as exc:
        log.error("supervisor failed trainjob=%s/%s error=%r", args.namespace, args.name, str(exc))
        raise SystemExit(1) from None


if __name__ == "__main__":
    threading.current_thread().name = "supervisor"
    main()
