"""A TrainJob's ``status.trainerStatus`` on this machine: reports from its pods, else what its logs show.

The supervisor owns one ``ProgressKeeper``. Reports accepted by the status endpoint (``status_server``) arrive on
the server's thread and are applied on the supervisor's own loop (``poll``), so the status dict has one writer.
Until a pod reports, and unless the TrainJob opts out (annotation ``kubetrain.dev/log-progress: "false"``), the
trainer pods' logs are read as they grow and fed to ``kubetrain.api.logprogress``. Every change is also appended
to the store's progress history, which ``kubetrain metrics`` shows.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from pathlib import Path
from typing import Any

from kubetrain.api import progress as P
from kubetrain.api.logprogress import LogProgress
from kubetrain.local.store.db import Store, StoreError

log = logging.getLogger("kubetrain.local.progress")

LOG_EVERY = 1.0
"""Seconds between reads of the logs for progress: a bar redraws far more often than anyone looks."""
LOG_RECORD_EVERY = 2.0
"""Seconds between two log-derived updates of the status (and history rows)."""
READ_MAX = 1024 * 1024
"""Bytes read per log and round; a larger backlog is skipped to its last ``KEEP_TAIL`` bytes (only the latest
state of a bar matters)."""
KEEP_TAIL = 256 * 1024


def log_progress_enabled(trainjob: dict[str, Any]) -> bool:
    return P.log_progress_enabled(((trainjob.get("metadata") or {}).get("annotations") or {}).get(
        P.ANNOTATION_LOG_PROGRESS))  # fmt: skip


class _Tail:
    """New text of one growing log file, cut so that a carriage-return-redrawn bar's latest state is seen even
    before its line ends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""

    def read(self) -> str:
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size < self.offset:  # replaced (a new incarnation): start over
                    self.offset, self.partial = 0, b""
                if size - self.offset > READ_MAX:
                    self.offset, self.partial = size - KEEP_TAIL, b""
                f.seek(self.offset)
                data = f.read(READ_MAX)
        except OSError:
            return ""
        if not data:
            return ""
        self.offset += len(data)
        data = self.partial + data
        cut = max(data.rfind(b"\n"), data.rfind(b"\r"))
        # tqdm draws "\r<bar>": the text after the last \r is the bar's current state, complete as soon as it was
        # written. It is read now and kept, so a line still being written is read again once it is whole.
        self.partial = data[cut + 1 :][-KEEP_TAIL:]
        # Carriage returns stay: the parser keeps only the last state of a redrawn line (cheap for chatty bars).
        return (data[: cut + 1] + self.partial).decode(errors="replace")


class ProgressKeeper:
    def __init__(self, store: Store, namespace: str, name: str, uid: str, trainjob: dict[str, Any]) -> None:
        self.store, self.namespace, self.name, self.uid = store, namespace, name, uid
        self._lock = threading.Lock()
        self._pending: dict[str, Any] | None = None
        self._reported = False
        self._from_logs = log_progress_enabled(trainjob)
        self._parser = LogProgress()
        self._tails: dict[str, _Tail] = {}
        self._next_read = 0.0
        self._last_record = 0.0
        self._unrecorded: dict[str, Any] | None = None
        self.source: str | None = None
        """Where the status's current trainerStatus came from (``report`` or ``logs``)."""

    # Called on the status server's thread.
    def report(self, pod: str, trainer_status: dict[str, Any]) -> None:
        with self._lock:
            self._pending = trainer_status

    def poll(self, status: dict[str, Any], logs: list[Path], *, final: bool = False) -> bool:
        """Bring ``status["trainerStatus"]`` up to date; True when it changed. ``logs``: the trainer pods' log
        files; ``final`` reads them to the end and records what is pending (the job ended)."""
        with self._lock:
            pending, self._pending = self._pending, None
        if pending is not None:
            self._reported = True  # the job reports: its logs are no longer guessed at
            self.source = P.SOURCE_REPORT
            status["trainerStatus"] = pending
            self._record(P.SOURCE_REPORT, pending)
            return True
        if self._reported or not self._from_logs:
            return False
        now = time.monotonic()
        if now < self._next_read and not final:
            return False
        self._next_read = now + LOG_EVERY
        changed = False
        for path in logs:
            tail = self._tails.setdefault(str(path), _Tail(path))
            text = tail.read()
            if text and self._parser.feed(text, time.time()):
                changed = True
        if changed:
            self._unrecorded = self._parser.trainer_status(dt.datetime.now(dt.UTC))
        if self._unrecorded is None or (now - self._last_record < LOG_RECORD_EVERY and not final):
            return False
        derived, self._unrecorded = self._unrecorded, None
        self._last_record = now
        self.source = P.SOURCE_LOGS
        status["trainerStatus"] = derived
        self._record(P.SOURCE_LOGS, derived)
        return True

    def _record(self, source: str, trainer_status: dict[str, Any]) -> None:
        try:
            self.store.add_progress(self.namespace, self.name, self.uid, source, trainer_status)
        except StoreError as exc:  # history is a convenience: a full disk costs it, never the job
            log.warning("progress history not recorded trainjob=%s/%s error=%r", self.namespace, self.name, str(exc))
