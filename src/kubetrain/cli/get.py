"""``kubetrain get``: TrainJobs, runtimes, and the objects around them (ConfigMaps, Secrets, claims, the TrainJobs'
pods and events) as kubectl lists them: names, ``-l``, ``--field-selector``, ``--sort-by``, ``-w``, and every
``-o`` kubectl has (``jsonpath=``, ``custom-columns=`` and their ``-file`` forms included)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from kubetrain.api import AnyRuntime, KubetrainError, TrainJob
from kubetrain.api import constants as c
from kubetrain.api.progress import progress_column
from kubetrain.api.selectors import parse as parse_selector
from kubetrain.api.selectors import parse_fields
from kubetrain.api.suggest import not_found_hint
from kubetrain.api.views import StateView
from kubetrain.cli._backend import select_backend, with_backend_options
from kubetrain.cli._common import fail
from kubetrain.cli.backend import Backend
from kubetrain.cli.core_objects import CORE_KINDS, READ_KINDS, get_core
from kubetrain.cli.listing import Query, fetch_named, print_common, select
from kubetrain.cli.optimization import OPTIMIZATIONJOB_KINDS, get_optimizationjobs
from kubetrain.cli.output import (
    FORMATS_HELP,
    OutputFormat,
    custom_row,
    dump_objects,
    error_line,
    execute,
    nodes,
    parse_output,
    plain_table,
)
from kubetrain.service.present import age

TRAINJOB_KINDS = ("trainjobs", "trainjob", "tj")
RUNTIME_KINDS = (
    "runtimes",
    "runtime",
    "trainingruntimes",
    "trainingruntime",
    "clustertrainingruntimes",
    "clustertrainingruntime",
    "ctr",
    "tr",
)


def _trainjob_row(j: TrainJob, st: StateView, all_ns: bool, wide: bool, clusters: bool = False) -> list[str]:
    row = ([j.namespace] if all_ns else []) + [
        j.name,
        j.spec.runtime_ref.name,
        st.state,
        *([st.cluster or "-"] if clusters else []),
        progress_column(j.to_wire().get("status") if j.status is not None else None),
        nodes(j),
        age(j.metadata.creation_timestamp),
    ]
    if wide:
        js = (j.status.jobs_status if j.status else None) or []
        row += [
            st.reason or "-",
            ", ".join(f"{s.name}(active={s.active},ok={s.succeeded},failed={s.failed})" for s in js) or "-",
            st.message or "-",
        ]
    return row


def _trainjob_headers(all_ns: bool, wide: bool, clusters: bool = False) -> list[str]:
    cols = (["NAMESPACE"] if all_ns else []) + ["NAME", "RUNTIME", "STATE"] + (["CLUSTER"] if clusters else [])
    cols += ["PROGRESS", "NODES", "AGE"]
    return cols + (["REASON", "JOBS", "MESSAGE"] if wide else [])


def _runtime_row(r: AnyRuntime, all_ns: bool, wide: bool) -> list[str]:
    ml = r.spec.ml_policy
    labels = r.metadata.labels or {}
    ns = r.metadata.namespace or "" if r.kind != c.KIND_CLUSTER_TRAINING_RUNTIME else ""
    row = ([ns] if all_ns else []) + [
        r.kind,
        r.name,
        labels.get(c.LABEL_FRAMEWORK, "-"),
        str(ml.num_nodes or 1) if ml else "-",
    ]
    if wide:
        row += [",".join(ml.frameworks()) if ml else "-", labels.get(c.LABEL_SUPPORT, "-")]
    return row


def _field_filter(field_selector: str | None, kind: str, plural: str) -> Callable[[list[dict[str, Any]]], list[int]]:
    """What a ``--field-selector`` keeps (indexes); TrainJobs and runtimes are custom resources, which the API
    server lets be selected by metadata.name and metadata.namespace only, so it is applied here."""
    fields = parse_fields(field_selector, kind, plural) if field_selector else None
    return lambda wires: [i for i, w in enumerate(wires) if fields is None or fields.matches(w)]


def _print_names(kind: str, names: list[str]) -> None:
    for n in names:
        click.echo(f"{kind}.{c.GROUP}/{n}")


def get_trainjobs(backend: Backend, q: Query, watch: bool) -> int:
    ns, names, namespace, all_ns, fmt, no_headers = q.scope, q.names, q.namespace, q.all_namespaces, q.fmt, q.no_headers
    if names:
        jobs, rc = fetch_named(names, lambda name: backend.get_trainjob(name, namespace))
    else:
        jobs, rc = backend.list_trainjobs(ns, q.selector), 0
    keep = _field_filter(q.field_selector, c.KIND_TRAINJOB, f"trainjobs.{c.GROUP}")
    listing = select(jobs, lambda j: j.to_wire(), keep=keep, sort_by=q.sort_by, rc=rc)
    jobs = listing.items
    wide = fmt.kind == "wide"
    # MultiKueue runs some of them on worker clusters: a CLUSTER column says which (only then, so a plain list
    # keeps kubectl's columns).
    clusters = any(j.spec.managed_by == c.MANAGED_BY_MULTIKUEUE for j in jobs)
    states: list[StateView] = []
    if print_common(listing, q, name_of=lambda j: f"trainjob.{c.GROUP}/{j.name}"):
        pass
    elif jobs:
        states = backend.states(jobs)
        rows = [_trainjob_row(j, st, all_ns, wide, clusters) for j, st in zip(jobs, states, strict=True)]
        click.echo(plain_table(_trainjob_headers(all_ns, wide, clusters), rows, no_headers=no_headers), nl=False)
    elif not names and not watch:
        where = "any namespace" if ns is None else f"namespace {ns}"
        click.echo(f"No TrainJobs found in {where}.", err=True)
    if watch:
        shown: list[list[str]] = []
        if fmt.kind in ("table", "wide") and jobs:
            shown = [_trainjob_row(j, st, all_ns, wide, clusters) for j, st in zip(jobs, states, strict=True)]
        _watch(backend, ns, list(names) or None, q.selector, fmt, all_ns, wide, no_headers, shown, clusters,
               allow_missing=q.allow_missing, headed=bool(jobs) or len(names) != 1)
    return rc


def _watch(
    backend: Backend,
    namespace: str | None,
    names: list[str] | None,
    selector: str | None,
    fmt: OutputFormat,
    all_ns: bool,
    wide: bool,
    no_headers: bool,
    shown: list[list[str]],
    clusters: bool = False,
    *,
    allow_missing: bool = True,
    headed: bool = False,
) -> None:
    """Print each change as one more row (or one more document), until Ctrl-C. ``shown`` are the rows the list
    printed: the watch's first report of those same rows is not repeated, and new rows keep their columns.
    ``headed``: the list printed custom-columns' header already."""
    output = fmt.kind
    headers = _trainjob_headers(all_ns, wide, clusters)
    widths: list[int] | None = None
    if shown:
        widths = [max(len(r[i]) for r in [headers, *shown]) for i in range(len(headers))]
    age = headers.index("AGE")

    def key(r: list[str]) -> tuple[str, ...]:
        return tuple(r[:age] + r[age + 1 :])  # the age moves on by itself; it is not a change

    unseen = {key(r) for r in shown}
    initial = True
    for item in backend.watch_trainjobs(namespace, names=names, selector=selector):
        if item is None:
            initial = False
            continue
        if initial and item.type == "ADDED" and output not in ("table", "wide"):
            continue  # the list above showed it, as kubectl does
        row = _trainjob_row(item.trainjob, item.state, all_ns, wide, clusters)
        if item.type == "ADDED" and key(row) in unseen:
            unseen.discard(key(row))
            continue
        if output in ("yaml", "json"):
            dump_objects([item.trainjob.to_wire()], output)
            if output == "yaml":
                click.echo("---")
        elif output == "name":
            _print_names("trainjob", [item.trainjob.name])
        elif output == "jsonpath":
            assert fmt.template is not None
            click.echo(execute(fmt.template, item.trainjob.to_wire(), allow_missing=allow_missing), nl=False)
        elif output == "custom-columns":
            cells = custom_row(item.trainjob.to_wire(), fmt)
            if not headed and not no_headers:
                click.echo("   ".join(h for h, _ in fmt.columns))
            headed = True
            click.echo("   ".join(cells))
        else:
            if widths is None:
                widths = [max(len(h), len(v)) for h, v in zip(headers, row, strict=True)]
                if not no_headers:
                    click.echo("   ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip())
            click.echo("   ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
        sys.stdout.flush()


def get_runtimes(backend: Backend, q: Query, kind: str) -> int:
    names, all_ns, selector, no_headers = q.names, q.all_namespaces, q.selector, q.no_headers
    rts = backend.list_runtimes(q.scope)
    if kind in ("trainingruntimes", "trainingruntime", "tr"):
        rts = [r for r in rts if r.kind == c.KIND_TRAINING_RUNTIME]
    elif kind in ("clustertrainingruntimes", "clustertrainingruntime", "ctr"):
        rts = [r for r in rts if r.kind == c.KIND_CLUSTER_TRAINING_RUNTIME]
    if selector:
        sel = parse_selector(selector)
        rts = [r for r in rts if sel.matches(r.metadata.labels)]
    rc = 0
    if names:
        chosen = []
        for name in names:
            found = [r for r in rts if r.name == name]
            if not found:
                hint = not_found_hint(name, [r.name for r in rts], "`kubetrain get runtimes -A` lists them")
                error_line(f'runtime "{name}" not found{hint}')
                rc = 1
            chosen += found
        rts = chosen
    keep = _field_filter(q.field_selector, c.KIND_TRAINING_RUNTIME, f"trainingruntimes.{c.GROUP}")
    listing = select(rts, lambda r: r.to_wire(), keep=keep, sort_by=q.sort_by, rc=rc)
    rts = listing.items
    if print_common(listing, q, name_of=lambda r: f"{r.kind.lower()}.{c.GROUP}/{r.name}", dump_empty=True):
        return rc
    output = q.fmt.kind
    wide = output == "wide"
    headers = (["NAMESPACE"] if all_ns else []) + ["KIND", "NAME", "FRAMEWORK", "NODES"]
    headers += ["ML POLICY", "SUPPORT"] if wide else []
    if rts:
        rows = [_runtime_row(r, all_ns, wide) for r in rts]
        click.echo(plain_table(headers, rows, no_headers=no_headers), nl=False)
    elif not names:
        click.echo("No runtimes found.", err=True)
    return rc


def _output_option(ctx: click.Context, param: click.Parameter, value: str) -> OutputFormat:
    # Parsed before anything is fetched: a bad template fails at once, with where and the fix.
    try:
        return parse_output(value)
    except KubetrainError as exc:
        fail(str(exc))


def register(group: click.Group) -> None:
    @group.command("get")
    @click.argument("kind", type=click.Choice(
        TRAINJOB_KINDS + OPTIMIZATIONJOB_KINDS + RUNTIME_KINDS + tuple(CORE_KINDS) + tuple(READ_KINDS)))
    @click.argument("names", nargs=-1)
    @click.option("-A", "--all-namespaces", is_flag=True, help="List across all namespaces.")
    @click.option(
        "-o",
        "--output",
        default="table",
        callback=_output_option,
        metavar="FORMAT",
        help=f"One of {FORMATS_HELP}. wide adds columns (never truncated); jsonpath and custom-columns take "
        "kubectl's JSONPath.",
    )
    @click.option("-l", "--selector", default=None, help="Label selector, e.g. team=a,env!=dev.")
    @click.option(
        "--field-selector",
        default=None,
        help="Field selector, e.g. status.phase=Running or involvedObject.name=my-job (=, ==, !=, comma-joined).",
    )
    @click.option(
        "--sort-by",
        default=None,
        help="JSONPath to sort by, e.g. '{.metadata.creationTimestamp}' or .metadata.name (its first value).",
    )
    @click.option("--no-headers", is_flag=True, help="Do not print the header row (tables and custom-columns).")
    @click.option(
        "--allow-missing-template-keys",
        type=click.BOOL,
        default=True,
        is_flag=False,
        flag_value=True,
        metavar="BOOL",
        help="With -o jsonpath: print nothing for a missing key (default true); false makes it an error.",
    )
    @click.option("-w", "--watch", is_flag=True, help="After listing, print each change until Ctrl-C.")
    @with_backend_options
    def get(
        kind: str,
        names: tuple[str, ...],
        all_namespaces: bool,
        output: OutputFormat,
        selector: str | None,
        field_selector: str | None,
        sort_by: str | None,
        no_headers: bool,
        allow_missing_template_keys: bool,
        watch: bool,
        kubeconfig: str | None,
        context: str | None,
        namespace: str,
    ) -> None:
        """List TrainJobs (NAME RUNTIME STATE PROGRESS NODES AGE), OptimizationJobs (oj: NAME STATE METRIC BEST
        TRIALS PARALLEL AGE; their trials are TrainJobs labelled kubetrain.dev/optimizationjob=NAME), runtimes,
        ConfigMaps, Secrets, PersistentVolumeClaims, or the TrainJobs' pods and events, like kubectl get (a Secret's
        values are never shown in a table).

        STATE is Created (no pod yet), Pending (pods exist, not all trainer pods run), Suspended, Running,
        Complete or Failed; -o wide adds the reason. On a MultiKueue manager cluster a CLUSTER column names the
        worker cluster each dispatched TrainJob runs on. PROGRESS is the job's last reported status.trainerStatus
        progressPercentage (- when it reported none; see `kubetrain metrics`).

        Pods (NAME READY STATUS RESTARTS AGE; wide adds IP and NODE) carry the labels JobSet gives them, so
        -l jobset.sigs.k8s.io/jobset-name=JOB picks one TrainJob's pods; events are LAST SEEN TYPE REASON OBJECT
        MESSAGE. -o jsonpath and -o custom-columns speak kubectl's JSONPath: one name gives the template the
        object, several names or a list give it a List (.items).

        \b
        Examples:
          kubetrain get trainjobs
          kubetrain get tj job-a job-b -o wide
          kubetrain get trainjobs -A -l team=vision --sort-by '{.metadata.creationTimestamp}'
          kubetrain get trainjobs -w
          kubetrain get tj -o jsonpath='{range .items[*]}{.metadata.name}{"\\t"}{.spec.runtimeRef.name}{"\\n"}{end}'
          kubetrain get tj my-job -o jsonpath='{.status.conditions[?(@.type=="Complete")].status}'
          kubetrain get tj -o custom-columns=NAME:.metadata.name,RUNTIME:.spec.runtimeRef.name --no-headers
          kubetrain get pods -l jobset.sigs.k8s.io/jobset-name=my-job -o wide
          kubetrain get pods --field-selector status.phase=Running
          kubetrain get events --field-selector involvedObject.name=my-job,type=Warning
          kubetrain get runtimes -A
          kubetrain get optimizationjobs            # or: get oj tune-lr -o wide
          kubetrain get tj -l kubetrain.dev/optimizationjob=tune-lr
          kubetrain get configmaps
          kubetrain get secret db-creds -o yaml
          kubetrain get pvc -A
        """
        if names and selector:
            fail("a name and --selector cannot be used together", "give names or a selector (-l), not both")
        if names and field_selector:
            fail(
                "a name and --field-selector cannot be used together",
                "give names or a field selector (--field-selector metadata.name=NAME), not both",
            )
        backend = select_backend(kubeconfig, context)
        q = Query(names, namespace, all_namespaces, output, selector, field_selector, sort_by, no_headers,
                  allow_missing_template_keys)
        try:
            if kind in TRAINJOB_KINDS:
                rc = get_trainjobs(backend, q, watch)
            elif watch:
                fail("--watch is available for trainjobs only", "kubetrain get trainjobs -w")
            elif kind in OPTIMIZATIONJOB_KINDS:
                if field_selector:
                    fail("--field-selector is not available for optimizationjobs", "use names or -l")
                rc = get_optimizationjobs(backend, q)
            elif kind in CORE_KINDS or kind in READ_KINDS:
                real = CORE_KINDS.get(kind) or READ_KINDS[kind]
                rc = get_core(backend, real, q)
            else:
                rc = get_runtimes(backend, q, kind)
        except KubetrainError as exc:
            fail(str(exc))
        except KeyboardInterrupt:
            sys.exit(130)  # the way out of -w
        sys.exit(rc)
