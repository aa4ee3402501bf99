"""``status.trainerStatus`` (upstream KEP-2779): the report a training process sends, and how it is shown.

Both status servers (the local supervisor's and the operator's) accept the same request: ``POST
/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status`` with ``{"trainerStatus": {...}}``,
a bearer token and TLS. ``parse_report`` checks the body against the CRD's rules (so a bad report is refused with
the field and the fix, instead of the API server's schema error), and the ``*_text`` helpers render a stored
``trainerStatus`` for ``get``, ``describe``, ``run`` and ``metrics``. Pure: no I/O; times are passed in.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass
from typing import Any, Final

from kubetrain.api.trainer_status import (
    ANNOTATION_LOG_PROGRESS,
    CA_FILE,
    DEFAULT_PORT,
    ENV_CA_CERT,
    ENV_NAMES,
    ENV_TOKEN,
    ENV_URL,
    INT32_MAX,
    MAX_BODY,
    MAX_METRIC_TEXT,
    MAX_METRICS,
    MOUNT_DIR,
    TOKEN_AUDIENCE,
    TOKEN_EXPIRATION_SECONDS,
    TOKEN_FILE,
    VOLUME_NAME,
    log_progress_enabled,
    parse_path,
    status_path,
)


class ReportError(Exception):
    """A request the status server refuses: ``code`` is the HTTP status, the message names field and fix."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def error_body(code: int, message: str) -> bytes:
    """A ``metav1.Status`` failure, as upstream's status server and the API server answer."""
    reasons = {401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 413: "RequestEntityTooLarge",
               422: "Invalid", 429: "TooManyRequests"}  # fmt: skip
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                              "code": code}  # fmt: skip
    if code in reasons:
        status["reason"] = reasons[code]
    return json.dumps(status).encode()


