"""The submit form: its fields become a TrainJob manifest (an OptimizationJob of that TrainJob when search
parameters are given), checked by the one validation entry point
(``kubetrain.service.checking``, as ``kubetrain validate`` and ``apply`` check files) and applied through the backend.

Findings keep their field paths (``spec.trainer.numNodes``), so the page shows each under the field it is about.
What the form itself cannot read (an env line without ``=``, a command with an unclosed quote) is reported the
same way, at the path it would have filled.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from typing import Any

from kubetrain.api import constants as c
from kubetrain.api.errors import Finding, InvalidObjectError, KubetrainError
from kubetrain.api.yamlio import dump_all
from kubetrain.service.submit import submit
from kubetrain.ui.errors import UiError

SOURCE = "form"
FIELDS = ("name", "namespace", "runtime", "numNodes", "numProcPerNode", "command", "args", "image", "env",
          "cpu", "memory", "gpu", "labels",
          # A hyperparameter search (an OptimizationJob of this TrainJob) when ``parameters`` is not empty.
          "parameters", "metric", "direction", "algorithm", "seed", "numTrials", "parallelTrials")
_INT = re.compile(r"\d{1,9}")
_PARAMETER = re.compile(r"^\s*([^=\s]+)\s*=\s*(uniform|loguniform|randint|choice)\s*\((.*)\)\s*$")
TEMPLATE = "spec.trainJobTemplate"


@dataclass
class Built:
    manifest: dict[str, Any]
    findings: list[Finding] = field(default_factory=list)

    @property
    def namespace(self) -> str:
        return str(self.manifest["metadata"].get("namespace") or "default")


def build(form: dict[str, Any]) -> Built:
    """The TrainJob the form describes, and what in it could not be read."""
    unknown = sorted(set(form) - set(FIELDS))
    if unknown:
        raise UiError(400, f"unknown form field {unknown[0]!r}", f"the fields are: {', '.join(FIELDS)}")
    values = {k: _text(form.get(k), k) for k in FIELDS}
    findings: list[Finding] = []
    meta: dict[str, Any] = {"name": values["name"], "namespace": values["namespace"] or "default"}
    labels = _labels(values["labels"], findings)
    if labels:
        meta["labels"] = labels
    trainer: dict[str, Any] = {}
    for key in ("numNodes", "numProcPerNode"):
        if values[key]:
            trainer[key] = int(values[key]) if _INT.fullmatch(values[key]) else values[key]
    for key in ("command", "args"):
        if values[key]:
            try:
                trainer[key] = shlex.split(values[key])
            except ValueError as exc:
                findings.append(Finding(f"spec.trainer.{key}", f"cannot split {values[key]!r} into words: {exc}",
                                        "close the quote, or escape it with a backslash", source=SOURCE))
    if values["image"]:
        trainer["image"] = values["image"]
    env = _env(values["env"], findings)
    if env:
        trainer["env"] = env
    resources = {k: v for k, v in (("cpu", values["cpu"]), ("memory", values["memory"]),
                                   ("nvidia.com/gpu", values["gpu"])) if v}
    if resources:
        trainer["resourcesPerNode"] = {"requests": dict(resources), "limits": dict(resources)}
    spec: dict[str, Any] = {"runtimeRef": _runtime_ref(values["runtime"], meta["namespace"], findings)}
    if trainer:
        spec["trainer"] = trainer
    manifest = {"apiVersion": f"{c.GROUP}/{c.VERSION}", "kind": c.KIND_TRAINJOB, "metadata": meta, "spec": spec}
    if values["parameters"]:
        manifest = _search(manifest, values, findings)
    return Built(manifest, findings)


def _search(trainjob: dict[str, Any], values: dict[str, str], findings: list[Finding]) -> dict[str, Any]:
    """The OptimizationJob whose trials are the form's TrainJob, searching the ``parameters`` lines
    (``lr = loguniform(0.0001, 0.1)``, ``bs = choice(16, 32)``, ``layers = randint(1, 8)``, ``x = uniform(0, 1)``)."""
    meta = trainjob["metadata"]
    parameters = []
    for line in values["parameters"].splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _PARAMETER.match(line)
        if m is None:
            findings.append(Finding("spec.parameters", f"{line.strip()!r} is not NAME = uniform(MIN, MAX), "
                                    "loguniform(MIN, MAX), randint(MIN, MAX) or choice(A, B, ...)",
                                    "write one parameter per line, e.g. lr = loguniform(0.0001, 0.1)", source=SOURCE))
            continue
        name, kind, inner = m.groups()
        items = [x.strip().strip("'\"") for x in inner.split(",") if x.strip()]
        if kind == "choice":
            space: dict[str, Any] = {"categorical": {"choices": items}}
        elif len(items) != 2:
            findings.append(Finding("spec.parameters", f"{name}: {kind} takes a minimum and a maximum, got "
                                    f"{len(items)} values", f"write {name} = {kind}(MIN, MAX)", source=SOURCE))
            continue
        else:
            space = {"logUniform" if kind == "loguniform" else "uniform": {
                "min": items[0], "max": items[1], "type": "Int" if kind == "randint" else "Float"}}
        parameters.append({"name": name, "searchSpace": space})
    algorithm: dict[str, Any] = {"grid": {}} if values["algorithm"] == "grid" else {"random": {}}
    if values["seed"] and "random" in algorithm:
        algorithm["random"]["seed"] = int(values["seed"]) if re.fullmatch(r"-?\d{1,18}", values["seed"]) else \
            values["seed"]
    template: dict[str, Any] = {"spec": trainjob["spec"]}
    if meta.get("labels"):
        template["metadata"] = {"labels": meta.pop("labels")}
    spec: dict[str, Any] = {
        "objectives": [{"metric": values["metric"] or "loss", "direction": values["direction"] or "Minimize"}],
        "searchAlgorithm": algorithm,
        "parameters": parameters,
        "trainJobTemplate": template,
    }
    for key in ("numTrials", "parallelTrials"):
        if values[key]:
            spec[key] = int(values[key]) if _INT.fullmatch(values[key]) else values[key]
    return {"apiVersion": trainjob["apiVersion"], "kind": c.KIND_OPTIMIZATIONJOB, "metadata": meta, "spec": spec}


def form_path(path: str) -> str:
    """A finding's path as the form names it: the trial's fields are the TrainJob fields of the form."""
    for prefix, field_path in ((f"{TEMPLATE}.spec", "spec"), (f"{TEMPLATE}.metadata", "metadata")):
        if path == prefix or path.startswith((prefix + ".", prefix + "[")):
            return field_path + path[len(prefix):]
    return path


def _text(value: object, key: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise UiError(400, f"form field {key!r}: expected text, got {type(value).__name__}")
    return str(value).strip()


def _runtime_ref(value: str, namespace: str, findings: list[Finding]) -> dict[str, Any]:
    """``ClusterTrainingRuntime/name`` or ``TrainingRuntime/namespace/name`` (the form's select values)."""
    kind, _, rest = value.partition("/")
    if not value:
        findings.append(Finding("spec.runtimeRef.name", "no runtime chosen", "pick a runtime", source=SOURCE))
        return {"name": ""}
    if kind == c.KIND_TRAINING_RUNTIME:
        rt_ns, _, name = rest.partition("/")
        if rt_ns and rt_ns != namespace:
            findings.append(Finding(
                "spec.runtimeRef", f"TrainingRuntime {rt_ns}/{name} is in namespace {rt_ns}; a TrainJob can only "
                "use a TrainingRuntime of its own namespace", f"set the namespace to {rt_ns}, or pick a "
                "ClusterTrainingRuntime", source=SOURCE))
        return {"apiGroup": c.GROUP, "kind": kind, "name": name}
    if kind == c.KIND_CLUSTER_TRAINING_RUNTIME:
        return {"apiGroup": c.GROUP, "kind": kind, "name": rest}
    return {"name": value}  # a bare name: the default kind, as in a manifest


def _env(text: str, findings: list[Finding]) -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, eq, value = line.partition("=")
        if not eq:
            findings.append(Finding(f"spec.trainer.env[{len(out)}]", f"{line.strip()!r} is not NAME=VALUE",
                                    "write one variable per line as NAME=VALUE", source=SOURCE))
            continue
        out.append({"name": name.strip(), "value": value})
    return out


def _labels(text: str, findings: list[Finding]) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in re.split(r"[,\n]", text):
        if not part.strip():
            continue
        key, eq, value = part.partition("=")
        if not eq:
            findings.append(Finding("metadata.labels", f"{part.strip()!r} is not key=value",
                                    "write labels as key=value, separated by commas", source=SOURCE))
            continue
        out[key.strip()] = value.strip()
    return out


def as_yaml(built: Built) -> str:
    return dump_all([built.manifest])


def finding_json(f: Finding) -> dict[str, Any]:
    return {"severity": f.severity, "path": f.path, "message": f.message, "fix": f.fix, "source": f.source,
            "text": f.render()}


def check(built: Built, backend: Any, *, cluster: bool) -> tuple[list[Finding], list[Finding]]:
    """Errors and warnings of the TrainJob, as ``kubetrain validate`` (or, before running, ``apply``) finds them
    against the runtimes ``backend`` has."""
    from kubetrain.service.checking import check_text

    checked = check_text(as_yaml(built), SOURCE, namespace=built.namespace, backend=backend,
                         local=None if cluster else "run")
    errors = built.findings + [replace(f, path=form_path(f.path)) for f in checked.result.errors]
    return errors, [replace(f, path=form_path(f.path)) for f in checked.result.warnings]


def apply(built: Built, backend: Any, *, cluster: bool, workdir: str) -> str:
    """Create the TrainJob; returns what the backend says (``trainjob/x created``). A refusal after validation
    (admission on this machine, the cluster's webhook) comes back as a ``UiError`` 422 with the backend's words."""
    try:
        applied = submit([built.manifest], backend, namespace=built.namespace, cluster=cluster, workdirs=[workdir])
    except InvalidObjectError as exc:
        raise UiError(422, "; ".join(f.render() for f in exc.findings)) from exc
    except KubetrainError as exc:
        from kubetrain.ui.errors import from_exception

        error = from_exception(exc)
        raise UiError(error.status if error.status in (401, 403, 409) else 422, error.message, error.fix) from exc
    return ", ".join(applied)
