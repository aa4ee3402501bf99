"""Re-export so plugins import compile errors from the compiler package they live in."""

from kubetrain.api.errors import CompileError

__all__ = ["CompileError"]
