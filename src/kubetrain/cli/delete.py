"""``kubetrain delete``: TrainJobs and runtimes by name, ``--all``, or every object of ``-f`` files.

As kubectl: a name that does not exist is reported and the others are still deleted; the exit status is 1 when
anything could not be deleted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from kubetrain.api import KubetrainError
from kubetrain.api import constants as c
from kubetrain.cli._backend import select_backend, with_backend_options
from kubetrain.cli._common import fail
from kubetrain.cli.backend import Backend
from kubetrain.cli.core_objects import CORE_KINDS
from kubetrain.cli.output import error_line

KINDS = {
    "trainjob": c.KIND_TRAINJOB,
    "trainjobs": c.KIND_TRAINJOB,
    "tj": c.KIND_TRAINJOB,
    "trainingruntime": c.KIND_TRAINING_RUNTIME,
    "trainingruntimes": c.KIND_TRAINING_RUNTIME,
    "tr": c.KIND_TRAINING_RUNTIME,
    "clustertrainingruntime": c.KIND_CLUSTER_TRAINING_RUNTIME,
    "clustertrainingruntimes": c.KIND_CLUSTER_TRAINING_RUNTIME,
    "ctr": c.KIND_CLUSTER_TRAINING_RUNTIME,
    "optimizationjob": c.KIND_OPTIMIZATIONJOB,
    "optimizationjobs": c.KIND_OPTIMIZATIONJOB,
    "oj": c.KIND_OPTIMIZATIONJOB,
    **CORE_KINDS,
}


def objects_in(files: tuple[str, ...]) -> list[tuple[str, str, str | None]]:
    """``(kind, name, namespace)`` of every document: only identity is read, so an object that would not
    validate (any more) can still be deleted."""
    out: list[tuple[str, str, str | None]] = []
    for f in files:
        paths = sorted(Path(f).glob("*.y*ml")) if Path(f).is_dir() else [Path(f)]
        for p in paths:
            try:
                text = sys.stdin.read() if str(p) == "-" else p.read_text(encoding="utf-8")
                docs = list(yaml.safe_load_all(text))
            except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
                raise KubetrainError(f"{p}: cannot read: {exc}") from None
            for i, doc in enumerate(docs):
                if doc is None:
                    continue
                meta = doc.get("metadata") if isinstance(doc, dict) else None
                if not isinstance(meta, dict) or not meta.get("name") or not doc.get("kind"):
                    raise KubetrainError(f"{p}: document {i + 1} has no kind or metadata.name (fix: add them)")
                out.append((str(doc["kind"]), str(meta["name"]), meta.get("namespace")))
    return out


def _delete_one(backend: Backend, kind: str, name: str, namespace: str, keep_logs: bool = False) -> str:
    if kind == c.KIND_TRAINJOB:
        logs_dir_of = getattr(backend, "logs_dir", None)  # only the local backend keeps logs
        if logs_dir_of is None:
            backend.delete_trainjob(name, namespace)
            return f'trainjob.{c.GROUP} "{name}" deleted'
        # Locally its logs go with it unless kept (the path is printed then).
        logs_dir = logs_dir_of(name, namespace) if keep_logs else None
        backend.delete_trainjob(name, namespace, keep_logs=keep_logs)  # type: ignore[call-arg]
        kept = f" (logs kept in {logs_dir})" if logs_dir else ""
        return f'trainjob.{c.GROUP} "{name}" deleted{kept}'
    if kind == c.KIND_OPTIMIZATIONJOB:
        if getattr(backend, "logs_dir", None) is None:
            backend.delete_optimizationjob(name, namespace)
        else:
            backend.delete_optimizationjob(name, namespace, keep_logs=keep_logs)  # type: ignore[call-arg]
        return f'optimizationjob.{c.GROUP} "{name}" deleted (and its trials)'
    if kind in (c.KIND_TRAINING_RUNTIME, c.KIND_CLUSTER_TRAINING_RUNTIME):
        backend.delete_runtime(kind, name, namespace)
        return f'{kind.lower()}.{c.GROUP} "{name}" deleted'
    if kind in CORE_KINDS.values():
        return backend.delete_core(kind, name, namespace)
    raise KubetrainError(
        f'{kind} "{name}": kubetrain deletes TrainJobs, OptimizationJobs, runtimes, ConfigMaps, Secrets and '
        'PersistentVolumeClaims only '
        f"(use kubectl for {kind})"
    )


def register(group: click.Group) -> None:
    @group.command("delete")
    @click.argument("kind", required=False, type=click.Choice(sorted(KINDS)))
    @click.argument("names", nargs=-1)
    @click.option(
        "-f",
        "--filename",
        "files",
        multiple=True,
        type=click.Path(allow_dash=True),
        help="Delete the objects named in these files or directories (repeatable).",
    )
    @click.option("--all", "all_", is_flag=True, help="Delete every object of KIND in the namespace.")
    @click.option("--keep-logs", is_flag=True, help="Locally: keep the TrainJobs' logs on disk (the path is printed).")
    @with_backend_options
    def delete(
        kind: str | None,
        names: tuple[str, ...],
        files: tuple[str, ...],
        all_: bool,
        keep_logs: bool,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """Delete TrainJobs (stopping every process of them like the kubelet: SIGTERM, the pods' grace period,
        SIGKILL), runtimes, ConfigMaps, Secrets and PersistentVolumeClaims. Locally a TrainJob's state and logs go
        too, unless --keep-logs; volumes stay. A claim is deleted with its data, but while an unfinished TrainJob
        uses it, it stays Terminating until that one ends (as Kubernetes' pvc-protection defers it).

        A missing name is reported and the rest are still deleted; the exit status is then 1.

        \b
        Examples:
          kubetrain delete trainjob my-job
          kubetrain delete trainjob my-job --keep-logs
          kubetrain delete tj job-a job-b -n team-a
          kubetrain delete trainjob --all
          kubetrain delete optimizationjob tune-lr      # its trials too (oj for short)
          kubetrain delete -f trainjob.yaml
          kubetrain delete clustertrainingruntime my-runtime
          kubetrain delete configmap my-config
          kubetrain delete pvc my-data
        """
        if files and (kind or names or all_):
            fail("-f cannot be combined with a kind, names or --all", "kubetrain delete -f FILE")
        if not files and not kind:
            fail("nothing to delete", "kubetrain delete trainjob NAME, kubetrain delete trainjob --all or -f FILE")
        if kind and not names and not all_:
            fail(f"give the names of the {kind} to delete, or --all", f"kubetrain delete {kind} NAME")
        if names and all_:
            fail("names and --all cannot be used together", f"kubetrain delete {kind} --all")
        backend = select_backend(kubeconfig, context)
        targets: list[tuple[str, str, str]] = []
        try:
            if files:
                targets = [(k, n, ns or namespace) for k, n, ns in objects_in(files)]
            else:
                assert kind is not None
                real = KINDS[kind]
                if all_:
                    if real == c.KIND_TRAINJOB:
                        chosen = [j.name for j in backend.list_trainjobs(namespace)]
                    elif real == c.KIND_OPTIMIZATIONJOB:
                        chosen = [j.name for j in backend.list_optimizationjobs(namespace)]
                    elif real in CORE_KINDS.values():
                        chosen = [o["metadata"]["name"] for o in backend.list_core(real, namespace)]
                    else:
                        # Locally the built-in runtimes are listed but are not objects one can delete.
                        applied = getattr(backend, "store_runtimes", backend.list_runtimes)
                        chosen = [r.name for r in applied(namespace) if r.kind == real]
                    if not chosen:
                        click.echo(f"No {real}s found in namespace {namespace}.", err=True)
                        return
                    names = tuple(chosen)
                targets = [(real, n, namespace) for n in names]
        except KubetrainError as exc:
            fail(str(exc))
        failed = 0
        # OptimizationJobs, then TrainJobs first: a job needs its runtime, ConfigMaps, Secrets and claims until it is
        # gone (a claim it used then goes at once instead of waiting for pvc-protection).
        first = {c.KIND_OPTIMIZATIONJOB: 0, c.KIND_TRAINJOB: 1}
        for k, n, ns in sorted(targets, key=lambda t: first.get(t[0], 2)):
            try:
                click.echo(_delete_one(backend, k, n, ns, keep_logs))
            except KubetrainError as exc:
                error_line(str(exc))
                failed += 1
        if failed:
            sys.exit(1)
