"""Why a TrainJob's pods failed, as pure functions over the API's dicts: what a pod shows (exit code, signal,
OOMKilled, Evicted, DeadlineExceeded), the bounded per-step record the operator keeps in ``status.podFailures``,
and the text of the ``Failed`` condition and ``PodFailed`` events.

The operator (``k8s/operator/failures.py``) writes the record; ``kubetrain describe``/``get`` read it back. Both
use this module, so the message the operator composes and the lines ``describe`` takes out of it cannot drift.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from kubetrain.api.views import FailureView, StateView
from kubetrain.k8s.pods.steps import LABEL_RJOB, step_name

# Bounds of what one TrainJob's record may hold (docs/operator.md, "Failures a user can read").
MAX_ENTRIES = 4
"""Steps (pod, container) with a recorded failure; the first ones to fail are kept (the root cause is usually the
first failure; later ones are often peers losing their rendezvous)."""
LOG_LINES = 10
LOG_BYTES = 2048
MESSAGE_CHARS = 256
"""A container's termination message (terminationMessagePath) or a pod's status message, as recorded."""

# Linux signal numbers: a container killed by a signal exits with 128 + its number.
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE",
            9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 14: "SIGALRM", 15: "SIGTERM"}  # fmt: skip
# Pod-level failures without a failed container (the kubelet's or the eviction API's reasons).
_POD_REASONS_IGNORED = {"", "Completed"}

LOG_HEADER = re.compile(r"^Last log lines of (?P<step>\S+) \(pod (?P<pod>[^,]+), container (?P<container>[^)]+)\):$")


@dataclass(frozen=True)
class Failure:
    """One failed run of a container (or a pod that failed without one), as a pod's status shows it."""

    step: str
    replicated_job: str
    pod: str
    container: str
    exit_code: int | None
    signal: str | None
    reason: str
    message: str
    restarts: int
    time: str
    fingerprint: str
    """Identifies this run: the same termination seen again (``state`` then ``lastState``) is not new."""
    previous: bool
    """Its log is the container's previous instance (it has restarted since)."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.step, self.container)

    def entry(self, failures: int = 1) -> dict[str, Any]:
        """The ``status.podFailures`` item for this failure (wire form)."""
        out: dict[str, Any] = {"step": self.step, "pod": self.pod, "container": self.container}
        if self.exit_code is not None:
            out["exitCode"] = self.exit_code
        if self.signal:
            out["signal"] = self.signal
        if self.reason:
            out["reason"] = self.reason
        if self.message:
            out["message"] = self.message
        out.update(restarts=self.restarts, failures=failures)
        if self.time:
            out["lastFailureTime"] = self.time
        return out


def _short(text: str | None, limit: int = MESSAGE_CHARS) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def signal_of(term: dict[str, Any]) -> str | None:
    sig = term.get("signal")
    if isinstance(sig, int) and sig in _SIGNALS:
        return _SIGNALS[sig]
    code = term.get("exitCode")
    if isinstance(code, int) and code > 128:
        return _SIGNALS.get(code - 128)
    return None


def _parse(ts: Any) -> dt.datetime | None:
    if not isinstance(ts, str) or not ts:
        return None
    try:
        return dt.datetime.fromisoformat(ts.replace("Z", "+00:00"))
    except ValueError:
        return None


def _disruption(pod: dict[str, Any]) -> str | None:
    """The reason of a True ``DisruptionTarget`` condition (preemption, eviction, taint), if any."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget" and cond.get("status") == "True":
            return str(cond.get("reason") or "DisruptionTarget")
    return None


def _killed_by_deletion(pod: dict[str, Any], term: dict[str, Any]) -> bool:
    """Whether a termination came from deleting the pod (the Job controller past its backoffLimit, a JobSet
    restart or failure tearing down the other pods, a user): those are consequences, not causes.

    ``deletionTimestamp`` is the delete request's time plus the grace period, so a run that finished after the
    request (or whose end is unknown) went down with the pod."""
    meta = pod.get("metadata") or {}
    deleted = _parse(meta.get("deletionTimestamp"))
    if deleted is None:
        return False
    grace = meta.get("deletionGracePeriodSeconds")
    requested = deleted - dt.timedelta(seconds=int(grace) if isinstance(grace, int) else 0)
    finished = _parse(term.get("finishedAt"))
    return finished is None or finished >= requested - dt.timedelta(seconds=1)


