"""The resource types kubetrain reads or writes, and how their REST paths are built."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resource:
    """One REST resource: ``group``/``version``/``plural`` plus whether it lives in a namespace."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """``/api/v1/namespaces/ns/configmaps/x``; ``namespace=None`` on a namespaced type: all namespaces."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [root]
        if self.namespaced and namespace is not None:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name is not None:
            parts.append(name)
            if subresource:
                parts.append(subresource)
        return "/".join(parts)


TRAINJOB = Resource("trainer.kubeflow.org", "v1alpha1", "trainjobs", "TrainJob")
TRAINING_RUNTIME = Resource("trainer.kubeflow.org", "v1alpha1", "trainingruntimes", "TrainingRuntime")
CLUSTER_TRAINING_RUNTIME = Resource(
    "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", namespaced=False
)
OPTIMIZATIONJOB = Resource("trainer.kubeflow.org", "v1alpha1", "optimizationjobs", "OptimizationJob")
JOBSET = Resource("jobset.x-k8s.io", "v1alpha2", "jobsets", "JobSet")
COSCHEDULING_PODGROUP = Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup")
VOLCANO_PODGROUP = Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup")
CONFIGMAP = Resource("", "v1", "configmaps", "ConfigMap")
SECRET = Resource("", "v1", "secrets", "Secret")
PERSISTENT_VOLUME_CLAIM = Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim")
POD = Resource("", "v1", "pods", "Pod")
JOB = Resource("batch", "v1", "jobs", "Job")
EVENT = Resource("", "v1", "events", "Event")
NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODE = Resource("", "v1", "nodes", "Node", namespaced=False)
LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease")
HPA = Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler")
TOKEN_REVIEW = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", namespaced=False)
CRD = Resource("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False)
KUEUE_WORKLOAD = Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload")

KNOWN: tuple[Resource, ...] = (
    TRAINJOB,
    TRAINING_RUNTIME,
    CLUSTER_TRAINING_RUNTIME,
    OPTIMIZATIONJOB,
    JOBSET,
    COSCHEDULING_PODGROUP,
    VOLCANO_PODGROUP,
    CONFIGMAP,
    SECRET,
    PERSISTENT_VOLUME_CLAIM,
    POD,
    JOB,
    EVENT,
    NAMESPACE,
    NODE,
    LEASE,
    HPA,
    CRD,
    KUEUE_WORKLOAD,
)
_BY_KIND = {(r.api_version, r.kind): r for r in KNOWN}


def for_object(obj: dict[str, Any]) -> Resource:
    """The resource of a manifest, from its ``apiVersion`` and ``kind``."""
    key = (obj.get("apiVersion", ""), obj.get("kind", ""))
    try:
        return _BY_KIND[key]
    except KeyError:
        raise ValueError(f"kubetrain does not know the resource for {key[0]} {key[1]}") from None


def ref(obj: dict[str, Any]) -> str:
    """``Kind ns/name`` for logs and error messages."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind', '?')} {ns + '/' if ns else ''}{meta.get('name', '?')}"
