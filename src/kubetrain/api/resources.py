"""Container resources checked as the API server checks them: names, quantity formats, whole numbers for
extended resources, hugepages, and requests against limits.

Every finding names the field path (``...containers[0].resources.requests[nvidia.com/gpu]``), what the API
server expects and how to fix it.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from kubetrain.api.errors import Finding
from kubetrain.api.quantity import FORMAT_ERROR, Quantity, QuantityError

# The pattern the CRD schemas (TrainJob, runtimes, JobSet) put on every quantity; the API server enforces it on
# strings before the value is ever parsed, so both it and the parser must accept a value.
CRD_PATTERN = re.compile(
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

STANDARD = ("cpu", "memory", "ephemeral-storage")
HUGEPAGES_PREFIX = "hugepages-"
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_CLOSE_NAMES = {"gpu": "nvidia.com/gpu", "gpus": "nvidia.com/gpu", "nvidia/gpu": "nvidia.com/gpu",
                "mem": "memory", "cpus": "cpu", "storage": "ephemeral-storage"}
QUANTITY_FIX = ("write a number with an optional suffix: 500m, 2, 1.5, 4Gi, 10G, 1e3 (binary Ki Mi Gi Ti Pi Ei; "
                "decimal m k M G T P E)")


def is_hugepages(name: str) -> bool:
    return name.startswith(HUGEPAGES_PREFIX)


def is_native(name: str) -> bool:
    """Kubernetes' own resources: no domain, or a ``kubernetes.io/`` one."""
    return "/" not in name or "kubernetes.io/" in name


def is_qualified_name(name: str) -> bool:
    prefix, sep, rest = name.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(rest) <= 63 and bool(_QUALIFIED_NAME.match(rest))


def is_extended(name: str) -> bool:
    """A device plugin's resource (``nvidia.com/gpu``): counted in whole units, never overcommitted."""
    return not is_native(name) and not name.startswith("requests.") and is_qualified_name("requests." + name)


def overcommit_allowed(name: str) -> bool:
    """Requests may be below limits only for native resources other than hugepages."""
    return is_native(name) and not is_hugepages(name)


def _name_problem(name: str) -> tuple[str, str] | None:
    if "/" not in name:
        if name in STANDARD or is_hugepages(name):
            return None
        close = _CLOSE_NAMES.get(name.lower()) or next((s for s in STANDARD if s.lower() == name.lower()), None)
        fix = f"did you mean {close!r}?" if close else (
            "use cpu, memory, ephemeral-storage, hugepages-<size>, or a device resource with its domain "
            "(e.g. nvidia.com/gpu)")
        return f"{name!r} must be a standard resource for containers", fix
    if not is_qualified_name(name):
        return (f"{name!r} is not a valid resource name (a domain, '/', and a name of letters, digits, '-', '_' or "
                "'.')", "e.g. nvidia.com/gpu")
    if not is_native(name) and not is_extended(name):
        return f"{name!r} doesn't follow extended resource name standard", "e.g. nvidia.com/gpu"
    return None


def format_problem(raw: Any) -> tuple[str, str] | None:
    """``(message, fix)`` when a CRD field of type quantity would reject ``raw``; None when it is a quantity."""
    if isinstance(raw, float) and not isinstance(raw, bool):
        text = repr(raw)
        return (f"expected a quantity as a string or an integer, got the number {text}",
                f'quote it ("{text}") or write it without a fraction (e.g. 1500m for 1.5)')
    if isinstance(raw, bool) or not isinstance(raw, int | str):
        shown = json.dumps(raw, default=str, ensure_ascii=False)[:40]
        got = {type(None): "nothing (an empty value)", bool: shown, list: f"a list {shown}",
               dict: f"an object {shown}"}.get(type(raw), shown)
        return f"expected a quantity, got {got}", QUANTITY_FIX
    try:
        Quantity.parse(raw)
    except QuantityError as exc:
        reason = "not a quantity" if str(exc) == FORMAT_ERROR else str(exc)
        return f"invalid quantity {raw!r}: {reason}", _fix_for(raw)
    if isinstance(raw, str) and not CRD_PATTERN.match(raw):
        return (f"invalid quantity {raw!r}: not a quantity (the CRD schema requires "
                "[+|-]<digits>[.<digits>][suffix] with nothing around it)", _fix_for(raw))
    return None


def _fix_for(raw: Any) -> str:
    text = raw.strip() if isinstance(raw, str) else ""
    if text[-1:] in ("B", "b"):
        for guess in (text[:-1], text[:-1] + "i"):
            if guess and CRD_PATTERN.match(guess) and quantity_of(guess) is not None:
                return f"Kubernetes writes bytes without 'B': did you mean {guess!r}? ({QUANTITY_FIX})"
    return QUANTITY_FIX


def quantity_of(raw: Any) -> Quantity | None:
    try:
        return Quantity.parse(raw)
    except QuantityError:
        return None


