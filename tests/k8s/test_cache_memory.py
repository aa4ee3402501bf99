"""What the operator keeps of each cached object: enough to reconcile, little enough for 10,000 TrainJobs."""

from __future__ import annotations

import json
from typing import Any

from kubetrain.k8s.client import resources as r
from kubetrain.k8s.operator.informer import compact
from kubetrain.k8s.operator.manager import owned_configmap, owned_jobset
from tests.k8s.helpers import fake_env, run

OWNER = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "name": "j", "uid": "u", "controller": True}


def jobset(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "js-uid",
            "resourceVersion": "7",
            "ownerReferences": [OWNER],
            "labels": {"a": "b"},
            "managedFields": [{"manager": "kubetrain"}],
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                        "spec": {
                            "parallelism": 2,
                            "completions": 2,
                            "template": {"spec": {"containers": [{"name": "node", "image": "x"}]}},
                        },
                    },
                }
            ],
            **spec,
        },
        "status": {"conditions": [{"type": "Completed", "status": "True"}], "replicatedJobsStatus": []},
    }


def test_a_jobset_keeps_identity_owner_suspend_node_counts_and_status() -> None:
    kept = owned_jobset(jobset(suspend=True))
    assert kept == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "uid": "js-uid",
            "resourceVersion": "7",
            "ownerReferences": [OWNER],
        },
        "spec": {
            "suspend": True,
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 1,
                    "template": {
                        "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                        "spec": {"parallelism": 2, "completions": 2},  # no pod template
                    },
                }
            ],
        },
        "status": {"conditions": [{"type": "Completed", "status": "True"}], "replicatedJobsStatus": []},
    }
    assert "suspend" not in owned_jobset(jobset())["spec"]  # type: ignore[index]
    unowned = jobset()
    unowned["metadata"]["ownerReferences"] = []
    assert owned_jobset(unowned) is None


def test_snapshots_of_one_runtime_share_their_text() -> None:
    text = "kind: ClusterTrainingRuntime\n" + "x" * 4000
    cms = [
        json.loads(
            json.dumps(
                {"metadata": {"name": f"j{i}-runtime-snapshot", "ownerReferences": [OWNER]}, "data": {"runtime": text}}
            )
        )
        for i in range(2)
    ]
    a, b = (owned_configmap(cm) for cm in cms)
    assert a is not None and b is not None
    assert a["data"]["runtime"] is b["data"]["runtime"]


def test_compact_shares_equal_short_strings_and_keeps_values() -> None:
    doc = {"kind": "TrainJob", "status": {"conditions": [{"type": "Complete", "reason": "AllJobsCompleted"}]}}
    x, y = (compact(json.loads(json.dumps(doc))) for _ in range(2))
    assert x == y == doc
    assert x["status"]["conditions"][0]["reason"] is y["status"]["conditions"][0]["reason"]
    assert next(iter(x)) is next(iter(y))


def test_a_list_is_transformed_page_by_page() -> None:
    async def body() -> None:
        async with fake_env() as env:
            for i in range(1_100):
                await env.client.create(
                    {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}", "namespace": "ns"}}
                )
            seen: list[str] = []

            def keep_even(obj: dict[str, Any]) -> dict[str, Any] | None:
                seen.append(obj["metadata"]["name"])
                return {"name": obj["metadata"]["name"]} if int(obj["metadata"]["name"][3:]) % 2 == 0 else None

            items, rv = await env.client.list(r.CONFIGMAP, "ns", transform=keep_even)
            assert len(seen) == 1_100 and len(items) == 550 and rv
            assert items[0] == {"name": "cm-0"}
            pages = [p for m, p in env.api.requests if m == "GET" and "/configmaps" in p]
            assert len(pages) == 3  # 500 + 500 + 100: the transform ran while paging

    run(body)
