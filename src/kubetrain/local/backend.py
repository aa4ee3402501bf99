"""``LocalBackend``: the CLI's backend contract (``kubetrain.api.views.Backend``) on this machine.

The verbs (apply/submit with kubectl's update rules, reads that notice lost supervisors, delete, prune) are
together because each is short and they share the store and the existence rules; the machinery they drive lives in
the modules they import.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from kubetrain.api import constants as C
from kubetrain.api.errors import InvalidObjectError, KubetrainError
from kubetrain.api.logtext import lines_of, step_prefix
from kubetrain.api.views import LogItem, LogOptions, ProgressPoint, StateView, WatchItem
from kubetrain.local import objects as core
from kubetrain.local import optimizationjobs, paths, pod_objects
from kubetrain.local.logs.stream import LocalLogStream, failure_logs, state_of, step_view
from kubetrain.local.objects import NotFoundError
from kubetrain.local.sandbox import namespaces, pods
from kubetrain.local.store import reaper, status
from kubetrain.local.store.db import AlreadyExistsError, Store, TrainJobRow
from kubetrain.local.store.status import now_rfc3339
from kubetrain.local.submit import admission, changes

if TYPE_CHECKING:
    from kubetrain.api import AnyRuntime, TrainJob
    from kubetrain.api.optimization import OptimizationJob
    from kubetrain.api.views import TrainJobDetails
    from kubetrain.local.housekeeping import Pruned

# The models, the compiler and the built-in runtimes are imported where needed: the supervisor, `get` and a
# `run` answered from the compile cache do without them (see kubetrain.local.submit.compile_cache).

__all__ = ["LocalBackend", "NotFoundError", "step_prefix"]

RUNTIME_KINDS = changes.RUNTIME_KINDS
PASSIVE_KINDS = core.CORE_KINDS  # ConfigMap, Secret, PersistentVolumeClaim: stored for the pods to use


class LocalBackend:
    def __init__(self, store: Store | None = None) -> None:
        self.store = store or Store()

    # Applying.
    def apply(
        self,
        manifests: list[dict[str, Any]],
        *,
        namespace: str,
        workdir: str | None = None,
        detach: bool = True,
    ) -> list[str]:
        """Runtimes, ConfigMaps, Secrets and PersistentVolumeClaims are stored first so TrainJobs in the same batch
        can use them. Returns ``kind/name created|configured|unchanged`` per object, like kubectl."""
        applied: list[str] = []
        runtimes = [m for m in manifests if m.get("kind") in RUNTIME_KINDS]
        if runtimes:  # all or nothing: an invalid runtime must not be stored next to the valid ones
            self._check_runtimes(runtimes, namespace)
        for m in manifests:
            if m.get("kind") in PASSIVE_KINDS:
                verb = core.apply(self.store, m, namespace)
                applied.append(f"{m['kind'].lower()}/{m['metadata']['name']} {verb}")
            elif m.get("kind") in RUNTIME_KINDS:
                m = copy.deepcopy(m)
                if m["kind"] != C.KIND_CLUSTER_TRAINING_RUNTIME:
                    m.setdefault("metadata", {}).setdefault("namespace", namespace)
                verb = self.store.put_object(m)
                applied.append(f"{m['kind'].lower()}/{m['metadata']['name']} {verb}")
        for m in manifests:
            if m.get("kind") == C.KIND_TRAINJOB:
                name, verb = self.submit(m, namespace=namespace, workdir=workdir or os.getcwd(), detach=detach)
                applied.append(f"trainjob/{name} {verb}")
            elif m.get("kind") == C.KIND_OPTIMIZATIONJOB:
                name, verb = self.apply_optimizationjob(m, namespace=namespace, workdir=workdir or os.getcwd())
                applied.append(f"optimizationjob/{name} {verb}")
            elif m.get("kind") not in RUNTIME_KINDS + PASSIVE_KINDS:
                raise KubetrainError(
                    f"kind {m.get('kind')!r} cannot be applied locally (expected TrainJob, OptimizationJob, "
                    "TrainingRuntime, ClusterTrainingRuntime, ConfigMap, Secret or PersistentVolumeClaim)"
                )
        return applied

    @staticmethod
    def _check_runtimes(manifests: list[dict[str, Any]], namespace: str) -> None:
        from kubetrain.api import ClusterTrainingRuntime, TrainingRuntime
        from kubetrain.api.loader import parse_manifest
        from kubetrain.compiler import Subject, validate_objects

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
        return changes.stored_runtimes(self.store, namespace)

    def runtimes(self, only: str | None = None) -> list[AnyRuntime]:
        """Applied runtimes, then the built-in ones they do not shadow (``changes.runtimes``)."""
        return changes.runtimes(self.store, only)

    def submit(
        self,
        manifest: dict[str, Any],
        *,
        namespace: str,
        workdir: str,
        detach: bool,
        replace: bool = False,
        create_only: bool | None = None,
    ) -> tuple[str, str]:
        """Validate, compile and record a TrainJob, then start its supervisor (a detached process with
        ``detach``; otherwise the caller runs it). An existing TrainJob of that name is updated by upstream's
        mutability rules (``apply``), or, with ``create_only`` (default: when not detached, i.e. ``run``), is an
        error, unless ``replace`` and it has finished. Returns the name and ``created``, ``configured``,
        ``unchanged`` or ``replaced``."""
        import secrets
        import string
        import uuid

        from pydantic import ValidationError

        from kubetrain.api import TrainJob
        from kubetrain.compiler import Subject, compile_trainjob, ecdsa_keygen, resolve_runtime, validate_objects

        create_only = not detach if create_only is None else create_only
        namespaces.check_available()  # before recording anything: a TrainJob that cannot run is not created
        try:
            tj = TrainJob.model_validate(manifest)
        except ValidationError as exc:
            raise KubetrainError(f"invalid TrainJob: {exc}") from None
        tj.metadata.namespace = tj.metadata.namespace or namespace
        generated = not tj.metadata.name and bool(tj.metadata.generate_name)
        if not tj.metadata.name and not generated:
            raise KubetrainError("TrainJob metadata.name is empty (fix: set metadata.name or metadata.generateName)")
        if not generated:
            existing = self.store.get_trainjob(tj.namespace, tj.name)
            if existing is not None and not (replace and status.finished(existing.trainjob.get("status") or {})):
                return tj.name, self._update(existing, tj, create_only=create_only)
        for attempt in range(20):
            if generated:
                suffix = "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(5))
                tj.metadata.name = f"{tj.metadata.generate_name}{suffix}"
            candidates = self.runtimes(only=tj.spec.runtime_ref.name)
            result = validate_objects([Subject(tj)], installed=candidates, local="run")[0]
            if not result.ok:
                raise InvalidObjectError(result.errors)
            runtime, _ = resolve_runtime(tj, candidates)
            assert runtime is not None
            self.last_runtime = (runtime.kind, runtime.metadata.namespace or tj.namespace, runtime.name)
            self.last_warnings = result.warnings
            tj.metadata.uid = str(uuid.uuid4())
            tj.metadata.creation_timestamp = now_rfc3339()
            tj.status = None
            objects = compile_trainjob(tj, runtime, keygen=ecdsa_keygen)
            try:
                verb = self._create(tj.to_wire(), objects, workdir, detach=detach, replace=replace)
                return tj.name, verb
            except AlreadyExistsError:
                if generated and attempt < 19:
                    continue
                existing = self.store.get_trainjob(tj.namespace, tj.name)
                if existing is None:
                    raise
                return tj.name, self._update(existing, tj, create_only=create_only)
        raise KubetrainError(f"could not find a free name for generateName {tj.metadata.generate_name!r}")

    def submit_compiled(
        self, trainjob: dict[str, Any], objects: list[dict[str, Any]], *, workdir: str, detach: bool, replace: bool
    ) -> tuple[str, str]:
        """``submit`` for a TrainJob validated and compiled before (``compile_cache``); never updates."""
        namespaces.check_available()
        meta = trainjob["metadata"]
        existing = self.store.get_trainjob(meta["namespace"], meta["name"])
        if existing is not None and not (replace and status.finished(existing.trainjob.get("status") or {})):
            raise _exists(existing)
        return meta["name"], self._create(trainjob, objects, workdir, detach=detach, replace=replace)

    def _create(
        self, wire: dict[str, Any], objects: list[dict[str, Any]], workdir: str, *, detach: bool, replace: bool
    ) -> str:
        meta = wire["metadata"]
        _check_exec_sizes(meta["name"], objects)
        admission.check(objects)
        core.check_claims(self.store, meta["namespace"], objects)
        owner = (os.getpid(), pods.proc_start_time(os.getpid()))
        replaced = self.store.create_trainjob(
            wire, objects, str(Path(workdir).resolve()), owner, replace_finished=replace
        )
        if replaced is not None:
            from kubetrain.local.housekeeping import remove_files

            remove_files(replaced, keep_logs=False)
        if detach:
            self._spawn_supervisor(meta["namespace"], meta["name"])
        self._retention()
        return "replaced" if replaced is not None else "created"

    def _update(self, row: TrainJobRow, new: TrainJob, *, create_only: bool) -> str:
        if create_only:
            raise _exists(row)
        return changes.update(self.store, row, new)

    def scale_trainjob(self, name: str, namespace: str, replicas: int) -> str:
        """Set ``spec.trainer.numNodes``, as ``kubectl scale`` does (``changes.scale``)."""
        return changes.scale(self.store, self._row(name, namespace), replicas)

    def _spawn_supervisor(self, namespace: str, name: str) -> None:
        """Start the detached supervisor. The TrainJob was created with *our* pid as its owner; the child waits
        for ``go`` on stdin, which we send only after recording its pid. If we die in between, the child exits
        without acting and readers see the TrainJob's owner (us) gone: it is never run twice or silently lost."""
        from kubetrain.local.supervisor.controller import GO

        out: IO[bytes]
        with open(paths.supervisor_log(), "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kubetrain.local.supervisor.controller", namespace, name],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        assert proc.stdin is not None
        try:
            self.store.set_supervisor(namespace, name, proc.pid, pods.proc_start_time(proc.pid))
            proc.stdin.write(GO)
            proc.stdin.close()
        except BaseException:
            proc.kill()
            raise

    def _retention(self) -> None:
        from kubetrain.local import config

        if not paths.config_file().exists():
            return
        from kubetrain.local import housekeeping

        try:
            housekeeping.apply_retention(self.store, config.load().retention)
        except (KubetrainError, OSError):
            pass  # housekeeping never fails a submit

    # Reading.
    def list_trainjobs(self, namespace: str | None, selector: str | None = None) -> list[TrainJob]:
        from kubetrain.api import TrainJob
        from kubetrain.api.selectors import parse as parse_selector

        sel = parse_selector(selector) if selector else None
        rows = reaper.check_all(self.store, self.store.list_trainjobs(namespace))
        jobs = [TrainJob.model_validate(r.trainjob) for r in rows]
        return [j for j in jobs if sel is None or sel.matches(j.metadata.labels)]

    def _row(self, name: str, namespace: str) -> TrainJobRow:
        row = self.store.get_trainjob(namespace, name)
        if row is None:
            known = [r.name for r in self.store.list_trainjobs(namespace)]
            from kubetrain.api.suggest import not_found_hint

            hint = not_found_hint(name, known, f"`kubetrain get trainjobs -n {namespace}` lists them")
            raise NotFoundError(f'trainjob "{name}" not found in namespace "{namespace}"{hint}')
        return reaper.check(self.store, row)

    def get_trainjob(self, name: str, namespace: str) -> TrainJob:
        from kubetrain.api import TrainJob

        return TrainJob.model_validate(self._row(name, namespace).trainjob)

    def get_status(self, name: str, namespace: str) -> dict[str, Any]:
        """The TrainJob's status as stored (no model: for callers that only need state and message)."""
        return dict(self._row(name, namespace).trainjob.get("status") or {})

    def progress_history(self, name: str, namespace: str) -> list[ProgressPoint]:
        from kubetrain.api.views import ProgressPoint

        self._row(name, namespace)  # not found: the usual error with close matches
        return [ProgressPoint(p.time, p.report, p.source) for p in self.store.list_progress(namespace, name)]

    def restarts(self, name: str, namespace: str) -> int:
        return self._row(name, namespace).restarts

    def describe_trainjob(self, name: str, namespace: str) -> TrainJobDetails:
        from kubetrain.api import TrainJob
        from kubetrain.api.views import Event, TrainJobDetails

        row = self._row(name, namespace)
        steps = [step_view(p) for p in self.store.list_pods(namespace, name)]
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
            progress_source=self.store.last_progress_source(namespace, name),
        )

    def logs(self, name: str, namespace: str, *, step: str | None, follow: bool) -> Iterator[str]:
        yield from lines_of(self.log_stream(name, namespace, LogOptions(step=step, follow=follow)))

    def log_stream(
        self, name: str, namespace: str, options: LogOptions, *, ended: threading.Event | None = None
    ) -> Iterator[LogItem]:
        """Each step's log in chunks as written (see ``kubetrain.local.logs.stream``); ``ended`` tells a follow that
        the supervisor (of this process) has ended, so it finishes without waiting for its next look."""
        self._row(name, namespace)
        stream = LocalLogStream(
            self.store, name, namespace, options, row=lambda: self._row(name, namespace), ended=ended
        )
        yield from stream.items()

    def state(self, name: str, namespace: str) -> StateView:
        """The TrainJob's state with its reason, without building its model (``run``'s last line)."""
        row = self._row(name, namespace)
        return state_of(row, self.store.list_pods(namespace, name))

    def states(self, jobs: list[TrainJob]) -> list[StateView]:
        out = []
        for j in jobs:
            row = self.store.get_trainjob(j.namespace, j.name)
            if row is not None:
                row = reaper.check(self.store, row)
            if row is None:
                out.append(StateView("Deleted"))
                continue
            out.append(state_of(row, self.store.list_pods(j.namespace, j.name)))
        return out

    def watch_trainjobs(
        self, namespace: str | None, *, names: list[str] | None = None, selector: str | None = None
    ) -> Iterator[WatchItem | None]:
        """Polls the store (four times a second): what changed since the last look, as a watch reports it. Only the
        TrainJobs whose row or pods were written since are read again (``Store.change_marks``), so a look at 1,000
        quiet TrainJobs costs one query; unfinished ones are still checked for a lost supervisor every time."""
        from kubetrain.api import TrainJob
        from kubetrain.api.selectors import parse as parse_selector

        sel = parse_selector(selector) if selector else None
        # key -> (mark, row, text, state, model); the model is None when the selector or names leave it out.
        seen: dict[tuple[str, str], tuple[tuple[Any, ...], TrainJobRow, str, StateView, TrainJob | None]] = {}
        first = True
        while True:
            marks = self.store.change_marks(namespace)
            if names:
                marks = {k: m for k, m in marks.items() if k[1] in names}
            changed = False
            now: dict[tuple[str, str], tuple[tuple[Any, ...], TrainJobRow, str, StateView, TrainJob | None]] = {}
            for key in sorted(marks):
                old = seen.get(key)
                if old is not None and old[0] == marks[key]:
                    # A supervisor started after the last read does not move the mark: the check re-reads the
                    # row then (and records a real loss once, which moves the mark for the next look).
                    now[key] = old if not reaper.lost(old[1]) else (old[0], reaper.check(self.store, old[1]), *old[2:])
                    continue
                row = self.store.get_trainjob(*key)
                if row is None:
                    continue  # deleted since the marks were read
                row = reaper.check(self.store, row)
                text = json.dumps(row.trainjob, sort_keys=True)
                st = state_of(row, self.store.list_pods(row.namespace, row.name))
                tj = TrainJob.model_validate(row.trainjob)
                model = tj if sel is None or sel.matches(tj.metadata.labels) else None
                now[key] = (marks[key], row, text, st, model)
                if model is not None and (old is None or old[4] is None or old[2:4] != (text, st)):
                    changed = True
                    yield WatchItem("ADDED" if old is None or old[4] is None or first else "MODIFIED", model, st)
                elif model is None and old is not None and old[4] is not None:
                    changed = True  # no longer matches the selector: gone, as a watch with a selector says
                    yield WatchItem("DELETED", old[4], old[3])
            for key in sorted(set(seen) - set(now)):
                gone = seen[key]
                if gone[4] is not None:
                    changed = True
                    yield WatchItem("DELETED", gone[4], gone[3])
            if not changed or first:
                yield None  # also right after the first look: the initial list is complete
            seen, first = now, False
            time.sleep(0.25)

    def compiled_objects(self, name: str, namespace: str) -> list[dict[str, Any]]:
        """Every object the TrainJob was compiled into, as stored when it was created or last updated."""
        from kubetrain.api.views import secret_values_hidden

        return [secret_values_hidden(o) for o in self._row(name, namespace).objects]

    # Deleting.
    def delete_trainjob(self, name: str, namespace: str, *, keep_logs: bool = False) -> None:
        """Stop every process of the TrainJob (each pod gets its grace period), forget it, and remove its files
        (its logs too unless ``keep_logs``: ``logs_dir`` says where they stay). Volumes stay."""
        row = self._row(name, namespace)
        if reaper.supervisor_alive(row) and row.supervisor_pid != os.getpid():
            assert row.supervisor_pid is not None
            self._stop_supervisor(row)
        reaper.kill_pods(self.store, row, "stopped: TrainJob deleted")
        if not self.store.delete_trainjob(namespace, name, uid=row.uid):
            raise NotFoundError(f'trainjob "{name}" was deleted or replaced meanwhile')
        from kubetrain.local.housekeeping import remove_files

        remove_files(row, keep_logs=keep_logs)

    # OptimizationJobs (see kubetrain.local.optimizationjobs; their controller is kubetrain.local.trials).
    def apply_optimizationjob(self, manifest: dict[str, Any], *, namespace: str, workdir: str) -> tuple[str, str]:
        """Create (or relabel) an OptimizationJob. A new one gets its first trials here, at once (the controller's
        first pass, run by this process), then its controller process takes over."""
        from kubetrain.local.trials import Controller

        namespaces.check_available()  # its trials could never run: nothing is recorded
        name, verb = optimizationjobs.apply(self.store, manifest, namespace=namespace, workdir=workdir)
        if verb != "created":
            return name, verb
        ns = manifest.get("metadata", {}).get("namespace") or namespace
        try:
            row = optimizationjobs.find(self.store, name, ns)
            if row is not None:
                Controller(self.store, ns, name, self.submit_trial, self.stop_trial).step(row)
        finally:
            optimizationjobs.spawn_controller(self.store, ns, name)
        return name, verb

    def stop_trial(self, name: str, namespace: str, why: str) -> None:
        """Stop a trial early: suspended (its pods stop, as ``spec.suspend`` stops them) and annotated with why."""
        from kubetrain.api import TrainJob
        from kubetrain.compiler.optimization.stopping import ANNOTATION_STOPPED

        row = self._row(name, namespace)
        tj = TrainJob.model_validate(row.trainjob)
        tj.metadata.annotations = {**(tj.metadata.annotations or {}), ANNOTATION_STOPPED: why}
        tj.spec.suspend = True
        changes.update(self.store, row, tj)

    def submit_trial(self, manifest: dict[str, Any], namespace: str, workdir: str) -> None:
        """A trial TrainJob, submitted as ``kubetrain apply`` submits one (never replacing an existing one)."""
        self.submit(manifest, namespace=namespace, workdir=workdir, detach=True, create_only=True)

    def list_optimizationjobs(self, namespace: str | None) -> list[OptimizationJob]:
        from kubetrain.api.optimization import OptimizationJob

        return [OptimizationJob.model_validate(r.manifest) for r in optimizationjobs.list_rows(self.store, namespace)]

    def get_optimizationjob(self, name: str, namespace: str) -> OptimizationJob:
        from kubetrain.api.optimization import OptimizationJob

        return OptimizationJob.model_validate(optimizationjobs.get(self.store, name, namespace).manifest)

    def delete_optimizationjob(self, name: str, namespace: str, *, keep_logs: bool = False) -> None:
        """Stop its controller, then delete every trial (each TrainJob as ``delete trainjob`` does: its pods get
        their grace period), then the OptimizationJob: what ownerReference garbage collection does on a cluster."""
        row = optimizationjobs.get(self.store, name, namespace)
        optimizationjobs.stop_controller(row)
        for trial in optimizationjobs.trial_rows(self.store, row):
            try:
                self.delete_trainjob(trial.name, namespace, keep_logs=keep_logs)
            except NotFoundError:
                continue  # deleted meanwhile
        if not optimizationjobs.delete(self.store, row):
            raise NotFoundError(f'optimizationjob "{name}" was deleted or replaced meanwhile')

    def _stop_supervisor(self, row: TrainJobRow) -> None:
        from kubetrain.local.sandbox import terminate

        assert row.supervisor_pid is not None
        grace = max(
            [terminate.grace_of(((rj.get("template") or {}).get("spec") or {}).get("template", {}).get("spec") or {})
             for o in row.objects if o.get("kind") == "JobSet"
             for rj in (o.get("spec") or {}).get("replicatedJobs") or []]
            or [terminate.DEFAULT_GRACE]
        )
        # First SIGTERM: the supervisor stops the pods gracefully; a second one (after the grace period) forces.
        terminate.signal_until_gone(row.supervisor_pid, lambda: reaper.supervisor_alive(row),
                                    ((signal.SIGTERM, grace + 15), (signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)))

    def delete_runtime(self, kind: str, name: str, namespace: str | None) -> None:
        if kind not in RUNTIME_KINDS:
            raise KubetrainError(f"cannot delete kind {kind!r} locally (expected TrainJob or a runtime kind)")
        ns = "" if kind == C.KIND_CLUSTER_TRAINING_RUNTIME else namespace or "default"
        if not self.store.delete_object(kind, ns, name):
            from kubetrain.runtimes import builtin_yaml

            if kind == C.KIND_CLUSTER_TRAINING_RUNTIME and builtin_yaml(name) is not None:
                raise KubetrainError(
                    f'clustertrainingruntime "{name}" is built into kubetrain and cannot be deleted '
                    "(an applied runtime of the same name takes its place)"
                )
            where = f" in namespace {ns}" if ns else ""
            known = [r.name for r in self.store_runtimes(None) if r.kind == kind]
            from kubetrain.api.suggest import not_found_hint

            hint = not_found_hint(name, known, "`kubetrain get runtimes -A` lists them")
            raise NotFoundError(f'{kind.lower()} "{name}" not found{where}{hint}')

    # ConfigMaps, Secrets and PersistentVolumeClaims (see kubetrain.local.objects); the TrainJobs' pods and events
    # (read only: see kubetrain.local.pod_objects).
    def list_core(
        self, kind: str, namespace: str | None, selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        if kind in pod_objects.KINDS:
            return pod_objects.list_objects(self.store, kind, namespace, selector, field_selector)
        objs = core.list_objects(self.store, kind, namespace, selector)
        if field_selector:
            from kubetrain.api.selectors import parse_fields

            fields = parse_fields(field_selector, kind, core.plural(kind))
            objs = [o for o in objs if fields.matches(o)]
        return objs

    def get_core(self, kind: str, name: str, namespace: str) -> dict[str, Any]:
        if kind in pod_objects.KINDS:
            return pod_objects.get(self.store, kind, name, namespace)
        return core.get(self.store, kind, name, namespace)

    def delete_core(self, kind: str, name: str, namespace: str) -> str:
        return core.delete(self.store, kind, name, namespace)

    @staticmethod
    def claim_path(pvc: dict[str, Any]) -> str:
        meta = pvc["metadata"]
        return str(paths.claim_dir(meta.get("namespace", "default"), meta["name"], meta["uid"]))

    def core_users(self, kind: str, name: str, namespace: str) -> list[str]:
        """TrainJobs whose pods use the object (``describe``'s "Used By")."""
        return [
            r.name
            for r in self.store.list_trainjobs(namespace)
            if not status.finished(r.trainjob.get("status") or {}) and _references(r.objects, kind, name)
        ]

    def logs_dir(self, name: str, namespace: str) -> Path:
        row = self._row(name, namespace)
        return paths.trainjob_dir(namespace, name, row.uid) / "logs"

    def prune(
        self, *, older_than: float = 0.0, namespace: str | None = None, volumes: bool = False, dry_run: bool = False
    ) -> list[Pruned]:
        from kubetrain.local import housekeeping

        if self.store.read_only is not None and not dry_run:
            housekeeping.free_space_first(self.store, older_than=older_than, namespace=namespace)
            self.store.close()
            self.store = Store()
        return housekeeping.prune(
            self.store, older_than=older_than, namespace=namespace, volumes=volumes, dry_run=dry_run
        )

    def list_runtimes(self, namespace: str | None) -> list[AnyRuntime]:
        return [
            r
            for r in self.runtimes()
            if namespace is None
            or r.kind == C.KIND_CLUSTER_TRAINING_RUNTIME
            or (r.metadata.namespace or "default") == namespace
        ]


def _exists(row: TrainJobRow) -> AlreadyExistsError:
    finished = status.finished(row.trainjob.get("status") or {})
    state = status.state_of(row.trainjob.get("status") or {}) or "Running"
    fix = (
        f"`kubetrain run --replace` replaces it (its logs are removed), `kubetrain delete trainjob {row.name}` "
        "removes it, or set metadata.generateName for a new name on every run"
        if finished
        else f"follow it with `kubetrain logs {row.name} -f`, or `kubetrain delete trainjob {row.name}` first"
    )
    why = f"({state})" if finished else f"and is running (supervisor pid {row.supervisor_pid})"
    return AlreadyExistsError(f'trainjob "{row.name}" already exists in namespace "{row.namespace}" {why}; {fix}')


def _references(compiled: list[dict[str, Any]], kind: str, name: str) -> bool:
    """Whether the pods of a TrainJob's compiled objects mount or read the object."""
    if kind == "PersistentVolumeClaim":
        return name in core.claim_names(compiled)
    text = json.dumps([o for o in compiled if o.get("kind") == "JobSet"])
    key = {"ConfigMap": ('"configMapRef"', '"configMapKeyRef"', '"configMap"'),
           "Secret": ('"secretRef"', '"secretKeyRef"', '"secret"')}[kind]
    return any(k in text for k in key) and f'"{name}"' in text


def _check_exec_sizes(name: str, objects: list[dict[str, Any]]) -> None:
    """Refuse, before anything is recorded, a TrainJob whose processes Linux could not start (E2BIG)."""
    for o in objects:
        if o.get("kind") != "JobSet":
            continue
        for rj in (o.get("spec") or {}).get("replicatedJobs") or []:
            pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            for kind in ("initContainers", "containers"):
                for c in pod.get(kind) or []:
                    env = pods.base_env(c.get("image"))
                    env.update({e["name"]: str(e.get("value", "")) for e in c.get("env") or [] if "name" in e})
                    argv = [str(a) for a in (c.get("command") or []) + (c.get("args") or [])]
                    where = (
                        f"TrainJob {name}: JobSet spec.replicatedJobs[{rj.get('name')}].template.spec.template.spec."
                        f"{kind}[{c.get('name')}]"
                    )
                    pods.check_exec_size(argv, env, where)
