"""The one error an initializer reports: what went wrong with which input, and what fixes it."""

from __future__ import annotations


class InitializerError(Exception):
    """``permanent`` means retrying with the same input cannot succeed (the exit status tells a runner so)."""

    def __init__(self, message: str, fix: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.message = message
        self.fix = fix
        self.permanent = permanent

    def __str__(self) -> str:
        return f"{self.message} (fix: {self.fix})"
