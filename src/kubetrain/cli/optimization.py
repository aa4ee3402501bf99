"""``kubetrain get|describe optimizationjob`` (``oj``): the search, and its trials best first."""

from __future__ import annotations

import click

from kubetrain.api import constants as c
from kubetrain.api.optimization import OptimizationJob
from kubetrain.cli.backend import Backend
from kubetrain.cli.listing import Query, fetch_named, print_common, select
from kubetrain.cli.output import dump_objects, plain_table
from kubetrain.compiler.optimization import state_of, trial_count
from kubetrain.service.optimization import OptimizationView, view
from kubetrain.service.present import age

OPTIMIZATIONJOB_KINDS = ("optimizationjobs", "optimizationjob", "oj")


def _objective(x: float | None) -> str:
    return "-" if x is None else f"{x:.6g}"


def _row(job: OptimizationJob, all_ns: bool, wide: bool) -> list[str]:
    status = job.to_wire().get("status")
    state, reason, message = state_of(status)
    result = job.status.result if job.status is not None else None
    row = ([job.namespace] if all_ns else []) + [
        job.name,
        state or "Created",
        job.spec.objective.metric,
        result.train_job_name if result is not None else "-",
        str(trial_count(job.spec)),
        str(job.spec.parallel),
        age(job.metadata.creation_timestamp),
    ]
    if wide:
        params = ", ".join(f"{p.name}={p.value}" for p in (result.parameters or [])) if result is not None else ""
        row += [job.spec.algorithm, params or "-", reason or "-", message or "-"]
    return row


def get_optimizationjobs(backend: Backend, q: Query) -> int:
    """NAME STATE METRIC BEST TRIALS PARALLEL AGE (-o wide: ALGORITHM, BEST PARAMETERS, REASON, MESSAGE)."""
    if q.names:
        jobs, rc = fetch_named(q.names, lambda name: backend.get_optimizationjob(name, q.namespace))
    else:
        jobs, rc = backend.list_optimizationjobs(q.scope), 0
    if q.selector:
        from kubetrain.api.selectors import parse as parse_selector

        sel = parse_selector(q.selector)
        jobs = [j for j in jobs if sel.matches(j.metadata.labels)]
    listing = select(jobs, lambda j: j.to_wire(), sort_by=q.sort_by, rc=rc)
    if print_common(listing, q, name_of=lambda j: f"optimizationjob.{c.GROUP}/{j.name}"):
        return listing.rc
    wide = q.fmt.kind == "wide"
    headers = (["NAMESPACE"] if q.all_namespaces else []) + ["NAME", "STATE", "METRIC", "BEST", "TRIALS",
                                                              "PARALLEL", "AGE"]
    headers += ["ALGORITHM", "BEST PARAMETERS", "REASON", "MESSAGE"] if wide else []
    if listing.items:
        rows = [_row(j, q.all_namespaces, wide) for j in listing.items]
        click.echo(plain_table(headers, rows, no_headers=q.no_headers), nl=False)
    elif not q.names:
        where = "any namespace" if q.scope is None else f"namespace {q.scope}"
        click.echo(f"No OptimizationJobs found in {where}.", err=True)
    return listing.rc


def trial_table(v: OptimizationView) -> str:
    """TRIAL STATE <metric> <each parameter> NOTE, best first."""
    names = [p.name for p in v.job.spec.parameters]
    headers = ["TRIAL", "STATE", v.metric.upper(), *[n.upper() for n in names], "NOTE"]
    rows = []
    for t in v.trials:
        note = t.note
        if not note and t.name in v.states and not t.finished and v.trial_state(t) != "Running":
            why = v.states[t.name]
            note = ": ".join(p for p in (why.reason, why.message) if p)
        mark = "*" if v.best is not None and t.name == v.best.name else ""
        rows.append([t.name + mark, v.trial_state(t), _objective(t.objective),
                     *[t.parameters.get(n, "-") for n in names], note or ""])
    return plain_table(headers, rows)


def print_view(v: OptimizationView) -> None:
    job = v.job
    spec = job.spec
    seed = spec.search_algorithm.random.seed if spec.search_algorithm and spec.search_algorithm.random else None
    algorithm = spec.algorithm + (f" (seed {seed})" if seed is not None else "")
    lines = [
        f"Name:          {job.name}",
        f"Namespace:     {job.namespace}",
        f"State:         {v.state}" + (f" ({v.reason}: {v.message})" if v.reason or v.message else ""),
        f"Objective:     {'maximize' if v.maximize else 'minimize'} {v.metric} (the trials' final "
        "status.trainerStatus.metrics)",
        f"Search:        {algorithm}, {trial_count(spec)} trials, at most {spec.parallel} at once",
        "Parameters:    " + "; ".join(_space_text(p) for p in spec.parameters),
        f"Runtime:       {spec.train_job_template.spec.runtime_ref.name}",
    ]
    if v.best is not None:
        params = ", ".join(f"{k}={val}" for k, val in v.best.parameters.items())
        lines.append(f"Best:          {v.best.name}: {v.metric}={_objective(v.best.objective)} ({params})")
    else:
        lines.append("Best:          - (no trial has completed with the metric yet)")
    click.echo("\n".join(lines))
    click.echo("Trials (best first; * best):")
    click.echo("  " + trial_table(v).rstrip("\n").replace("\n", "\n  "))
    conditions = (job.status.conditions if job.status else None) or []
    if conditions:
        click.echo("Conditions:")
        rows = [[cnd.type, cnd.status, cnd.reason or "", (cnd.message or "").split("\n")[0]] for cnd in conditions]
        click.echo("  " + plain_table(["TYPE", "STATUS", "REASON", "MESSAGE"], rows).rstrip("\n").replace("\n", "\n  "))


def _space_text(p: object) -> str:
    from kubetrain.api.optimization import Parameter

    assert isinstance(p, Parameter)
    space = p.search_space
    if space.categorical is not None:
        return f"{p.name} in {{{', '.join(space.categorical.choices)}}}"
    numeric = space.uniform or space.log_uniform
    assert numeric is not None
    scale = " log" if space.log_uniform is not None else ""
    return f"{p.name} in [{numeric.min}, {numeric.max}]{scale} {(numeric.type or 'Float').lower()}"


def describe_optimizationjob(backend: Backend, name: str, namespace: str, output: str) -> None:
    v = view(backend, name, namespace)
    if output == "text":
        print_view(v)
    else:
        dump_objects([v.to_json()], output)
