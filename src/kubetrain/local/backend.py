"""``LocalBackend``: the CLI's backend contract (``kubetrain.api.views.Backend``) on this machine."""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from kubetrain.api import (
    AnyRuntime,
    ClusterTrainingRuntime,
    InvalidObjectError,
    KubetrainError,
    TrainingRuntime,
    TrainJob,
)
from kubetrain.api import constants as C
from kubetrain.api.loader import load_text, parse_manifest
from kubetrain.api.logtext import lines_of, step_prefix
from kubetrain.api.selectors import parse as parse_selector
from kubetrain.api.suggest import not_found_hint
from kubetrain.api.views import Event, LogItem, LogOptions, StateView, StepView, TrainJobDetails, WatchItem
from kubetrain.compiler import Subject, compile_trainjob, ecdsa_keygen, resolve_runtime, validate_objects
from kubetrain.local import namespaces, paths, pods, reaper, status
from kubetrain.local.logstream import LocalLogStream, failure_logs, state_of
from kubetrain.local.store import Store, TrainJobRow, now_rfc3339
from kubetrain.runtimes import builtin_runtimes, builtin_yaml

__all__ = ["LocalBackend", "NotFoundError", "step_prefix"]

RUNTIME_KINDS = (C.KIND_CLUSTER_TRAINING_RUNTIME, C.KIND_TRAINING_RUNTIME)
PASSIVE_KINDS = ("ConfigMap", "Secret")


class NotFoundError(KubetrainError):
    pass


