"""``elasticPolicy.metrics``: a list of autoscaling/v2 ``MetricSpec`` (the HPA's metrics, passed to it as written).

Checked here so a mistake is reported on the runtime, with its path, instead of when the operator's HPA is
rejected by the API server (or silently never scales).
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.errors import Finding
from kubetrain.api.quantity import Quantity, QuantityError

_KEYS = {
    "Resource": "resource",
    "ContainerResource": "containerResource",
    "Pods": "pods",
    "Object": "object",
    "External": "external",
}
_TARGETS = {"Utilization": "averageUtilization", "AverageValue": "averageValue", "Value": "value"}
_EXAMPLE = "e.g. {type: Resource, resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}}"


def check_metrics(metrics: list[Any] | None, path: str) -> list[Finding]:
    out: list[Finding] = []
    for i, metric in enumerate(metrics or []):
        where = f"{path}[{i}]"
        if not isinstance(metric, dict):
            out.append(Finding(where, "a metric is a MetricSpec object", _EXAMPLE))
            continue
        kind = metric.get("type")
        if kind not in _KEYS:
            out.append(Finding(f"{where}.type", f"must be one of {', '.join(_KEYS)}, got {kind!r}", _EXAMPLE))
            continue
        key = _KEYS[kind]
        spec = metric.get(key)
        if not isinstance(spec, dict):
            out.append(Finding(f"{where}.{key}", f"a {kind} metric needs `{key}`", _EXAMPLE))
            continue
        if kind in ("Resource", "ContainerResource"):
            if not spec.get("name"):
                out.append(Finding(f"{where}.{key}.name", "the resource name is missing", "e.g. cpu or memory"))
            if kind == "ContainerResource" and not spec.get("container"):
                out.append(Finding(f"{where}.{key}.container", "the container name is missing", "e.g. node"))
        else:
            if not (spec.get("metric") or {}).get("name"):
                out.append(Finding(f"{where}.{key}.metric.name", "the metric name is missing",
                                   "name the metric, e.g. samples_per_second"))
            if kind == "Object" and not spec.get("describedObject"):
                out.append(Finding(f"{where}.{key}.describedObject", "an Object metric names the object it describes",
                                   "add describedObject: {apiVersion, kind, name}"))
        out.extend(_target(spec.get("target"), kind, f"{where}.{key}.target"))
    return out


def _target(target: Any, kind: str, where: str) -> list[Finding]:
    if not isinstance(target, dict):
        return [Finding(where, "the target is missing", "e.g. {type: AverageValue, averageValue: 100}")]
    ttype = target.get("type")
    if ttype not in _TARGETS:
        return [Finding(f"{where}.type", f"must be one of {', '.join(_TARGETS)}, got {ttype!r}")]
    if ttype == "Utilization" and kind not in ("Resource", "ContainerResource"):
        return [Finding(f"{where}.type", "Utilization is a percentage of the pods' requests: only Resource and "
                        "ContainerResource metrics have it", "use AverageValue or Value")]
    field = _TARGETS[ttype]
    value = target.get(field)
    if value is None:
        return [Finding(f"{where}.{field}", f"a {ttype} target needs {field}")]
    if ttype == "Utilization":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return [Finding(f"{where}.{field}", f"must be a whole percentage of at least 1, got {value!r}")]
        return []
    try:
        Quantity.parse(value)
    except QuantityError:
        return [Finding(f"{where}.{field}", f"{value!r} is not a quantity", "e.g. 100, 500m, 2Gi")]
    return []
