"""An OptimizationJob's rules that need its trials: placeholders, trial names, and a first trial that must itself be
a valid TrainJob (``kubetrain.compiler.validate`` then checks it against its runtime like any TrainJob).

Placeholders: one naming no parameter is an error. A parameter no placeholder uses is an error when the template
does use placeholders (or ``$(KUBEFLOW_TRAINER_OPT_*)``) for others: the trials would differ in a value nothing
reads, almost always a forgotten or misspelt placeholder. When the template uses none at all, every parameter
reaches the trainer only as ``KUBEFLOW_TRAINER_OPT_<NAME>`` (upstream's design, KEP-3562), and a warning says so.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import ValidationError

from kubetrain.api.errors import Result
from kubetrain.api.fields import suggest
from kubetrain.api.optimization import OptimizationJob
from kubetrain.api.optimization_checks import validate_optimizationjob_object
from kubetrain.api.trainjob import TrainJob
from kubetrain.compiler.optimization import stopping
from kubetrain.compiler.optimization.suggest import seed_of, suggestion, trial_count
from kubetrain.compiler.optimization.template import ENV_PREFIX, env_name, references, substitute, uses
from kubetrain.compiler.optimization.trials import MAX_NAME, build_trial, longest_trial_name

_RFC1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
TEMPLATE = "spec.trainJobTemplate"


def check_optimizationjob(oj: OptimizationJob, *, old: OptimizationJob | None = None) -> tuple[Result, TrainJob | None]:
    """Every rule of the OptimizationJob on its own, and its first trial as a TrainJob (None when it cannot be
    built: the errors say why) for the runtime-dependent checks."""
    result = validate_optimizationjob_object(oj, old=old)
    result.extend(stopping.check(oj.metadata.annotations))
    _trial_names(result, oj)
    _placeholders(result, oj)
    if result.ok:
        _label_values(result, oj)
    if not result.ok or trial_count(oj.spec) == 0:
        return result, None
    values = suggestion(oj.spec, 0, seed_of(oj.spec, oj.metadata.uid))
    manifest = build_trial(oj, 0, values)
    try:
        trial = TrainJob.model_validate(manifest)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        result.error(f"{TEMPLATE}.{where.removeprefix('spec.')}" if where.startswith("spec.") else TEMPLATE,
                     f"the first trial ({_values(values)}) is not a valid TrainJob: {first['msg']}",
                     "a placeholder's value must fit the field it is in")
        return result, None
    return result, trial


def trial_path(path: str) -> str:
    """A trial TrainJob's field path as the OptimizationJob's (``spec.trainer.args`` -> under the template)."""
    if path == "spec" or path.startswith(("spec.", "spec[")):
        return f"{TEMPLATE}.{path}"
    if path.startswith("metadata.labels") or path.startswith("metadata.annotations"):
        return f"{TEMPLATE}.{path}"
    return path


def _trial_names(result: Result, oj: OptimizationJob) -> None:
    name = oj.metadata.name
    if not name:
        return
    longest = longest_trial_name(oj)
    if not _RFC1035.match(name):
        result.error("metadata.name", f"trials are TrainJobs named {name}-<n>, and a TrainJob name must match RFC "
                     f"1035 DNS label format, so {name!r} cannot name them",
                     "use lowercase letters, digits and '-', starting with a letter")
    elif len(longest) > MAX_NAME:
        result.error("metadata.name", f"trials are TrainJobs named {name}-<n>, at most {MAX_NAME} characters; "
                     f"{longest!r} has {len(longest)}", f"shorten the name to {MAX_NAME - len(longest) + len(name)} "
                     "characters or fewer")


def _placeholders(result: Result, oj: OptimizationJob) -> None:
    template = oj.spec.train_job_template.to_wire()
    names = [p.name for p in oj.spec.parameters]
    found = uses(template, names)
    for use in found:
        if use.name is None:
            close = _close_name(use.text, names)
            result.error(use.path, f"{use.text!r} is not a placeholder: write {{{{.NAME}}}} with a parameter's name",
                         f"write {{{{.{close}}}}}" if close else f"use one of {_names(names)}")
        elif use.name not in names:
            close = suggest(use.name, names)
            result.error(use.path, f"placeholder {use.text} names no parameter (parameters: {_names(names)})",
                         f"did you mean {{{{.{close}}}}}?" if close else "add the parameter to spec.parameters, or "
                         "remove the placeholder")
    # A malformed placeholder ('{{lr}}') already has its error; its parameter is not reported unused as well.
    used = {u.name if u.name is not None else _close_name(u.text, names) for u in found} - {None}
    referenced = references(template)
    used |= {n for n in names if env_name(n)[len(ENV_PREFIX):] in referenced}
    unused = [(i, n) for i, n in enumerate(names) if n not in used]
    for i, name in unused:
        if used:
            result.error(f"spec.parameters[{i}].name", f"parameter {name!r} is used by no placeholder, while the "
                         "template uses placeholders for the others: every trial would differ in a value nothing "
                         "reads", f"put {{{{.{name}}}}} where the value goes (or $({env_name(name)})), or remove "
                         "the parameter")
        else:
            result.warn(f"spec.parameters[{i}].name", f"no placeholder uses {name!r}: trials get it only as the "
                        f"environment variable {env_name(name)} of the trainer",
                        f"read {env_name(name)} in the training code, or put {{{{.{name}}}}} in the template")
    seen: dict[str, str] = {}
    for i, name in enumerate(names):
        other = seen.setdefault(env_name(name), name)
        if other != name:
            result.error(f"spec.parameters[{i}].name", f"parameters {other!r} and {name!r} both become "
                         f"{env_name(name)}", "rename one of them")


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _label_values(result: Result, oj: OptimizationJob) -> None:
    """Labels with placeholders must stay valid label values for every trial (the API server refuses the trial
    otherwise, long after submit)."""
    labels = (oj.spec.train_job_template.metadata.labels if oj.spec.train_job_template.metadata else None) or {}
    templated = {k: v for k, v in labels.items() if "{{" in v}
    if not templated:
        return
    seed = seed_of(oj.spec, oj.metadata.uid)
    for index in range(trial_count(oj.spec)):
        values = suggestion(oj.spec, index, seed)
        for key, text in templated.items():
            value = substitute({"metadata": {"v": text}}, values)["metadata"]["v"]
            if len(value) > 63 or not _LABEL_VALUE.match(value):
                result.error(f"{TEMPLATE}.metadata.labels[{key}]", f"trial {index} would get label {key}={value!r}, "
                             "not a valid label value (at most 63 letters, digits, '-', '_' or '.')",
                             "put the value in an annotation instead (any text), or keep the choices label-safe")
                return


def _close_name(text: str, names: list[str]) -> str | None:
    """The parameter a malformed placeholder most likely meant (``{{lr}}``, ``${trialParameters.lr}``)."""
    words: list[str] = [w for w in re.findall(r"[A-Za-z_][A-Za-z0-9_-]*", text) if w != "trialParameters"]
    for word in words:
        if word in names:
            return word
    close: str | None = suggest(words[0], names) if words else None
    return close


def _names(names: list[str]) -> str:
    return ", ".join(names)


def _values(values: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())