def failed_by_deletion(pod: dict[str, Any]) -> bool:
    """Whether a ``Failed`` pod failed only because it was deleted. The kubelet moves a deleted pod to a terminal
    phase, ``Failed`` when a container exited non-zero, which torchrun (1) and most programs (143) do on SIGTERM;
    such a pod is a consequence of the deletion (a JobSet re-created to change its node count, a restart), not a
    failure of its own. A ``DisruptionTarget`` condition (eviction, preemption) makes it a failure again."""
    if not (pod.get("metadata") or {}).get("deletionTimestamp") or _disruption(pod) is not None:
        return False
    status = pod.get("status") or {}
    terms = [
        (s.get("state") or {}).get("terminated")
        for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    ]
    return all(not t or _killed_by_deletion(pod, t) for t in terms)


def pod_failures(pod: dict[str, Any]) -> list[Failure]:
    """The failed runs a pod's status shows: containers (init containers too) that terminated with a non-zero
    exit code or a signal, each one's current or last termination, and a pod that failed as a whole (Evicted,
    DeadlineExceeded, ...). Runs ended by the pod's own deletion are left out, unless a ``DisruptionTarget``
    condition says why the pod was taken away (preemption, eviction), which then is the reason."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    labels = meta.get("labels") or {}
    name = str(meta.get("name") or "")
    uid = str(meta.get("uid") or name)
    step, rjob = step_name(pod), str(labels.get(LABEL_RJOB, ""))
    disruption = _disruption(pod)
    out: list[Failure] = []
    for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        restarts = int(s.get("restartCount") or 0)
        current = (s.get("state") or {}).get("terminated")
        last = (s.get("lastState") or {}).get("terminated")
        # The current termination if there is one, else the last (the container has restarted since).
        for term, previous in ((current, False), (last, True)):
            if not term:
                continue
            code = term.get("exitCode")
            sig = signal_of(term)
            if code == 0 and not sig:
                break  # a clean exit; an older failure in lastState was already reported when it happened
            reason = str(term.get("reason") or "")
            if _killed_by_deletion(pod, term):
                if disruption is None:
                    continue  # the run before it may still be a failure nobody has seen
                reason = disruption
            run_id = term.get("containerID") or term.get("finishedAt") or f"r{restarts - (1 if previous else 0)}"
            out.append(
                Failure(
                    step=step,
                    replicated_job=rjob,
                    pod=name,
                    container=str(s.get("name") or ""),
                    exit_code=code if isinstance(code, int) else None,
                    signal=sig,
                    reason=reason,
                    message=_short(term.get("message")),
                    restarts=restarts,
                    time=str(term.get("finishedAt") or ""),
                    fingerprint=f"{uid}/{s.get('name')}/{run_id}",
                    previous=previous,
                )
            )
            break
    pod_reason = str(status.get("reason") or "")
    if status.get("phase") == "Failed" and not out and pod_reason not in _POD_REASONS_IGNORED:
        out.append(
            Failure(
                step=step,
                replicated_job=rjob,
                pod=name,
                container="",
                exit_code=None,
                signal=None,
                reason=pod_reason,
                message=_short(status.get("message")),
                restarts=0,
                time="",
                fingerprint=f"{uid}//{pod_reason}",
                previous=False,
            )
        )
    return out


def container_restarts(pod: dict[str, Any]) -> dict[str, int]:
    """Each container's restart count (``kubectl get pods``' RESTARTS, per container)."""
    status = pod.get("status") or {}
    return {
        str(s.get("name") or ""): int(s.get("restartCount") or 0)
        for s in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    }


def log_tail(text: str, lines: int = LOG_LINES, limit: int = LOG_BYTES) -> str:
    """The last ``lines`` lines of a log, at most ``limit`` bytes (a runaway line is cut at its start, marked
    ``...``)."""
    kept = "\n".join(text.splitlines()[-lines:]) if lines > 0 else ""
    data = kept.encode()
    if len(data) <= limit:
        return kept
    return "..." + data[-(limit - 3) :].decode(errors="ignore")


# -- text --------------------------------------------------------------------------------------------------
def _what(entry: dict[str, Any]) -> str:
    code, sig = entry.get("exitCode"), entry.get("signal")
    reason, message = entry.get("reason") or "", entry.get("message") or ""
    if reason == "OOMKilled":
        text = f"was OOMKilled (exit code {code})" if code is not None else "was OOMKilled"
    elif sig:
        text = f"was killed by {sig} (exit code {code}" + (f", {reason})" if reason and reason != "Error" else ")")
    elif code is not None:
        text = f"exited with code {code}" + (f" ({reason})" if reason else "")
    else:
        text = f"failed: {reason}" if reason else "failed"
    return f"{text}: {message}" if message and message != reason else text


def summary(entry: dict[str, Any]) -> str:
    """``node-0-0 exited with code 3 (Error) after 6 restarts``: one recorded failure, in one line."""
    step, container = entry.get("step", "?"), entry.get("container") or ""
    rjob = step.rsplit("-", 2)[0] if step.count("-") >= 2 else step
    who = step if container in ("", "node", rjob) else f"{step} (container {container})"
    restarts, failures = int(entry.get("restarts") or 0), int(entry.get("failures") or 1)
    after = ""
    if restarts:
        after = f" after {restarts} restart{'s' if restarts != 1 else ''}"
    elif failures > 1:
        after = f" ({failures} failed runs)"
    return f"{who} {_what(entry)}{after}"


def log_header(entry: dict[str, Any]) -> str:
    return f"Last log lines of {entry.get('step')} (pod {entry.get('pod')}, container {entry.get('container') or '-'}):"


@dataclass(frozen=True)
class JobFailure:
    """A failed Job of the TrainJob's JobSet: its ``Failed`` condition (BackoffLimitExceeded, DeadlineExceeded,
    PodFailurePolicy, MaxFailedIndexesExceeded, ...)."""

    name: str
    reason: str
    message: str


FIRST_FAILED_JOB = re.compile(r"first failed job: (?P<job>[^)\s]+)")


def failed_job(jobs: list[dict[str, Any]], jobset_message: str) -> JobFailure | None:
    """The Job JobSet names as its first failure (``first failed job: x``), else the earliest failed one."""
    failed = []
    for job in jobs:
        for cond in (job.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "Failed" and cond.get("status") == "True":
                name = str((job.get("metadata") or {}).get("name") or "")
                failed.append((str(cond.get("lastTransitionTime") or ""), name, cond))
    if not failed:
        return None
    named = FIRST_FAILED_JOB.search(jobset_message or "")
    chosen = next((f for f in failed if named and f[1] == named.group("job")), None) or min(failed)
    cond = chosen[2]
    return JobFailure(chosen[1], str(cond.get("reason") or ""), _short(cond.get("message")))


def primary(entries: list[dict[str, Any]], trainjob: str, job: str | None) -> dict[str, Any] | None:
    """The failure the ``Failed`` condition names: one in the Job that failed first (as JobSet or the Job list
    says), else the first recorded (entries keep the order in which the steps first failed)."""
    if not entries:
        return None
    if job:
        for entry in entries:
            step = str(entry.get("step") or "")
            if f"{trainjob}-{step}".startswith(job + "-"):
                return entry
    return entries[0]


def failed_message(
    jobset_message: str,
    entries: list[dict[str, Any]],
    trainjob: str,
    job: JobFailure | None,
    *,
    previous_message: str | None = None,
) -> str:
    """The TrainJob's ``Failed`` message: the failure that caused it (step, exit code or signal, reason,
    restarts), the failed Job's reason, JobSet's own message, then the step's last log lines.

    ``previous_message``: the message already on the TrainJob; its log lines are kept when the entry no longer
    carries them (the record sheds log lines once the TrainJob has finished)."""
    named = FIRST_FAILED_JOB.search(jobset_message or "")
    first = primary(entries, trainjob, job.name if job else (named.group("job") if named else None))
    parts = []
    if first is not None:
        parts.append(summary(first))
    if job is not None:
        parts.append(f"Job {job.name}: " + ": ".join(p for p in (job.reason, job.message) if p))
    if jobset_message:
        parts.append(jobset_message)
    text = "; ".join(parts)
    if first is None:
        return text
    logs = first.get("logTail")
    if not logs and previous_message:
        header, lines = split_message(previous_message)[1:]
        if header is not None and header.get("step") == first.get("step") and lines:
            logs = "\n".join(lines)
    if logs:
        text += "\n" + log_header(first) + "\n" + logs
    return text


def split_message(message: str) -> tuple[str, dict[str, str] | None, list[str]]:
    """A ``Failed`` message as :func:`failed_message` writes it: the summary, the log block's step, pod and
    container (``None`` without one) and its lines."""
    lines = (message or "").split("\n")
    for i, line in enumerate(lines):
        m = LOG_HEADER.match(line)
        if m:
            return "\n".join(lines[:i]), m.groupdict(), lines[i + 1 :]
    return message or "", None, []


def event_message(entry: dict[str, Any], suppressed: int = 0, limit: int = 950) -> str:
    """A ``PodFailed`` event: the failure, the pod, and as many of its last log lines as fit."""
    text = f"{summary(entry)} (pod {entry.get('pod')})"
    if suppressed:
        text += f"; {suppressed} more pod failure{'s' if suppressed != 1 else ''} not reported as events"
    logs = entry.get("logTail")
    if logs:
        room = limit - len(text) - len("\nlast log lines:\n")
        if room > 40:
            tail = logs if len(logs) <= room else "..." + logs[-(room - 3) :]
            text += "\nlast log lines:\n" + tail
    return text if len(text) <= limit else text[: limit - 4] + " ..."


def recorded(status: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``status.podFailures`` of a TrainJob (wire dicts), tolerant of anything malformed."""
    items = (status or {}).get("podFailures")
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def running_note(status: dict[str, Any] | None) -> tuple[str, str] | None:
    """``(reason, message)`` for a TrainJob that runs while its pods have failed (a crash loop): the most recent
    recorded failure, with restarts and exit code."""
    entries = recorded(status)
    if not entries:
        return None
    latest = max(entries, key=lambda e: str(e.get("lastFailureTime") or ""))
    more = len(entries) - 1
    extra = f" (and {more} more step{'s' if more != 1 else ''} with failures)" if more else ""
    return "PodFailures", summary(latest) + extra


