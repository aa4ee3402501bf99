"""What a UI request asks for, read and checked the same way by the pages and the JSON API: the namespace, the
label selector and object names."""

from __future__ import annotations

import re

from aiohttp import web

from kubetrain.api import KubetrainError
from kubetrain.api.selectors import Selector
from kubetrain.api.selectors import parse as parse_selector
from kubetrain.ui.errors import UiError
from kubetrain.ui.state import Ui


def target(request: web.Request, kind: str = "TrainJob") -> tuple[str, str]:
    """The namespace and name of the object a path names (``/.../{namespace}/{name}``), checked."""
    ns, name = request.match_info["namespace"], request.match_info["name"]
    check_name(ns, "namespace")
    check_name(name, f"{kind} name")
    return ns, name


def scope_of(request: web.Request, ui: Ui) -> str | None:
    """The namespace a page shows (None: all): ``?all=1``, ``?namespace=x``, else what the UI started with."""
    q = request.query
    if q.get("all") in ("1", "true", "on"):
        return None
    if "namespace" in q:
        ns = q["namespace"].strip()
        if not ns:
            return None
        check_name(ns, "namespace")
        return ns
    return ui.default_scope


def selector_of(request: web.Request) -> tuple[str, Selector | None]:
    text = request.query.get("selector", "").strip()
    if not text:
        return "", None
    try:
        return text, parse_selector(text)
    except KubetrainError as exc:
        raise UiError(400, f"label selector: {exc}", "e.g. team=vision,env!=dev or 'tier in (a,b)'") from None


_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


def check_name(value: str, what: str) -> None:
    if len(value) > 253 or not _NAME.fullmatch(value):
        raise UiError(400, f"{what} {value!r} is not a valid Kubernetes name",
                      "lower-case letters, digits, '-' and '.', at most 253 characters")
