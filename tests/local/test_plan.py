"""The compiled JobSet unrolled into pods (kubetrain.local.plan). Pure: no processes, no namespaces."""

from __future__ import annotations

import pytest

from kubetrain.local.backend import step_prefix
from kubetrain.local.plan import PlanError, address, build_plan

from .fixtures import jobset, rj


class TestPlan:
    def test_pods_hostnames_and_addresses_follow_the_jobset_convention(self) -> None:
        plan = build_plan(jobset([rj("dataset-initializer"), rj("node", completions=2, replicas=2)]))
        names = [p.name for p in plan.pods()]
        assert names == [
            "tj-dataset-initializer-0-0",
            "tj-node-0-0",
            "tj-node-0-1",
            "tj-node-1-0",
            "tj-node-1-1",
        ]
        assert [p.fqdn for p in plan.pods()][1] == "tj-node-0-0.tj"
        assert len({p.address for p in plan.pods()}) == 5
        assert plan.pods()[2].annotations["batch.kubernetes.io/job-completion-index"] == "1"
        assert plan.pods()[3].labels["jobset.sigs.k8s.io/job-index"] == "1"
        hosts = plan.hosts_file()
        assert f"{address(1)}\ttj-node-0-0.tj " in hosts

    def test_subdomain_from_network(self) -> None:
        plan = build_plan(jobset([rj("node")], network={"subdomain": "svc"}))
        assert plan.pods()[0].fqdn == "tj-node-0-0.svc"

    def test_defaults_match_jobset_and_job(self) -> None:
        job = build_plan(jobset([rj("node")])).jobs()[0]
        assert (job.restart_policy, job.backoff_limit) == ("OnFailure", 6)

    def test_unknown_dependency_is_an_error(self) -> None:
        r = rj("launcher")
        r["dependsOn"] = [{"name": "nodes", "status": "Ready"}]
        with pytest.raises(PlanError, match="dependsOn 'nodes'"):
            build_plan(jobset([rj("node"), r]))

    def test_non_indexed_completion_is_rejected_with_the_field(self) -> None:
        r = rj("node")
        r["template"]["spec"]["completionMode"] = "NonIndexed"  # type: ignore[index]
        with pytest.raises(PlanError, match=r"replicatedJobs\[0\]\.template\.spec\.completionMode"):
            build_plan(jobset([r]))

    def test_step_prefix(self) -> None:
        assert step_prefix("node-0-1") == "node-0/1"
        assert step_prefix("dataset-initializer-0-0") == "dataset-initializer-0/0"


