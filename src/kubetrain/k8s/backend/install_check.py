"""What ``kubetrain cluster install-check`` verifies: APIs served, runtimes installed, SDK ConfigMap, leader."""

from __future__ import annotations

from kubetrain.k8s.client import ApiError, Client, ConfigError
from kubetrain.k8s.client import resources as r
from kubetrain.k8s.client.config import load

SDK_CONFIGMAP = "kubeflow-trainer-public"
SDK_VERSION_KEY = "kubeflow_trainer_version"


async def run_checks(
    kubeconfig: str | None, context: str | None, system_namespace: str, lease_namespace: str
) -> list[tuple[bool, str]]:
    try:
        config = load(kubeconfig, context)
    except ConfigError as exc:
        return [(False, f"kubeconfig: {exc}")]
    out: list[tuple[bool, str]] = []
    async with Client(config) as client:
        for res in (r.TRAINJOB, r.TRAINING_RUNTIME, r.CLUSTER_TRAINING_RUNTIME, r.JOBSET):
            try:
                items, _ = await client.list(res, None)
                out.append((True, f"{res.plural}.{res.group} served ({len(items)} objects)"))
            except ApiError as exc:
                out.append((False, f"{res.plural}.{res.group}: {exc.status} {exc.message} (is the CRD installed?)"))
        try:
            cm = await client.get(r.CONFIGMAP, SDK_CONFIGMAP, system_namespace)
            version = (cm.get("data") or {}).get(SDK_VERSION_KEY)
            out.append((bool(version), f"ConfigMap {system_namespace}/{SDK_CONFIGMAP} {SDK_VERSION_KEY}={version}"))
        except ApiError as exc:
            out.append(
                (
                    False,
                    f"ConfigMap {system_namespace}/{SDK_CONFIGMAP}: {exc.status} {exc.reason} (the Kubeflow SDK "
                    "only warns without it; set KUBEFLOW_SYSTEM_NAMESPACE if installed elsewhere)",
                )
            )
        try:
            lease = await client.get(r.LEASE, "kubetrain-operator", lease_namespace)
            holder = (lease.get("spec") or {}).get("holderIdentity")
            out.append((bool(holder), f"operator leader: {holder or 'none'}"))
        except ApiError as exc:
            out.append((False, f"operator Lease {lease_namespace}/kubetrain-operator: {exc.status} {exc.reason}"))
    return out
