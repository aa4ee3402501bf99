"""What the CLI's tables and the UI's pages render the same way."""

from __future__ import annotations

from datetime import UTC, datetime


def age(ts: str | None) -> str:
    if not ts:
        return "-"
    try:
        then = datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    except ValueError:
        return "-"
    s = int((datetime.now(UTC) - then).total_seconds())
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= n:
            return f"{s // n}{unit}"
    return f"{s}s"
