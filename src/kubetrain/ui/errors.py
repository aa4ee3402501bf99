"""Errors as the UI shows them: an HTTP status, one plain sentence, and the fix when there is one.

Every handler turns what went wrong into a :class:`UiError`, so a page or an API answer never carries a traceback:
a TrainJob that does not exist is a 404 with close names, a cluster's refusal is a 403 in the API server's words,
bad form input is a 422 with each field path.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kubetrain.api.errors import KubetrainError

# ClusterBackend words API errors as "<what>: <message> (<code> <reason>)".
_STATUS = re.compile(r"\((\d{3}) [A-Za-z][A-Za-z ]*\)$")


@dataclass
class UiError(Exception):
    status: int
    message: str
    fix: str | None = None

    def __str__(self) -> str:
        return self.message


def from_exception(exc: BaseException) -> UiError:
    """What a backend call's exception means for the user. Anything that is not a ``KubetrainError`` is a bug
    of ours: 500, with a sentence that says so rather than the exception's internals."""
    if isinstance(exc, UiError):
        return exc
    if isinstance(exc, KubetrainError):
        status = _status_of(exc)
        message = str(exc)
        fix = None
        if status == 403:
            fix = ("your Kubernetes user may not do this here: ask a cluster admin for the RBAC permission, or "
                   "pick another namespace")
        elif status == 401:
            fix = "your kubeconfig's credentials were refused: log in again (as for kubectl) and reload"
        return UiError(status, message, fix)
    return UiError(500, f"kubetrain ui failed unexpectedly ({type(exc).__name__}); the server's log has the details")


def _status_of(exc: KubetrainError) -> int:
    cause = exc.__cause__
    code = getattr(cause, "status", None)
    if isinstance(code, int) and 400 <= code < 600:
        return code
    text = str(exc)
    if (m := _STATUS.search(text)) is not None:
        return int(m.group(1))
    if " not found" in text:
        return 404
    if text.startswith("cannot reach the API server"):
        return 502
    return 400
