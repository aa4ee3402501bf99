"""``{{.name}}`` placeholders in a trial template: where they are, and the template with values put in.

A placeholder is ``{{.name}}`` (spaces inside the braces allowed: ``{{ .lr }}``) in any string of the template's
spec, and in the values of its labels and annotations; it is replaced by the trial's value of parameter ``name``.
What was meant as one but is not (``{{lr}}`` or ``{{ .lr | quote }}``: braces around a parameter's name or a dotted
word; ``${trialParameters.lr}``, Katib's syntax) is reported, never passed on to a trial. Other double braces (in a
script's text, say) are left alone.

Every trial's trainer also gets each value as ``KUBEFLOW_TRAINER_OPT_<NAME>`` (upstream's KEP-3562), so a command
may read it as ``$(KUBEFLOW_TRAINER_OPT_LR)`` (Kubernetes expands it) or from the environment.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

PLACEHOLDER = re.compile(r"\{\{\s*\.([^{}\s]+)\s*\}\}")
_BRACES = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_KATIB = re.compile(r"\$\{trialParameters\.([^}]+)\}")
ENV_PREFIX = "KUBEFLOW_TRAINER_OPT_"


def env_name(parameter: str) -> str:
    """``learning-rate`` -> ``KUBEFLOW_TRAINER_OPT_LEARNING_RATE``."""
    return ENV_PREFIX + re.sub(r"[^A-Za-z0-9_]", "_", parameter).upper()


@dataclass(frozen=True)
class Use:
    """A placeholder (or a malformed one: ``name`` None) at a field path of the template."""

    path: str
    name: str | None
    text: str


def strings(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string value under ``node`` with its field path (``spec.trainer.args[1]``)."""
    if isinstance(node, str):
        yield path, node
    elif isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}.{key}" if re.fullmatch(r"[A-Za-z0-9_]+", str(key)) else f"{path}[{key}]"
            yield from strings(value, sub)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from strings(value, f"{path}[{i}]")


def uses(template: dict[str, Any], names: list[str], root: str = "spec.trainJobTemplate") -> list[Use]:
    """Placeholders in a template (``{"metadata": ..., "spec": ...}`` as on the wire), in document order; ``names``:
    the parameters (braces around one of them are a malformed placeholder, others are someone else's text)."""
    found: list[Use] = []
    for key in ("metadata", "spec"):
        for path, text in strings(template.get(key) or {}, f"{root}.{key}"):
            for m in _BRACES.finditer(text):
                strict = PLACEHOLDER.fullmatch(m.group(0))
                if strict is not None:
                    found.append(Use(path, strict.group(1), m.group(0)))
                elif m.group(1).strip().startswith(".") or set(re.findall(r"[A-Za-z0-9_-]+", m.group(1))) & set(names):
                    found.append(Use(path, None, m.group(0)))
            for m in _KATIB.finditer(text):
                found.append(Use(path, None, m.group(0)))
    return found


def references(template: dict[str, Any]) -> set[str]:
    """Parameters whose ``KUBEFLOW_TRAINER_OPT_*`` variable the template names (``$(KUBEFLOW_TRAINER_OPT_LR)``)."""
    text = " ".join(t for _, t in strings(template, ""))
    return set(re.findall(re.escape(ENV_PREFIX) + r"([A-Za-z0-9_]+)", text))


def substitute(template: dict[str, Any], values: dict[str, str]) -> dict[str, Any]:
    """A copy of the template with every placeholder of a known parameter replaced by its value."""

    def fill(node: Any) -> Any:
        if isinstance(node, str):
            return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), node) if "{{" in node else node
        if isinstance(node, dict):
            return {k: fill(v) for k, v in node.items()}
        if isinstance(node, list):
            return [fill(v) for v in node]
        return node

    return {k: fill(v) if k in ("metadata", "spec") else copy.deepcopy(v) for k, v in template.items()}
