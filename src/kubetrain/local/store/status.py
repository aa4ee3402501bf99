"""TrainJob status in the cluster's vocabulary, from the local JobSet's state.

Conditions and reasons are the ones the controller copies from JobSet (``Complete``/``AllJobsCompleted``,
``Failed``/``FailedJobs``/``ReachedMaxRestarts``), plus ``Suspended`` and ``DeadlineExceeded``. Situations that only
exist locally get their own reasons (below) so they are never confused with cluster outcomes.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubetrain.api import constants as C

# Local-only condition: waiting for the local scheduler (reason: what it waits for, e.g. ``Insufficient cpu``).
COND_QUEUED = "Queued"

# Local-only failure reasons.
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_TERMINATED = "SupervisorTerminated"
REASON_SUPERVISOR_LOST = "SupervisorLost"
REASON_START_FAILED = "PodStartFailed"


def now_rfc3339() -> str:
    """Now, as the API server writes timestamps (second precision, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(status: dict[str, Any], type_: str, cstatus: str, reason: str, message: str) -> bool:
    """``meta.SetStatusCondition``: lastTransitionTime changes only when the status flips. Returns changed."""
    conds: list[dict[str, Any]] = status.setdefault("conditions", [])
    for c in conds:
        if c["type"] == type_:
            if (c["status"], c.get("reason"), c.get("message")) == (cstatus, reason, message):
                return False
            if c["status"] != cstatus:
                c["lastTransitionTime"] = now_rfc3339()
            c.update(status=cstatus, reason=reason, message=message)
            return True
    conds.append(
        {
            "type": type_,
            "status": cstatus,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now_rfc3339(),
        }
    )
    return True


def finished(status: dict[str, Any]) -> bool:
    return any(
        c["type"] in (C.COND_COMPLETE, C.COND_FAILED) and c["status"] == "True"
        for c in status.get("conditions") or []
    )


def state_of(status: dict[str, Any]) -> str:
    conds = status.get("conditions") or []
    return str(conds[-1]["type"]) if conds else ""


def complete(status: dict[str, Any]) -> bool:
    return set_condition(
        status, C.COND_COMPLETE, "True", C.REASON_ALL_JOBS_COMPLETED, C.MSG_ALL_JOBS_COMPLETED
    )


def fail(status: dict[str, Any], reason: str, message: str) -> bool:
    return set_condition(status, C.COND_FAILED, "True", reason, message)