class LocalBackend:
    def __init__(self, store: Store | None = None) -> None:
        self.store = store or Store()
        # "The next command notices": every backend use first records supervisors that died.
        reaper.reap(self.store)

    # Applying.
    def apply(
        self,
        manifests: list[dict[str, Any]],
        *,
        namespace: str,
        workdir: str | None = None,
        detach: bool = True,
    ) -> list[str]:
        """Runtimes, ConfigMaps and Secrets are stored first so TrainJobs in the same batch can use them."""
        applied: list[str] = []
        runtimes = [m for m in manifests if m.get("kind") in RUNTIME_KINDS]
        if runtimes:  # all or nothing: an invalid runtime must not be stored next to the valid ones
            self._check_runtimes(runtimes, namespace)
        for m in manifests:
            if m.get("kind") in RUNTIME_KINDS + PASSIVE_KINDS:
                m = copy.deepcopy(m)
                if m["kind"] != C.KIND_CLUSTER_TRAINING_RUNTIME:
                    m.setdefault("metadata", {}).setdefault("namespace", namespace)
                self.store.put_runtime(m)
                applied.append(f"{m['kind'].lower()}/{m['metadata']['name']}")
        for m in manifests:
            if m.get("kind") == C.KIND_TRAINJOB:
                name = self.submit(m, namespace=namespace, workdir=workdir or os.getcwd(), detach=detach)
                applied.append(f"trainjob/{name}")
            elif m.get("kind") not in RUNTIME_KINDS + PASSIVE_KINDS:
                raise KubetrainError(
                    f"kind {m.get('kind')!r} cannot be applied locally (expected TrainJob, TrainingRuntime, "
                    "ClusterTrainingRuntime, ConfigMap or Secret)"
                )
        return applied

    @staticmethod
    def _check_runtimes(manifests: list[dict[str, Any]], namespace: str) -> None:
        subjects, findings = [], []
        for m in manifests:
            obj, parsed = parse_manifest(m)
            findings += parsed.errors
            if isinstance(obj, TrainingRuntime | ClusterTrainingRuntime):
                if obj.kind == C.KIND_TRAINING_RUNTIME:
                    obj.metadata.namespace = obj.metadata.namespace or namespace
                subjects.append(Subject(obj))
        findings += [f for r in validate_objects(subjects) for f in r.errors]
        if findings:
            raise InvalidObjectError(findings)

    def store_runtimes(self, namespace: str | None) -> list[AnyRuntime]:
        """Runtimes applied on this machine (no built-ins); ``namespace`` filters TrainingRuntimes."""
        out: list[AnyRuntime] = []
        for m in self.store.list_objects(RUNTIME_KINDS):
            model = ClusterTrainingRuntime if m["kind"] == C.KIND_CLUSTER_TRAINING_RUNTIME else TrainingRuntime
            r = model.model_validate(m)
            if namespace is None or r.kind == C.KIND_CLUSTER_TRAINING_RUNTIME or r.metadata.namespace == namespace:
                out.append(r)
        return out

    def runtimes(self, only: str | None = None) -> list[AnyRuntime]:
        """Applied runtimes, then the built-in ones they do not shadow. With ``only``, built-ins are parsed
        just for that name when it is one (parsing all of them is most of a launch's CPU time)."""
        stored = self.store_runtimes(None)
        names = {(r.kind, r.metadata.namespace or "", r.name) for r in stored}
        builtins: list[AnyRuntime] = []
        text = builtin_yaml(only) if only else None
        if text is not None:
            builtins += [
                o
                for o in load_text(text, f"kubetrain/runtimes/{only}.yaml").objects
                if isinstance(o, ClusterTrainingRuntime)
            ]
        elif only is None or not any(r.name == only for r in stored):
            builtins += builtin_runtimes()  # all of them: resolve_runtime suggests near names from these
        return stored + [r for r in builtins if (r.kind, "", r.name) not in names]

    def submit(self, manifest: dict[str, Any], *, namespace: str, workdir: str, detach: bool) -> str:
        """Validate, compile and record a TrainJob; with ``detach`` also start its supervisor process."""
        namespaces.check_available()  # before recording anything: a TrainJob that cannot run is not created
        try:
            tj = TrainJob.model_validate(manifest)
        except ValidationError as exc:
            raise KubetrainError(f"invalid TrainJob: {exc}") from None
        if not tj.metadata.name:
            raise KubetrainError("TrainJob metadata.name is empty (fix: set metadata.name)")
        tj.metadata.namespace = tj.metadata.namespace or namespace
        existing = self.store.get_trainjob(tj.namespace, tj.name)
        if existing is not None and not status.finished(existing.trainjob.get("status") or {}):
            if not detach:
                raise KubetrainError(
                    f"TrainJob {tj.namespace}/{tj.name} is already running (supervisor pid "
                    f"{existing.supervisor_pid}); follow it with `kubetrain logs {tj.name} -f`, or "
                    f"`kubetrain delete trainjob {tj.name}` first"
                )
            return self._update_running(existing, tj)
        candidates = self.runtimes(only=tj.spec.runtime_ref.name)
        result = validate_objects([Subject(tj)], installed=candidates, local="run")[0]
        if not result.ok:
            raise InvalidObjectError(result.errors)
        runtime, _ = resolve_runtime(tj, candidates)
        assert runtime is not None
        tj.metadata.uid = str(uuid.uuid4())
        tj.metadata.creation_timestamp = now_rfc3339()
        tj.status = None
        objects = compile_trainjob(tj, runtime, keygen=ecdsa_keygen)
        wire = tj.to_wire()
        self.store.put_trainjob(wire, objects, str(Path(workdir).resolve()))
        if detach:
            self._spawn_supervisor(tj.namespace, tj.name)
        else:
            self.store.set_supervisor(tj.namespace, tj.name, os.getpid(), pods.proc_start_time(os.getpid()))
        return tj.name

    def _update_running(self, row: TrainJobRow, new: TrainJob) -> str:
        old = TrainJob.model_validate(row.trainjob)
        old_spec = old.spec.model_dump(exclude={"suspend"})
        if new.spec.model_dump(exclude={"suspend"}) != old_spec:
            raise KubetrainError(
                f"TrainJob {row.namespace}/{row.name} is running; only spec.suspend can change "
                f"(fix: `kubetrain delete trainjob {row.name}` first, or change only spec.suspend)"
            )
        row.trainjob["spec"]["suspend"] = bool(new.spec.suspend)
        self.store.update_trainjob(row.namespace, row.name, row.trainjob)
        return row.name

    def _spawn_supervisor(self, namespace: str, name: str) -> None:
        # Registered under our own pid first: if we die before the child starts, the reaper sees a dead pid.
        self.store.set_supervisor(namespace, name, os.getpid(), pods.proc_start_time(os.getpid()))
        out: IO[bytes]
        with open(paths.supervisor_log(), "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubetrain.local.supervisor", namespace, name],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.store.set_supervisor(namespace, name, proc.pid, pods.proc_start_time(proc.pid))

    # Reading.
    def list_trainjobs(self, namespace: str | None, selector: str | None = None) -> list[TrainJob]:
        sel = parse_selector(selector) if selector else None
        jobs = [TrainJob.model_validate(r.trainjob) for r in self.store.list_trainjobs(namespace)]
        return [j for j in jobs if sel is None or sel.matches(j.metadata.labels)]

    def _row(self, name: str, namespace: str) -> TrainJobRow:
        row = self.store.get_trainjob(namespace, name)
        if row is None:
            known = [r.name for r in self.store.list_trainjobs(namespace)]
            hint = not_found_hint(name, known, f"`kubetrain get trainjobs -n {namespace}` lists them")
            raise NotFoundError(f'trainjob "{name}" not found in namespace "{namespace}"{hint}')
        return row

    def get_trainjob(self, name: str, namespace: str) -> TrainJob:
        return TrainJob.model_validate(self._row(name, namespace).trainjob)

    def restarts(self, name: str, namespace: str) -> int:
        return self._row(name, namespace).restarts

    def describe_trainjob(self, name: str, namespace: str) -> TrainJobDetails:
        row = self._row(name, namespace)
        steps = [
            StepView(
                name=p.name,
                replicated_job=p.rjob,
                state=p.state,
                restarts=p.restarts,
                exit_code=p.exit_code,
                pid=p.pid if p.state == "Running" else None,
                message=p.message,
            )
            for p in self.store.list_pods(namespace, name)
        ]
        events = [Event(e.time, e.type, e.reason, e.message) for e in self.store.list_events(namespace, name)]
        jobset = next((o for o in row.objects if o.get("kind") == "JobSet"), {})
        extra = {
            "Backend": "local",
            "JobSet restarts": row.restarts,
            "Supervisor": f"pid {row.supervisor_pid}" if row.supervisor_pid else "not running",
            "Working directory": row.workdir,
            "Logs": str(paths.trainjob_dir(namespace, name, row.uid) / "logs"),
            "Replicated jobs": [rj["name"] for rj in (jobset.get("spec") or {}).get("replicatedJobs") or []],
            "Objects": [f"{o['kind']}/{o['metadata']['name']}" for o in row.objects],
        }
        pod_rows = self.store.list_pods(namespace, name)
        return TrainJobDetails(
            TrainJob.model_validate(row.trainjob),
            steps,
            events,
            extra,
            state=state_of(row, pod_rows),
            failure_logs=failure_logs(pod_rows),
        )

    def logs(self, name: str, namespace: str, *, step: str | None, follow: bool) -> Iterator[str]:
        yield from lines_of(self.log_stream(name, namespace, LogOptions(step=step, follow=follow)))

    def log_stream(self, name: str, namespace: str, options: LogOptions) -> Iterator[LogItem]:
        """Each step's log in chunks as written (see ``kubetrain.local.logstream``)."""
        self._row(name, namespace)
        stream = LocalLogStream(self.store, name, namespace, options, row=lambda: self._row(name, namespace))
        yield from stream.items()

    def states(self, jobs: list[TrainJob]) -> list[StateView]:
        out = []
        for j in jobs:
            row = self.store.get_trainjob(j.namespace, j.name)
            if row is None:
                out.append(StateView("Deleted"))
                continue
            out.append(state_of(row, self.store.list_pods(j.namespace, j.name)))
        return out

    def watch_trainjobs(
        self, namespace: str | None, *, names: list[str] | None = None, selector: str | None = None
    ) -> Iterator[WatchItem | None]:
        """Polls the store (several times a second): what changed since the last look, as a watch reports it."""
        sel = parse_selector(selector) if selector else None
        seen: dict[tuple[str, str], tuple[str, StateView, TrainJob]] = {}
        first = True
        while True:
            now: dict[tuple[str, str], tuple[str, StateView, TrainJob]] = {}
            for row in self.store.list_trainjobs(namespace):
                if names and row.name not in names:
                    continue
                tj = TrainJob.model_validate(row.trainjob)
                if sel is not None and not sel.matches(tj.metadata.labels):
                    continue
                st = state_of(row, self.store.list_pods(row.namespace, row.name))
                now[(row.namespace, row.name)] = (json.dumps(row.trainjob, sort_keys=True), st, tj)
            changed = False
            for key in sorted(now):
                text, st, tj = now[key]
                old = seen.get(key)
                if old is None or old[:2] != (text, st):
                    changed = True
                    yield WatchItem("ADDED" if old is None or first else "MODIFIED", tj, st)
            for key in sorted(set(seen) - set(now)):
                changed = True
                yield WatchItem("DELETED", seen[key][2], seen[key][1])
            seen, first = now, False
            if not changed:
                yield None
            time.sleep(0.25)

    # Deleting.
    def delete_trainjob(self, name: str, namespace: str) -> None:
        row = self._row(name, namespace)
        if reaper.supervisor_alive(row) and row.supervisor_pid != os.getpid():
            assert row.supervisor_pid is not None
            os.kill(row.supervisor_pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and reaper.supervisor_alive(row):
                time.sleep(0.05)
        reaper.kill_pods(self.store, row, "stopped: TrainJob deleted")
        self.store.delete_trainjob(namespace, name)

    def delete_runtime(self, kind: str, name: str, namespace: str | None) -> None:
        if kind not in RUNTIME_KINDS:
            raise KubetrainError(f"cannot delete kind {kind!r} locally (expected TrainJob or a runtime kind)")
        ns = "" if kind == C.KIND_CLUSTER_TRAINING_RUNTIME else namespace or "default"
        if not self.store.delete_object(kind, ns, name):
            if kind == C.KIND_CLUSTER_TRAINING_RUNTIME and builtin_yaml(name) is not None:
                raise KubetrainError(
                    f'clustertrainingruntime "{name}" is built into kubetrain and cannot be deleted '
                    "(an applied runtime of the same name takes its place)"
                )
            where = f" in namespace {ns}" if ns else ""
            known = [r.name for r in self.store_runtimes(None) if r.kind == kind]
            hint = not_found_hint(name, known, "`kubetrain get runtimes -A` lists them")
            raise NotFoundError(f'{kind.lower()} "{name}" not found{where}{hint}')

    def logs_dir(self, name: str, namespace: str) -> Path:
        row = self._row(name, namespace)
        return paths.trainjob_dir(namespace, name, row.uid) / "logs"

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]:
        return [
            r
            for r in self.runtimes()
            if namespace is None
            or r.kind == C.KIND_CLUSTER_TRAINING_RUNTIME
            or (r.metadata.namespace or "default") == namespace
        ]