def with_failures(state: StateView, status: dict[str, Any] | None) -> StateView:
    """A TrainJob's state as ``get``, ``describe`` and ``run`` show it on a cluster: a ``Failed`` message without
    its log block (``describe`` prints the lines on their own), and a running job whose pods have failed (a
    crash loop) with the most recent failure as its reason."""
    if state.state == "Failed":
        head = split_message(state.message)[0]
        return state if head == state.message else dataclasses.replace(state, message=head)
    if state.state == "Running":
        note = running_note(status)
        if note is not None:
            return dataclasses.replace(state, reason=note[0], message=note[1])
    return state


def failure_views(status: dict[str, Any] | None) -> list[FailureView]:
    out = []
    for e in recorded(status):
        code = e.get("exitCode")
        out.append(
            FailureView(
                step=str(e.get("step") or ""),
                container=str(e.get("container") or ""),
                pod=str(e.get("pod") or ""),
                exit_code=code if isinstance(code, int) else None,
                signal=e.get("signal") or None,
                reason=str(e.get("reason") or ""),
                message=str(e.get("message") or ""),
                restarts=int(e.get("restarts") or 0),
                failures=int(e.get("failures") or 1),
                time=str(e.get("lastFailureTime") or ""),
            )
        )
    return out


def recorded_logs(status: dict[str, Any] | None, failed_condition_message: str | None) -> dict[str, list[str]]:
    """Last log lines per step from the record, and from the ``Failed`` message (they stay there once the
    TrainJob has finished): what ``describe`` shows for steps whose pods are gone."""
    out: dict[str, list[str]] = {}
    for e in recorded(status):
        if e.get("logTail"):
            out.setdefault(str(e.get("step")), str(e["logTail"]).splitlines())
    if failed_condition_message:
        header, lines = split_message(failed_condition_message)[1:]
        if header is not None and lines:
            out.setdefault(header["step"], lines)
    return out