def check_value(name: str, raw: Any, path: str, out: list[Finding], *, formats: bool = True) -> Quantity | None:
    """One ``requests``/``limits`` entry: a quantity, not negative, whole for extended resources, whole pages.
    Returns the quantity when it passed (so requests can be compared with limits), else None.

    ``formats=False`` when the value's format was already checked (the pod template structure walk does it).
    """
    problem = format_problem(raw)
    if problem is not None:
        if formats:
            out.append(Finding(path, *problem))
        return None
    q = quantity_of(raw)
    if q is None:
        return None
    if q.value < 0:
        out.append(Finding(path, f"must be greater than or equal to 0, got {q}", "resources cannot be negative"))
        return None
    if is_extended(name) and not q.is_whole():
        low, high = math.floor(q.value), q.ceil()
        whole = f"{low} or {high}" if low >= 1 else str(high)
        out.append(Finding(path, f"must be an integer, got {q} ({raw!r})",
                           f"{name} is counted in whole devices: use {whole}"))
        return None
    if is_hugepages(name):
        page = _page_size(name)
        if page is None or page.value <= 0 or not page.is_whole() or q.value % page.value != 0:
            size = name[len(HUGEPAGES_PREFIX):]
            fix = (f"request a multiple of {size}" if page is not None and page.value > 0
                   else "name the resource by page size, e.g. hugepages-2Mi or hugepages-1Gi")
            out.append(Finding(path, f"{q} is not positive integer multiple of {name}", fix))
            return None
    return q


def _page_size(name: str) -> Quantity | None:
    try:
        return Quantity.parse(name[len(HUGEPAGES_PREFIX):])
    except QuantityError:
        return None


def check_resources(
    resources: Any, path: str, *, partial: bool = False, formats: bool = True, values: bool = True
) -> list[Finding]:
    """A container's ``resources`` (or a TrainJob's ``resourcesPerNode``).

    ``partial``: a patch, whose limits may come from what it patches, so requests are not compared with limits.
    ``values=False``: only compare requests with limits (each entry was checked where it was written).
    """
    out: list[Finding] = []
    entries_out: list[Finding] = out if values else []
    if not isinstance(resources, dict):
        return out  # the structure check reports a wrongly typed resources block
    parsed: dict[str, dict[str, Quantity]] = {}
    for section in ("limits", "requests"):
        entries = resources.get(section)
        if not isinstance(entries, dict):
            continue
        parsed[section] = {}
        for name, raw in entries.items():
            where = f"{path}.{section}[{name}]"
            problem = _name_problem(str(name))
            if problem is not None:
                entries_out.append(Finding(where, problem[0], problem[1]))
                continue
            q = check_value(str(name), raw, where, entries_out, formats=formats)
            if q is not None:
                parsed[section][str(name)] = q
    if partial:
        return out
    limits, requests = parsed.get("limits", {}), parsed.get("requests", {})
    for name, q in requests.items():
        where = f"{path}.requests[{name}]"
        limit = limits.get(name)
        raw_limits = resources.get("limits")
        if limit is None and isinstance(raw_limits, dict) and name in raw_limits:
            continue  # the limit itself is invalid and already reported
        if limit is not None:
            if q.value != limit.value and not overcommit_allowed(name):
                out.append(Finding(where, f"must be equal to {name} limit of {limit}",
                                   f"{name} cannot be overcommitted: set the request and the limit to the same value"))
            elif q.value > limit.value:
                out.append(Finding(where, f"must be less than or equal to {name} limit of {limit}",
                                   f"raise limits[{name}] or lower the request"))
        elif not overcommit_allowed(name):
            out.append(Finding(f"{path}.limits", f"Limit must be set for non overcommitable resources ({name})",
                               f"add limits: {{{name}: {q}}} (for {name} the limit is what is allocated)"))
    names = set(limits) | set(requests)
    if any(is_hugepages(n) for n in names) and not names & {"cpu", "memory"}:
        out.append(Finding(path, "HugePages require cpu or memory", "request cpu or memory next to the hugepages"))
    return out


def check_pod_resources(pod_spec: Any, path: str, *, partial: bool = False, formats: bool = True) -> list[Finding]:
    """Every container's and init container's resources, the pod's overhead and emptyDir size limits."""
    out: list[Finding] = []
    if not isinstance(pod_spec, dict):
        return out
    for key in ("initContainers", "containers"):
        containers = pod_spec.get(key)
        for i, container in enumerate(containers if isinstance(containers, list) else []):
            if isinstance(container, dict) and "resources" in container:
                out += check_resources(container["resources"], f"{path}.{key}[{i}].resources", partial=partial,
                                       formats=formats)
    overhead = pod_spec.get("overhead")
    for name, raw in (overhead if isinstance(overhead, dict) else {}).items():
        check_value(str(name), raw, f"{path}.overhead[{name}]", out, formats=formats)
    level = pod_spec.get("resources")
    if isinstance(level, dict):
        for section in ("limits", "requests"):
            entries = level.get(section)
            for name, raw in (entries if isinstance(entries, dict) else {}).items():
                check_value(str(name), raw, f"{path}.resources.{section}[{name}]", out, formats=formats)
    volumes = pod_spec.get("volumes")
    for i, volume in enumerate(volumes if isinstance(volumes, list) else []):
        empty_dir = volume.get("emptyDir") if isinstance(volume, dict) else None
        if isinstance(empty_dir, dict) and empty_dir.get("sizeLimit") is not None:
            check_value("ephemeral-storage", empty_dir["sizeLimit"], f"{path}.volumes[{i}].emptyDir.sizeLimit", out,
                        formats=formats)
    return out
