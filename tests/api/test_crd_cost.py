"""Every CEL rule of the CRDs fits the API server's cost budget (estimated offline, as the server does).

A rule over an unbounded list (``dependsOn`` without ``maxItems``) once made the API server reject both runtime
CRDs ("estimated rule cost exceeds budget by factor of more than 100x"), so nothing could be installed. These
tests would have caught it; the e2e suite installs the CRDs on a real API server.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.api.crd import generate_crds
from tests.api.celcost import PER_CRD_LIMIT, PER_RULE_LIMIT, crd_rule_costs, decl, rule_cost
from tests.conftest import SHARED

pytest.importorskip("celpy", reason="cel-python (its CEL parser) not installed")

CRDS = {c["spec"]["names"]["kind"]: c for c in generate_crds()}


def schema_of(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_rule_fits_the_per_rule_budget(kind: str) -> None:
    over = [
        f"{c.path}: {c.rule!r} costs {c.total:,} ({c.cost:,} x {c.cardinality:,} evaluations)"
        for c in crd_rule_costs(schema_of(CRDS[kind]))
        if c.total > PER_RULE_LIMIT
    ]
    assert over == []


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_all_rules_together_fit_the_per_crd_budget(kind: str) -> None:
    costs = crd_rule_costs(schema_of(CRDS[kind]))
    assert costs, "the CRD has CEL rules, so this test measures something"
    assert sum(c.total for c in costs) <= PER_CRD_LIMIT


def _depends_on(schema: dict[str, Any]) -> dict[str, Any]:
    spec = schema["properties"]["spec"]["properties"]["template"]["properties"]["spec"]
    node: dict[str, Any] = spec["properties"]["replicatedJobs"]["items"]["properties"]["dependsOn"]
    return node


def test_an_unbounded_list_under_an_iterating_rule_is_caught() -> None:
    """The regression: dependsOn's immutability rule without maxItems is over budget by more than 100x."""
    schema = copy.deepcopy(schema_of(CRDS["ClusterTrainingRuntime"]))
    assert _depends_on(schema)["maxItems"] == 5
    del _depends_on(schema)["maxItems"]
    (cost,) = [c for c in crd_rule_costs(schema) if c.path.endswith(".dependsOn")]
    assert cost.total > 100 * PER_RULE_LIMIT


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_rule_that_iterates_has_bounded_input(kind: str) -> None:
    """A rule that loops over, compares or searches a list (or map) only does so where maxItems (maxProperties)
    bounds it: the unbounded guess is what made dependsOn's rule 100x too expensive."""
    costs = crd_rule_costs(schema_of(CRDS[kind]))
    assert [(c.path, c.rule, c.unbounded_iterations) for c in costs if c.unbounded_iterations] == []


def test_the_iteration_check_names_the_unbounded_list() -> None:
    schema = copy.deepcopy(schema_of(CRDS["TrainingRuntime"]))
    del _depends_on(schema)["maxItems"]
    flagged = {c.path: c.unbounded_iterations for c in crd_rule_costs(schema) if c.unbounded_iterations}
    assert flagged == {".spec.template.spec.replicatedJobs[].dependsOn": ("self", "self")}


@pytest.mark.parametrize(
    ("rule", "schema", "cost"),
    [
        # Equality of two lists costs a tenth of the shorter list's length, plus reading self and oldSelf.
        ("self == oldSelf", {"type": "array", "maxItems": 5, "items": {"type": "string"}}, 1 + 2),
        ("self == oldSelf", {"type": "array", "maxItems": 50, "items": {"type": "string"}}, 5 + 2),
        # Objects compare in constant time in the estimate.
        ("self == oldSelf", {"type": "object", "properties": {"a": {"type": "string"}}}, 2),
        # Strings: a tenth of the byte length (maxLength counts runes, four bytes each at worst).
        ("self == oldSelf", {"type": "string", "maxLength": 253}, 102 + 2),
        # An unbounded string is as long as a 3 MiB request.
        ("self == oldSelf", {"type": "string"}, 314_573 + 2),
        # exists over 8 strings of 63 runes: per item 3 (loop condition) + 3 (step), plus the range and result.
        (
            "self.exists(c, c == 'node')",
            {"type": "array", "maxItems": 8, "items": {"type": "string", "maxLength": 63}},
            50,
        ),
        # matches: (length + 1) / 10 times regex length / 4.
        ("self.matches('^[a-z]+$')", {"type": "string", "maxLength": 63}, 26 * 2 + 1),
        ("has(self.a)", {"type": "object", "properties": {"a": {"type": "string"}}}, 1),
    ],
)  # fmt: skip
def test_estimates_of_simple_rules(rule: str, schema: dict[str, Any], cost: int) -> None:
    assert rule_cost(rule, schema) == cost


def test_the_root_sees_metadata_name_unbounded() -> None:
    root = decl({"type": "object", "properties": {"spec": {"type": "object"}}}, root=True)
    assert root is not None
    assert root.fields["metadata"].fields["name"].max_elements == 3 * 1024 * 1024 - 2


def _upstream_crds() -> list[Any]:
    base = SHARED / "reference" / "upstream"
    files = [*sorted((base / "crds").glob("v2.*/*.yaml")), base / "jobset" / "jobset.x-k8s.io_jobsets.yaml"]
    return [pytest.param(p, id=f"{p.parent.name}/{p.stem}") for p in files]


@pytest.mark.parametrize("path", _upstream_crds())
def test_crds_that_install_upstream_are_within_budget(path: Path) -> None:
    """The estimate is not stricter than the API server: upstream's CRDs install, and pass it too."""
    if not path.exists():
        pytest.skip(f"{path} not found: the steering repo's shared/ must sit beside the repo (or set KUBETRAIN_SHARED)")
    costs = crd_rule_costs(schema_of(yaml.safe_load(path.read_text())))
    assert costs
    assert max(c.total for c in costs) <= PER_RULE_LIMIT
    assert sum(c.total for c in costs) <= PER_CRD_LIMIT
