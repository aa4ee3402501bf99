"""Names the webhook server, its configurations and the install manifests share.

Paths and webhook names are upstream Kubeflow Trainer's, so an API server configured for one works with the
other. Service, Secret and namespace are kubetrain's own defaults (the namespace matches what the Kubeflow SDK
looks in for the ``kubeflow-trainer-public`` ConfigMap).
"""

from __future__ import annotations

from typing import Final

MUTATE_TRAINJOB: Final = "/mutate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE_TRAINJOB: Final = "/validate-trainer-kubeflow-org-v1alpha1-trainjob"
VALIDATE_TRAINING_RUNTIME: Final = "/validate-trainer-kubeflow-org-v1alpha1-trainingruntime"
VALIDATE_CLUSTER_TRAINING_RUNTIME: Final = "/validate-trainer-kubeflow-org-v1alpha1-clustertrainingruntime"
# Upstream has no webhook for OptimizationJobs (its CRD's CEL rules only); the path follows its naming.
VALIDATE_OPTIMIZATIONJOB: Final = "/validate-trainer-kubeflow-org-v1alpha1-optimizationjob"

VALIDATING_CONFIGURATION: Final = "validator.trainer.kubeflow.org"
MUTATING_CONFIGURATION: Final = "defaulter.trainer.kubeflow.org"
WEBHOOK_DEFAULTER_TRAINJOB: Final = "defaulter.trainjob.trainer.kubeflow.org"
WEBHOOK_VALIDATOR_TRAINJOB: Final = "validator.trainjob.trainer.kubeflow.org"
WEBHOOK_VALIDATOR_TRAINING_RUNTIME: Final = "validator.trainingruntime.trainer.kubeflow.org"
WEBHOOK_VALIDATOR_CLUSTER_TRAINING_RUNTIME: Final = "validator.clustertrainingruntime.trainer.kubeflow.org"
WEBHOOK_VALIDATOR_OPTIMIZATIONJOB: Final = "validator.optimizationjob.trainer.kubeflow.org"

DEFAULT_NAMESPACE: Final = "kubeflow-system"
DEFAULT_SERVICE: Final = "kubetrain-operator"
DEFAULT_SECRET: Final = "kubetrain-webhook-cert"
DEFAULT_PORT: Final = 9443
DEFAULT_CERT_DIR: Final = "/tmp/k8s-webhook-server/serving-certs"
