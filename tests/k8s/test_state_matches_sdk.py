"""kubetrain's TrainJob state agrees with the official Kubeflow SDK (0.5.0, unchanged) on the same objects.

The SDK says Created, Running, Complete or Failed; kubetrain splits the SDK's Created into Created (no pods),
Pending (pods, not all trainer pods running) and Suspended, each with a reason. Everything else must be equal.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("kubeflow.trainer", reason="the kubeflow SDK is not installed")

from kubetrain.k8s.backend.cluster import ClusterBackend
from tests.k8s.helpers import torch_runtime, trainjob
from tests.k8s.kubelet import Kubelet, pod_manifest, running, terminated, unschedulable
from tests.k8s.threaded import background_api

AS_THE_SDK_SAYS = {
    "Created": "Created",
    "Pending": "Created",
    "Suspended": "Created",
    "Running": "Running",
    "Complete": "Complete",
    "Failed": "Failed",
}


def test_every_state_maps_onto_the_sdks(tmp_path: Path) -> None:
    from kubeflow.trainer import KubernetesBackendConfig, TrainerClient

    with background_api(tmp_path, operator=True) as (bg, kubeconfig):
        kubelet = Kubelet(bg)
        backend = ClusterBackend(kubeconfig, None)
        backend.apply([torch_runtime(), trainjob("job", trainer={"numNodes": 2})], namespace="default")
        deadline = time.monotonic() + 20
        while not kubelet.has_jobset("job") and time.monotonic() < deadline:
            time.sleep(0.05)
        sdk = TrainerClient(KubernetesBackendConfig(config_file=kubeconfig, namespace="default"))
        # Pods as the JobSet makes them for 2 nodes: one Job (job index 0), completion indexes 0 and 1.
        pods = [f"job-node-0-{i}-abcde" for i in range(2)]

        def both() -> tuple[str, str]:
            ours = backend.states([backend.get_trainjob("job", "default")])[0].state
            return ours, sdk.get_job("job").status

        seen = [both()]
        kubelet.create_pod(pod_manifest("job", "node", 0, 0), running())
        seen.append(both())
        kubelet.create_pod(pod_manifest("job", "node", 0, 1), unschedulable("0/1 nodes are available"))
        seen.append(both())
        kubelet.set_status(pods[1], running())
        seen.append(both())
        kubelet.set_status(pods[0], terminated(0))
        seen.append(both())
        kubelet.complete_jobset("job")
        deadline = time.monotonic() + 20
        while both()[0] != "Complete" and time.monotonic() < deadline:
            time.sleep(0.05)
        seen.append(both())
        assert seen == [
            ("Created", "Created"),
            ("Pending", "Created"),
            ("Pending", "Created"),
            ("Running", "Running"),
            ("Running", "Running"),
            ("Complete", "Complete"),
        ]
        assert all(AS_THE_SDK_SAYS[ours] == theirs for ours, theirs in seen)
        backend.close()
