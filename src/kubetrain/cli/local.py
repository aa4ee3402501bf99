"""The workload verbs that submit: ``run`` and ``apply`` (``get``, ``describe``, ``logs``, ``delete``, ``wait``
and ``prune`` have their own modules).

They run against this machine (``kubetrain.local``) unless ``--kubeconfig``/``--context`` is given or
``KUBETRAIN_BACKEND=k8s`` is set, in which case the cluster backend (``kubetrain.k8s``) serves them.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kubetrain.api.errors import KubetrainError
from kubetrain.cli._backend import is_cluster as _is_cluster
from kubetrain.cli._backend import select_backend as _backend
from kubetrain.cli._backend import with_backend_options as _with_backend_options
from kubetrain.cli._common import fail, files_option, print_findings
from kubetrain.cli.output import print_applied
from kubetrain.service.submit import submit, workdirs

if TYPE_CHECKING:
    from kubetrain.api.loader import Manifest
    from kubetrain.cli.backend import Backend

__all__ = ["print_applied", "register"]


def _load(
    files: tuple[str, ...], backend: Backend, namespace: str, cluster: bool
) -> tuple[list[Manifest], list[str]]:
    """Load and check the files with the same rules as `validate` (against the backend's installed runtimes);
    print every finding, deprecation warnings included, and stop on errors before anything is applied."""
    from kubetrain.service.checking import check_files

    checked = check_files(files, namespace=namespace, backend=backend, local=None if cluster else "run")
    print_findings(checked.result)
    if not checked.result.ok:
        sys.exit(1)
    # Locally a pod without workingDir starts where its manifest lives, so `command: [torchrun, train.py]`
    # finds a script next to the YAML.
    return checked.objects, workdirs(checked.sources)


def _cached(files: tuple[str, ...], namespace: str) -> tuple[Any, str | None]:
    """The compile cache's entry for these files, if any, and their key (None: not cacheable)."""
    from kubetrain.local.store.db import Store
    from kubetrain.local.submit import compile_cache

    if compile_cache.disabled():
        return None, None
    try:
        key = compile_cache.key(files, namespace)
        if key is None:
            return None, None
        store = Store()
        try:
            return compile_cache.lookup(store, key), key
        finally:
            store.close()  # a connection left open keeps the database's write-ahead log after this process
    except KubetrainError:
        return None, None  # the full path reports what is wrong (e.g. an unusable KUBETRAIN_HOME)


def _file_of(files: tuple[str, ...], workdir: str) -> int:
    """Which -f argument is in ``workdir`` (the TrainJob's file; only asked when every -f is a plain file)."""
    for i, f in enumerate(files):
        if f != "-" and str(Path(f).resolve().parent) == workdir:
            return i
    return 0


def _run_errors(fn: Callable[[], object]) -> None:
    try:
        fn()
    except KubetrainError as exc:
        fail(str(exc))


_allow_privileged_option = click.option(
    "--allow-privileged",
    is_flag=True,
    help="Locally, as root: accept containers with securityContext.privileged (refused otherwise; "
    "or set security.allowPrivileged in $KUBETRAIN_HOME/config.yaml). No effect on a cluster.",
)


_overcommit_option = click.option(
    "--overcommit",
    is_flag=True,
    help="Locally: admit TrainJobs whose pods together ask for more cpu, memory or GPUs than this machine has "
    "(they are Unschedulable otherwise); their pods then share the GPUs they hold (never another TrainJob's). "
    "No effect on a cluster.",
)


def _overcommit(allow: bool) -> None:
    if allow:
        from kubetrain.local.scheduling.gang import OVERCOMMIT_ENV

        # Read by the supervisors of the TrainJobs this command submits (in this process, or inherited).
        os.environ[OVERCOMMIT_ENV] = "1"


def _allow_privileged(allow: bool) -> None:
    if allow:
        from kubetrain.local.sandbox.security_context import PRIVILEGED_ENV

        # Read when the TrainJob is submitted (kubetrain.local.submit.admission), in this process.
        os.environ[PRIVILEGED_ENV] = "1"


def register(group: click.Group) -> None:
    @group.command("run")
    @files_option
    @_with_backend_options
    @click.option("-q", "--quiet", is_flag=True, help="Do not stream logs; print only the final state.")
    @click.option(
        "-d", "--detach", is_flag=True, help="Start it in the background and return (follow with `kubetrain logs -f`)."
    )
    @click.option(
        "--nohup",
        is_flag=True,
        help="Keep running when the terminal closes (SIGHUP, e.g. a dropped SSH session); output stops, logs stay.",
    )
    @click.option(
        "--replace", is_flag=True, help="Replace a finished TrainJob of the same name (its state and logs are removed)."
    )
    @click.option("--timeout", default=None,
                  help="Stop waiting after this long (30s, 10m, 2h): exit 124 naming the state then.")
    @click.option("--delete-on-timeout", is_flag=True,
                  help="On a cluster, delete the TrainJob when --timeout passes (it keeps running otherwise).")
    @_allow_privileged_option
    @_overcommit_option
    def run(
        files: tuple[str, ...],
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
        quiet: bool,
        detach: bool,
        nohup: bool,
        replace: bool,
        timeout: str | None,
        delete_on_timeout: bool,
        allow_privileged: bool,
        overcommit: bool,
    ) -> None:
        """Run a TrainJob here (or on a cluster) and wait: live steps, streamed logs, the job's exit status.

        Exit status: 0 when the TrainJob ends Complete; 1 when it ends Failed; 124 when --timeout passes first;
        127 (126) when a command could not be found (executed); 130 after Ctrl-C (128 + the signal number after
        SIGTERM/SIGHUP). On a cluster it waits for the JobSet and its pods and says why they wait; Ctrl-C
        detaches and the TrainJob keeps running. Locally Ctrl-C stops the pods like the kubelet (SIGTERM,
        terminationGracePeriodSeconds, SIGKILL; a second Ctrl-C kills them at once), and so does a timeout.
        Runtimes in the same files are applied first; the built-in runtimes (`kubetrain runtimes list`) are
        always available.

        \b
        Examples:
          kubetrain run -f examples/quickstart/trainjob.yaml
          kubetrain run -f my-runtime.yaml -f my-trainjob.yaml
          kubetrain run -f trainjob.yaml --detach            # like apply, for one TrainJob
          kubetrain run -f trainjob.yaml --nohup > run.log   # survives logging out
          kubetrain run -f trainjob.yaml --context kind-kind --timeout 30m     # on a cluster
          sudo kubetrain run -f privileged.yaml --allow-privileged             # root only
          kubetrain run -f notebook-3x3cpu.yaml --overcommit   # more cpu than this laptop has, shared
        """
        from kubetrain.cli.follow import follow_remote, run_local

        _allow_privileged(allow_privileged)
        _overcommit(overcommit)
        try:
            from kubetrain.api.logtext import parse_duration

            limit = parse_duration(timeout, "--timeout") if timeout else None
        except KubetrainError as exc:
            fail(str(exc))
        cluster = _is_cluster(kubeconfig, context)
        key = None
        holder = certificates = None
        if not cluster:
            if not detach:
                from kubetrain.local.sandbox.netns import NetworkNamespace
                from kubetrain.local.statusendpoint.server import Certificates

                # The TrainJob's network namespace and its status endpoint's certificates come up while its
                # manifest is read and checked.
                holder = NetworkNamespace.start()
                certificates = Certificates()
                # Closed when the command ends, also early (a bad manifest), where nobody else would until the
                # process exits; the supervisor closes it too when it has it (closing twice is harmless).
                click.get_current_context().call_on_close(holder.close)
            hit, key = _cached(files, namespace)
            if hit is not None:
                workdir = str(Path(files[hit.file_index]).resolve().parent)
                code = run_local(
                    hit.others, hit.trainjob, workdir, namespace, quiet, timeout=limit,
                    detach=detach, nohup=nohup, replace=replace, compiled=hit, holder=holder,
                    certificates=certificates,
                )
                sys.exit(code)
        from kubetrain.api import TrainJob

        backend = _backend(kubeconfig, context)
        objects, dirs = _load(files, backend, namespace, cluster)
        jobs = [(o, d) for o, d in zip(objects, dirs, strict=True) if isinstance(o, TrainJob)]
        if len(jobs) != 1:
            fail(
                f"`run` needs exactly one TrainJob in the files, found {len(jobs)}",
                "use `kubetrain apply -f` for several TrainJobs, then `kubetrain get trainjobs`",
            )
        others = [o.to_wire() for o in objects if not isinstance(o, TrainJob)]
        tj, workdir = jobs[0]
        ns = tj.metadata.namespace or namespace
        if cluster:
            _run_errors(lambda: submit([*others, tj.to_wire()], backend, namespace=ns, cluster=True,
                                       on_applied=print_applied))
            if detach:
                return
            how = "".join(
                f" {flag} {value}"
                for flag, value in (("--kubeconfig", kubeconfig), ("--context", context), ("-n", ns))
                if value and (flag != "-n" or value != "default")
            )
            sys.exit(
                follow_remote(
                    backend, tj.name, ns, quiet, timeout=limit, delete_on_timeout=delete_on_timeout, how=how
                )
            )
        sys.exit(
            run_local(
                others, tj.to_wire(), workdir, ns, quiet, timeout=limit, detach=detach, nohup=nohup,
                replace=replace, cache_key=key, file_index=_file_of(files, workdir), holder=holder,
                certificates=certificates,
            )
        )

    @group.command("apply")
    @files_option
    @_with_backend_options
    @_allow_privileged_option
    @_overcommit_option
    def apply(
        files: tuple[str, ...],
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
        allow_privileged: bool,
        overcommit: bool,
    ) -> None:
        """Create TrainJobs (started in the background) and runtimes, or update them like kubectl.

        Re-applying an unchanged manifest changes nothing ("unchanged"). A TrainJob's runtimeRef, trainer,
        initializer, activeDeadlineSeconds and managedBy are immutable; spec.suspend, labels and annotations may
        change; runtimePatches only while it is suspended.

        \b
        Examples:
          kubetrain apply -f trainjob.yaml
          kubetrain apply -f runtimes/ -f trainjob.yaml
          kubetrain get trainjobs && kubetrain logs my-job -f
        """
        _allow_privileged(allow_privileged)
        _overcommit(overcommit)
        backend = _backend(kubeconfig, context)
        cluster = _is_cluster(kubeconfig, context)
        objects, dirs = _load(files, backend, namespace, cluster)
        wires = [o.to_wire() for o in objects]
        _run_errors(lambda: submit(wires, backend, namespace=namespace, cluster=cluster, workdirs=dirs,
                                   on_applied=print_applied))
