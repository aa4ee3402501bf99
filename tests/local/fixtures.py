"""Small JobSet and object fixtures for the local backend's pure unit tests."""

from __future__ import annotations

import base64

SECRET = {
    "kind": "Secret",
    "metadata": {"name": "creds"},
    "data": {"token": base64.b64encode(b"s3cr3t").decode()},
    "stringData": {"user": "ann"},
}
CONFIGMAP = {
    "kind": "ConfigMap",
    "metadata": {"name": "cfg"},
    "data": {"LR": "0.1", "hostfile": "a slots=2\n"},
}


def jobset(rjobs: list[dict[str, object]], **spec: object) -> dict[str, object]:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "tj", "namespace": "default"},
        "spec": {"replicatedJobs": rjobs, **spec},
    }


def rj(name: str, completions: int = 1, replicas: int = 1) -> dict[str, object]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "parallelism": completions,
                "completions": completions,
                "template": {"spec": {"containers": [{"name": "node", "command": ["true"]}]}},
            }
        },
    }