def _rfc3339(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise ReportError(422, f"{where}: expected an RFC 3339 time string such as 2025-01-23T10:30:45Z")
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ReportError(
            422, f"{where}: {value!r} is not an RFC 3339 time; send e.g. 2025-01-23T10:30:45Z"
        ) from None
    if parsed.tzinfo is None:
        raise ReportError(422, f"{where}: {value!r} has no time zone; append Z for UTC")
    return parsed.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _int(value: object, where: str, low: int, high: int) -> int:
    # The SDK passes what the training code gave it: 45.5 is taken as 45 rather than losing the whole report.
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ReportError(422, f"{where}: expected an integer from {low} to {high}, got {json.dumps(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ReportError(422, f"{where}: expected a number from {low} to {high}, got {value}")
    n = int(value)
    if not low <= n <= high:
        raise ReportError(422, f"{where}: {n} is outside {low}..{high}")
    return n


def _metrics(value: object) -> list[dict[str, str]]:
    where = "trainerStatus.metrics"
    if not isinstance(value, list):
        raise ReportError(422, f"{where}: expected a list of {{name, value}} objects")
    if len(value) > MAX_METRICS:
        raise ReportError(422, f"{where}: {len(value)} metrics, at most {MAX_METRICS} are allowed; send fewer")
    out: list[dict[str, str]] = []
    for i, m in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(m, dict):
            raise ReportError(422, f"{at}: expected an object with name and value")
        unknown = sorted(set(m) - {"name", "value"})
        if unknown:
            raise ReportError(422, f"{at}: unknown field {unknown[0]!r} (a metric has only name and value)")
        item: dict[str, str] = {}
        for key in ("name", "value"):
            v = m.get(key)
            if not isinstance(v, str) or not 1 <= len(v) <= MAX_METRIC_TEXT:
                raise ReportError(
                    422,
                    f"{at}.{key}: expected a string of 1 to {MAX_METRIC_TEXT} characters"
                    + ("" if key == "name" else " (values are sent as strings, e.g. \"0.25\")"),
                )
            item[key] = v
        out.append(item)
    return out


_FIELDS: Final = ("lastUpdatedTime", "progressPercentage", "estimatedRemainingSeconds", "metrics")


def validate_trainer_status(ts: object) -> dict[str, Any]:
    """A ``trainerStatus`` checked against the CRD's rules and normalised (UTC time, ints, field order)."""
    if not isinstance(ts, dict):
        raise ReportError(422, "trainerStatus: expected an object")
    unknown = sorted(set(ts) - set(_FIELDS))
    if unknown:
        raise ReportError(
            422, f"trainerStatus.{unknown[0]}: unknown field (known: {', '.join(_FIELDS)})"
        )
    if ts.get("lastUpdatedTime") is None:
        raise ReportError(422, "trainerStatus.lastUpdatedTime: required when trainerStatus is present")
    out: dict[str, Any] = {"lastUpdatedTime": _rfc3339(ts["lastUpdatedTime"], "trainerStatus.lastUpdatedTime")}
    if ts.get("progressPercentage") is not None:
        out["progressPercentage"] = _int(ts["progressPercentage"], "trainerStatus.progressPercentage", 0, 100)
    if ts.get("estimatedRemainingSeconds") is not None:
        out["estimatedRemainingSeconds"] = _int(
            ts["estimatedRemainingSeconds"], "trainerStatus.estimatedRemainingSeconds", 0, INT32_MAX
        )
    if ts.get("metrics") is not None:
        out["metrics"] = _metrics(ts["metrics"])
    return out


def parse_report(body: bytes) -> dict[str, Any] | None:
    """The ``trainerStatus`` of a request body, validated; None when the body carries ``"trainerStatus": null``
    (upstream answers such a report with 200 and changes nothing). Raises ``ReportError``."""
    if len(body) > MAX_BODY:
        raise ReportError(413, f"request body of {len(body)} bytes; at most {MAX_BODY} bytes are accepted")
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReportError(422, f"the body is not JSON ({exc}); send {{\"trainerStatus\": {{...}}}}") from None
    if not isinstance(doc, dict):
        raise ReportError(422, 'the body must be a JSON object: {"trainerStatus": {...}}')
    unknown = sorted(set(doc) - {"trainerStatus"})
    if unknown:
        raise ReportError(422, f"{unknown[0]}: unknown field; the body has one field, trainerStatus")
    ts = doc.get("trainerStatus")
    return None if ts is None else validate_trainer_status(ts)


# -- showing a trainerStatus -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """The parts of a stored ``trainerStatus`` the CLI shows (any may be missing)."""

    percent: int | None
    eta_seconds: int | None
    metrics: tuple[tuple[str, str], ...]
    updated: str | None
    source: str | None = None
    """Beyond upstream: ``logs`` when derived from log lines (local backend), else None (reported by the job)."""


SOURCE_LOGS: Final = "logs"
SOURCE_REPORT: Final = "report"


def progress_of(status: dict[str, Any] | None, source: str | None = None) -> Progress | None:
    """The ``Progress`` in a TrainJob's wire ``status``, or None when nothing was reported."""
    ts = (status or {}).get("trainerStatus")
    if not isinstance(ts, dict):
        return None
    metrics = tuple(
        (str(m.get("name", "")), str(m.get("value", ""))) for m in ts.get("metrics") or [] if isinstance(m, dict)
    )
    pct, eta, updated = ts.get("progressPercentage"), ts.get("estimatedRemainingSeconds"), ts.get("lastUpdatedTime")
    return Progress(
        percent=pct if isinstance(pct, int) and not isinstance(pct, bool) else None,
        eta_seconds=eta if isinstance(eta, int) and not isinstance(eta, bool) else None,
        metrics=metrics,
        updated=updated if isinstance(updated, str) else None,
        source=source,
    )


def duration_text(seconds: int) -> str:
    """``45s``, ``13m05s``, ``2h03m``, ``9d04h``: short and unambiguous."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    return f"{s // 86400}d{s % 86400 // 3600:02d}h"


def progress_column(status: dict[str, Any] | None) -> str:
    """``get``'s PROGRESS: ``45%``, or ``-`` when the job reported none."""
    p = progress_of(status)
    return f"{p.percent}%" if p is not None and p.percent is not None else "-"


def bar_text(percent: int | None, width: int = 24) -> str:
    """``[##########··········]`` (ASCII, so it survives any terminal or log file)."""
    if percent is None:
        return "[" + "?" * width + "]"
    filled = width * max(0, min(100, percent)) // 100  # never drawn further than done
    return "[" + "#" * filled + "." * (width - filled) + "]"


def metrics_text(metrics: tuple[tuple[str, str], ...], limit: int = 6) -> str:
    shown = [f"{n}={v}" for n, v in metrics[:limit]]
    if len(metrics) > limit:
        shown.append(f"(+{len(metrics) - limit} more)")
    return " ".join(shown)


def age_text(updated: str | None, now: dt.datetime) -> str:
    """``12s ago`` for a report's lastUpdatedTime."""
    if not updated:
        return ""
    try:
        then = dt.datetime.fromisoformat(updated.replace("Z", "+00:00"))
    except ValueError:
        return ""
    return f"{duration_text(int((now - then).total_seconds()))} ago"


def summary_text(p: Progress, *, now: dt.datetime | None = None, width: int = 24, finished: bool = False) -> str:
    """One line: ``[#####.....] 45% · ETA 13m05s · loss=0.23 acc=0.91 · 12s ago``; a finished job shows no ETA."""
    parts = [bar_text(p.percent, width) + (f" {p.percent}%" if p.percent is not None else " ?%")]
    if p.eta_seconds is not None and not finished:
        parts.append(f"ETA {duration_text(p.eta_seconds)}")
    if p.metrics:
        parts.append(metrics_text(p.metrics))
    if now is not None and p.updated:
        parts.append(age_text(p.updated, now))
    if p.source == SOURCE_LOGS:
        parts.append("from log lines")
    return " · ".join(x for x in parts if x)


__all__ = [
    "ANNOTATION_LOG_PROGRESS",
    "CA_FILE",
    "DEFAULT_PORT",
    "ENV_CA_CERT",
    "ENV_NAMES",
    "ENV_TOKEN",
    "ENV_URL",
    "INT32_MAX",
    "MAX_BODY",
    "MAX_METRICS",
    "MAX_METRIC_TEXT",
    "MOUNT_DIR",
    "SOURCE_LOGS",
    "SOURCE_REPORT",
    "TOKEN_AUDIENCE",
    "TOKEN_EXPIRATION_SECONDS",
    "TOKEN_FILE",
    "VOLUME_NAME",
    "Progress",
    "ReportError",
    "age_text",
    "bar_text",
    "duration_text",
    "error_body",
    "log_progress_enabled",
    "metrics_text",
    "parse_path",
    "parse_report",
    "progress_column",
    "progress_of",
    "status_path",
    "summary_text",
    "validate_trainer_status",
]
