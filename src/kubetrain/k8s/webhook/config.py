"""The ValidatingWebhookConfiguration and MutatingWebhookConfiguration that point the API server at us.

Generated here so the paths and names cannot drift from the server's routes; ``manifests/base/webhook`` holds the
output (a test keeps it in sync) and the Helm chart templates the same shape.
"""

from __future__ import annotations

import base64
from typing import Any

from kubetrain.api import constants as c
from kubetrain.k8s.webhook import names

_RUNTIME_SELECTOR = {
    "matchExpressions": [{"key": c.LABEL_WEBHOOK_VALIDATION, "operator": "NotIn", "values": ["disabled"]}]
}


def _hook(
    name: str, path: str, resource: str | list[str], service: str, namespace: str, ca: bytes | None
) -> dict[str, Any]:
    client: dict[str, Any] = {"service": {"name": service, "namespace": namespace, "path": path, "port": 443}}
    if ca is not None:
        client["caBundle"] = base64.b64encode(ca).decode()
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client,
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "rules": [
            {
                "apiGroups": [c.GROUP],
                "apiVersions": [c.VERSION],
                "operations": ["CREATE", "UPDATE"],
                "resources": resource if isinstance(resource, list) else [resource],
                "scope": "*",
            }
        ],
    }


def webhook_configurations(
    service: str = names.DEFAULT_SERVICE,
    namespace: str = names.DEFAULT_NAMESPACE,
    ca_bundle: bytes | None = None,
) -> list[dict[str, Any]]:
    """``[ValidatingWebhookConfiguration, MutatingWebhookConfiguration]``; without ``ca_bundle`` the operator
    (or cert-manager) fills ``caBundle`` in later."""
    labels = {"app.kubernetes.io/name": "kubetrain", "app.kubernetes.io/component": "webhook"}
    # The validators record the complete text of shortened warnings as an Event, never on a dry run.
    events = {"sideEffects": "NoneOnDryRun"}
    validators = [
        _hook(names.WEBHOOK_VALIDATOR_CLUSTER_TRAINING_RUNTIME, names.VALIDATE_CLUSTER_TRAINING_RUNTIME,
              "clustertrainingruntimes", service, namespace, ca_bundle)
        | {"objectSelector": _RUNTIME_SELECTOR} | events,
        _hook(names.WEBHOOK_VALIDATOR_TRAINING_RUNTIME, names.VALIDATE_TRAINING_RUNTIME, "trainingruntimes",
              service, namespace, ca_bundle)
        | {"objectSelector": _RUNTIME_SELECTOR} | events,
        # trainjobs/scale: kubectl scale and an HPA change numNodes through it (judged as a TrainJob update).
        _hook(names.WEBHOOK_VALIDATOR_TRAINJOB, names.VALIDATE_TRAINJOB, ["trainjobs", "trainjobs/scale"], service,
              namespace, ca_bundle) | events,
        _hook(names.WEBHOOK_VALIDATOR_OPTIMIZATIONJOB, names.VALIDATE_OPTIMIZATIONJOB, "optimizationjobs", service,
              namespace, ca_bundle) | events,
    ]  # fmt: skip
    mutators = [
        _hook(
            names.WEBHOOK_DEFAULTER_TRAINJOB,
            names.MUTATE_TRAINJOB,
            "trainjobs",
            service,
            namespace,
            ca_bundle,
        )
        | {"reinvocationPolicy": "Never"}
    ]
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": names.VALIDATING_CONFIGURATION, "labels": labels},
            "webhooks": validators,
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": names.MUTATING_CONFIGURATION, "labels": labels},
            "webhooks": mutators,
        },
    ]
