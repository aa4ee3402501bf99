"""Container resources as the API server validates them, with field paths and fixes."""

from __future__ import annotations

from typing import Any

import pytest

from kubetrain.api.podschema import check_pod_spec
from kubetrain.api.resources import check_resources

P = "spec.containers[0].resources"


def findings(resources: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    pod = {"containers": [{"name": "node", "image": "x", "resources": resources}]}
    return {f.path.replace("spec.template.spec.", ""): (f.message, f.fix) for f in check_pod_spec(pod, "spec")}


def test_the_issue_three() -> None:
    got = findings({"requests": {"cpu": "lots", "memory": "10XB", "nvidia.com/gpu": "1.5"},
                    "limits": {"nvidia.com/gpu": "1.5"}})
    assert got[f"{P}.requests[cpu]"][0] == "invalid quantity 'lots': not a quantity"
    assert "500m, 2, 1.5, 4Gi" in (got[f"{P}.requests[cpu]"][1] or "")
    assert got[f"{P}.requests[memory]"][0] == "invalid quantity '10XB': not a quantity"
    assert got[f"{P}.requests[nvidia.com/gpu]"] == (
        "must be an integer, got 1500m ('1.5')", "nvidia.com/gpu is counted in whole devices: use 1 or 2")
    assert got[f"{P}.limits[nvidia.com/gpu]"][0] == "must be an integer, got 1500m ('1.5')"


def test_bytes_written_with_b_get_a_suggestion() -> None:
    message, fix = findings({"requests": {"memory": "10GB"}})[f"{P}.requests[memory]"]
    assert message == "invalid quantity '10GB': not a quantity"
    assert fix is not None and fix.startswith("Kubernetes writes bytes without 'B': did you mean '10G'?")


@pytest.mark.parametrize(("resources", "path", "message"), [
    ({"requests": {"cpu": "-1"}}, "requests[cpu]", "must be greater than or equal to 0, got -1"),
    ({"requests": {"gpu": 1}}, "requests[gpu]", "'gpu' must be a standard resource for containers"),
    ({"requests": {"example.com/x/y": 1}}, "requests[example.com/x/y]",
     "'example.com/x/y' is not a valid resource name (a domain, '/', and a name of letters, digits, '-', '_' or '.')"),
    ({"requests": {"cpu": 2}, "limits": {"cpu": 1}}, "requests[cpu]", "must be less than or equal to cpu limit of 1"),
    ({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}, "requests[nvidia.com/gpu]",
     "must be equal to nvidia.com/gpu limit of 2"),
    ({"requests": {"nvidia.com/gpu": 1}}, "limits",
     "Limit must be set for non overcommitable resources (nvidia.com/gpu)"),
    ({"requests": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}, "limits": {"hugepages-2Mi": "3Mi", "memory": "1Gi"}},
     "requests[hugepages-2Mi]", "3Mi is not positive integer multiple of hugepages-2Mi"),
    ({"requests": {"hugepages-2Mi": "4Mi"}, "limits": {"hugepages-2Mi": "4Mi"}}, "",
     "HugePages require cpu or memory"),
    ({"requests": {"cpu": "1K"}}, "requests[cpu]", "invalid quantity '1K': unable to parse quantity's suffix"),
])
def test_api_server_rules(resources: dict[str, Any], path: str, message: str) -> None:
    key = f"{P}.{path}" if path else P
    assert findings(resources)[key][0] == message


def test_valid_resources_pass() -> None:
    assert findings({"requests": {"cpu": "500m", "memory": "4Gi", "nvidia.com/gpu": 2, "ephemeral-storage": "1e9"},
                     "limits": {"cpu": 2, "memory": "4Gi", "nvidia.com/gpu": 2,
                                "hugepages-2Mi": "4Mi"}}) == {}


def test_a_float_is_reported_once_with_its_path() -> None:
    got = findings({"limits": {"cpu": 0.5}})
    assert got == {f"{P}.limits[cpu]": ("expected a quantity as a string or an integer, got the number 0.5",
                                        'quote it ("0.5") or write it without a fraction (e.g. 1500m for 1.5)')}


def test_other_quantities_of_a_pod() -> None:
    pod = {"containers": [{"name": "node", "image": "x"}], "overhead": {"cpu": "x"},
           "volumes": [{"name": "v", "emptyDir": {"sizeLimit": "1 Gi"}}]}
    paths = {f.path for f in check_pod_spec(pod, "spec")}
    assert {"spec.overhead[cpu]", "spec.volumes[0].emptyDir.sizeLimit"} <= paths


def test_a_patch_is_not_compared_with_limits_it_does_not_carry() -> None:
    assert check_resources({"requests": {"nvidia.com/gpu": 1}}, "p", partial=True) == []
    assert [f.message for f in check_resources({"requests": {"nvidia.com/gpu": "x"}}, "p", partial=True)] == [
        "invalid quantity 'x': not a quantity"]
