"""Pod Security Standards levels of pod templates, computed as kube-apiserver 1.36's PodSecurity admission
computes them (same checks, same per-version behaviour, same field semantics). Pure: no I/O.

- ``assess(template, minor=None) -> Assessment``: the strictest level a PodTemplateSpec dict meets
  (``privileged`` < ``baseline`` < ``restricted``) and every violation up to restricted, one per offending
  field, each naming its path (relative to the template), what is wrong and the fix.
- ``evaluate(template, level, minor=None) -> list[Violation]``: the violations of one level, as the
  admission controller enforcing ``level:v1.<minor>`` (None: ``latest``) would find them.
- ``namespace_policy(labels)``: the enforce and warn levels a namespace's ``pod-security.kubernetes.io/*``
  labels ask for.
- ``would_violate(violations, "restricted:latest")``: PodSecurity's own one-line warning for those violations
  (``summary``).

See docs/security.md for the list of checks.
"""

from kubetrain.api.podsecurity.namespace import LevelVersion, NamespacePolicy, namespace_policy
from kubetrain.api.podsecurity.registry import (
    CHECKS,
    LEVELS,
    Assessment,
    Level,
    Violation,
    assess,
    checks_for,
    evaluate,
    level_rank,
    parse_level,
    parse_version,
)
from kubetrain.api.podsecurity.summary import would_violate

__all__ = [
    "CHECKS",
    "LEVELS",
    "Assessment",
    "Level",
    "LevelVersion",
    "NamespacePolicy",
    "Violation",
    "assess",
    "checks_for",
    "evaluate",
    "level_rank",
    "namespace_policy",
    "parse_level",
    "parse_version",
    "would_violate",
]
