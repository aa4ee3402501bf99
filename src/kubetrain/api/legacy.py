"""Legacy documents (OME's ``ome.io/v1beta1`` runtimes) brought into today's shape before they are validated.

The conversion only touches what it can read: anything not shaped as it expects (a string where an object
belongs, list items that are not objects) is left alone for the schema check to report with its field path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubetrain.api import constants as c

Warn = Callable[[tuple[Any, ...], str, str | None], None]


def _at(doc: Any, *keys: str) -> Any:
    node = doc
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return node


def _labels(rj: dict[str, Any]) -> dict[str, Any] | None:
    """The replicated job's template labels, created when absent; None when the structure is not objects."""
    template = rj.setdefault("template", {})
    if template is None:
        template = rj["template"] = {}
    if not isinstance(template, dict):
        return None
    meta = template.setdefault("metadata", {})
    if meta is None:
        meta = template["metadata"] = {}
    if not isinstance(meta, dict):
        return None
    labels = meta.setdefault("labels", {})
    if labels is None:
        labels = meta["labels"] = {}
    return labels if isinstance(labels, dict) else None


def convert_ome_runtime(doc: dict[str, Any], warn: Warn) -> None:
    """OME runtimes do not label their steps: pick the trainer job the way a reader of the document would, and
    give its single container the name the plugins look for."""
    rjobs = _at(doc, "spec", "template", "spec", "replicatedJobs")
    if not isinstance(rjobs, list) or not rjobs or not all(isinstance(r, dict) for r in rjobs):
        return
    if any(isinstance(_at(r, "template", "metadata", "labels"), dict)
           and c.LABEL_ANCESTOR in _at(r, "template", "metadata", "labels") for r in rjobs):
        return
    if len(rjobs) == 1:
        chosen: dict[str, Any] | None = rjobs[0]
    else:
        chosen = next((r for r in rjobs if r.get("name") == c.LAUNCHER), None)
    if chosen is None:
        return
    labels = _labels(chosen)
    if labels is None:
        return
    idx = rjobs.index(chosen)
    labels[c.LABEL_ANCESTOR] = c.ANCESTOR_TRAINER
    warn(("spec", "template", "spec", "replicatedJobs", idx),
         f"replicated job {chosen.get('name')!r} has no {c.LABEL_ANCESTOR} label; using it as the trainer step",
         f"add the label {c.LABEL_ANCESTOR}: trainer to its template metadata")
    _rename_single_container(chosen, idx, "the trainer step's container", warn)


def _rename_single_container(rj: dict[str, Any], idx: int, role: str, warn: Warn) -> None:
    containers = _at(rj, "template", "spec", "template", "spec", "containers")
    if not (isinstance(containers, list) and len(containers) == 1 and isinstance(containers[0], dict)):
        return
    old = containers[0].get("name")
    if isinstance(old, str) and old and old != c.NODE:
        containers[0]["name"] = c.NODE
        warn(("spec", "template", "spec", "replicatedJobs", idx),
             f"container {old!r} renamed to 'node', the name {role} must have",
             "rename the container to node in the runtime")
