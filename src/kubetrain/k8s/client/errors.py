"""Errors raised by the API client, one class per status code callers branch on."""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A non-2xx answer from the API server. ``status`` is the HTTP code, ``reason`` the Status reason."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None):
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body or {}
        super().__init__(f"{status} {reason}: {message}")


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    """409: a resourceVersion precondition failed, the object exists, or SSA found a field conflict."""

    @property
    def already_exists(self) -> bool:
        return self.reason == "AlreadyExists"


class Gone(ApiError):
    """410: the resourceVersion a watch asked for has been compacted away; the caller must relist."""


class Invalid(ApiError):
    """422: the object failed validation (schema, CEL or immutability)."""


class TooManyRequests(ApiError):
    """429 after the client exhausted its retries."""


class CredentialError(ApiError):
    """No credential to send: the kubeconfig's exec plugin failed (status 401, the server never saw a request)."""

    def __init__(self, message: str):
        super().__init__(401, "Unauthorized", message)


def error_for(status: int, body: dict[str, Any] | None, text: str = "") -> ApiError:
    """Map a response to the most specific error class, keeping the server's Status message."""
    body = body or {}
    reason = str(body.get("reason") or "")
    message = str(body.get("message") or text or "")
    cls: type[ApiError] = {404: NotFound, 409: Conflict, 410: Gone, 422: Invalid, 429: TooManyRequests}.get(
        status, ApiError
    )
    return cls(status, reason, message, body)
