"""Pod requests and machine capacity (kubetrain.local.scheduling.resources). Pure: no processes, no namespaces."""

from __future__ import annotations

import pytest

from kubetrain.local.scheduling import resources


class TestResources:
    @pytest.mark.parametrize(
        ("q", "v"), [("2", 2.0), ("500m", 0.5), ("4Gi", 4 * 2**30), ("1e3", 1000.0), (3, 3.0)]
    )
    def test_quantities(self, q: str | int, v: float) -> None:
        assert resources.parse_quantity(q) == v

    def test_bad_quantity_is_explained(self) -> None:
        with pytest.raises(resources.QuantityError, match="not a Kubernetes quantity"):
            resources.parse_quantity("lots")

    def test_missing_resources_name_what_is_short(self) -> None:
        cap = resources.Capacity({"cpu": 2, "memory": 8 * 2**30, "nvidia.com/gpu": 0})
        assert resources.never_fits({"cpu": 1, "memory": 2**30}, cap) == []
        missing = resources.never_fits({"cpu": 64, "nvidia.com/gpu": 1}, cap)
        assert missing == [
            "cpu: requested 64, this machine has 2",
            "nvidia.com/gpu: requested 1, this machine has 0",
        ]

    def test_overcommit_shares_gpus_only_where_there_is_one(self) -> None:
        want = {"nvidia.com/gpu": 4, "example.com/fpga": 1}
        one = resources.Capacity({"nvidia.com/gpu": 1, "example.com/fpga": 0})
        assert resources.never_fits(want, one, overcommit=True) == [
            "example.com/fpga: requested 1, this machine has 0"
        ], "extended resources other than GPUs are never shared"
        none = resources.Capacity({"nvidia.com/gpu": 0})
        assert resources.never_fits({"nvidia.com/gpu": 1}, none, overcommit=True) == [
            "nvidia.com/gpu: requested 1, this machine has 0"
        ]

    def test_pod_requests_count_init_containers_like_the_scheduler(self) -> None:
        spec = {
            "containers": [
                {"resources": {"requests": {"cpu": "1"}}},
                {"resources": {"limits": {"cpu": "1"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
        }
        assert resources.pod_requests(spec) == {"cpu": 3.0}


