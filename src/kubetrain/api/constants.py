"""Wire constants shared with upstream Kubeflow Trainer (group, labels, env names, object names)."""

from typing import Final

GROUP: Final = "trainer.kubeflow.org"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

KIND_TRAINJOB: Final = "TrainJob"
KIND_TRAINING_RUNTIME: Final = "TrainingRuntime"
KIND_CLUSTER_TRAINING_RUNTIME: Final = "ClusterTrainingRuntime"
KIND_OPTIMIZATIONJOB: Final = "OptimizationJob"

JOBSET_API_VERSION: Final = "jobset.x-k8s.io/v1alpha2"
COSCHEDULING_API_VERSION: Final = "scheduling.x-k8s.io/v1alpha1"
VOLCANO_API_VERSION: Final = "scheduling.volcano.sh/v1beta1"

# Labels and annotations.
LABEL_ANCESTOR: Final = "trainer.kubeflow.org/trainjob-ancestor-step"
LABEL_FRAMEWORK: Final = "trainer.kubeflow.org/framework"
LABEL_SUPPORT: Final = "trainer.kubeflow.org/support"
SUPPORT_DEPRECATED: Final = "deprecated"
LABEL_WEBHOOK_VALIDATION: Final = "trainer.kubeflow.org/webhook-validation"
LABEL_COSCHEDULING_POD_GROUP: Final = "scheduling.x-k8s.io/pod-group"
ANNOTATION_VOLCANO_GROUP: Final = "scheduling.k8s.io/group-name"
ANNOTATION_VOLCANO_QUEUE: Final = "scheduling.volcano.sh/queue-name"
ANNOTATION_COMPLETION_INDEX: Final = "batch.kubernetes.io/job-completion-index"
LABEL_JOBSET_NAME: Final = "jobset.sigs.k8s.io/jobset-name"
LABEL_REPLICATED_JOB_NAME: Final = "jobset.sigs.k8s.io/replicatedjob-name"
# Kueue's labels a user puts on the TrainJob; they go on to the JobSet (Kueue's JobSet integration reads them there).
LABEL_KUEUE_QUEUE_NAME: Final = "kueue.x-k8s.io/queue-name"
LABEL_KUEUE_PRIORITY_CLASS: Final = "kueue.x-k8s.io/priority-class"
KUEUE_JOB_LABELS: Final = (LABEL_KUEUE_QUEUE_NAME, LABEL_KUEUE_PRIORITY_CLASS)

# Ancestor steps.
ANCESTOR_TRAINER: Final = "trainer"
ANCESTOR_DATASET_INITIALIZER: Final = "dataset-initializer"
ANCESTOR_MODEL_INITIALIZER: Final = "model-initializer"
ANCESTORS: Final = (ANCESTOR_DATASET_INITIALIZER, ANCESTOR_MODEL_INITIALIZER, ANCESTOR_TRAINER)

# Names.
NODE: Final = "node"
MAX_JOB_PODS: Final = 100_000
"""Pods of one replicated job: Kubernetes runs an Indexed Job (what JobSet makes) of at most 10^5 pods."""
LAUNCHER: Final = "launcher"
DEFAULT_PORT: Final = 29500
INITIALIZER_VOLUME: Final = "initializer"
MANAGED_BY_DEFAULT: Final = "trainer.kubeflow.org/trainjob-controller"
MANAGED_BY_MULTIKUEUE: Final = "kueue.x-k8s.io/multikueue"
MANAGED_BY_ALLOWED: Final = (MANAGED_BY_DEFAULT, MANAGED_BY_MULTIKUEUE)
FIELD_MANAGER: Final = "kubetrain"

# Torch env.
PET_NNODES: Final = "PET_NNODES"
PET_NPROC_PER_NODE: Final = "PET_NPROC_PER_NODE"
PET_NODE_RANK: Final = "PET_NODE_RANK"
PET_MASTER_ADDR: Final = "PET_MASTER_ADDR"
PET_MASTER_PORT: Final = "PET_MASTER_PORT"
PET_MAX_RESTARTS: Final = "PET_MAX_RESTARTS"
PET_RDZV_BACKEND: Final = "PET_RDZV_BACKEND"
PET_RDZV_ENDPOINT: Final = "PET_RDZV_ENDPOINT"
PET_RDZV_ID: Final = "PET_RDZV_ID"
PET_RDZV_CONF: Final = "PET_RDZV_CONF"
# torch's elastic agent hands its workers the rendezvous store only in the first round it is rank 0 in; an agent
# that (re)joins a later round then waits read_timeout (60 s) for a MASTER_ADDR nobody publishes. With the
# sharing off, rank 0 publishes the workers' store address in every round.
TORCH_DISABLE_SHARE_RDZV_TCP_STORE: Final = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"
# How long a rendezvous that has minNodes waits for more nodes before it starts (torch's default: 30 s, paid on
# every membership change when fewer than maxNodes take part).
ELASTIC_LAST_CALL_SECONDS: Final = 5
TORCH_RESERVED_ENV: Final = (PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT)
TORCH_ELASTIC_RESERVED_ENV: Final = (PET_MAX_RESTARTS, PET_RDZV_BACKEND, PET_RDZV_ENDPOINT, PET_RDZV_ID)

# MPI.
MPI_SSH_AUTH_VOLUME: Final = "mpi-ssh-auth"
MPI_HOSTFILE_VOLUME: Final = "mpi-hostfile"
MPI_HOSTFILE_DIR: Final = "/etc/mpi"
MPI_HOSTFILE_PATH: Final = "/etc/mpi/hostfile"
OPENMPI_ENV: Final = (
    "OMPI_MCA_orte_default_hostfile",
    "OMPI_MCA_orte_keep_fqdn_hostnames",
    "OMPI_MCA_orte_set_default_slots",
    "OMPI_MCA_plm_rsh_args",
)
INTEL_MPI_ENV: Final = ("I_MPI_HYDRA_HOST_FILE", "I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS")
MPICH_ENV: Final = ("HYDRA_HOST_FILE", "HYDRA_LAUNCH_EXTRA_ARGS")
# The cluster DNS domain that pod search domains name (mpi-operator's and Flux's default; kubelet --cluster-domain).
CLUSTER_DOMAIN: Final = "cluster.local"

# XGBoost.
XGBOOST_RESERVED_ENV: Final = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")

# TensorFlow (kubetrain's own policy): TF_CONFIG is JSON naming this pod's index, which the kubelet substitutes
# from TF_TASK_INDEX (the Job completion index) when it expands $(TF_TASK_INDEX) in TF_CONFIG's value.
TF_CONFIG: Final = "TF_CONFIG"
TF_TASK_INDEX: Final = "TF_TASK_INDEX"
TENSORFLOW_RESERVED_ENV: Final = (TF_CONFIG, TF_TASK_INDEX)

# Flux (Kubeflow Trainer v2.2+): an init container copies a Flux install (a "view") into a shared volume, and the
# node container's command is wrapped by an entrypoint that starts a Flux broker on every pod.
FLUX_INSTALLER_CONTAINER: Final = "flux-installer"
FLUX_INSTALLER_IMAGE: Final = "ghcr.io/converged-computing/flux-view-ubuntu:tag-jammy"
FLUX_NETWORK_DEVICE: Final = "eth0"
FLUX_QUEUE_POLICY: Final = "fcfs"
FLUX_INSTALL_VOLUME: Final = "flux-install"
FLUX_INSTALL_PATH: Final = "/mnt/flux"
FLUX_CONFIG_PATH: Final = "/etc/flux-config"
FLUX_CURVE_VOLUME: Final = "flux-curve"
FLUX_CURVE_PATH: Final = "/curve"
FLUX_MEMORY_VOLUME: Final = "shared-memory"
FLUX_MEMORY_PATH: Final = "/dev/shm"
FLUX_SPACK_VOLUME: Final = "spack-install"
FLUX_SPACK_PATH: Final = "/opt/software"
FLUX_ENTRYPOINT: Final = ("/bin/bash", f"{FLUX_CONFIG_PATH}/entrypoint.sh")
FLUX_INIT: Final = ("/bin/bash", f"{FLUX_CONFIG_PATH}/init.sh")
# The broker settings a TrainJob (or its runtime) may change through the node container's env, with defaults.
FLUX_SETTINGS: Final = {
    "FLUX_VIEW_IMAGE": FLUX_INSTALLER_IMAGE,
    "FLUX_NETWORK_DEVICE": FLUX_NETWORK_DEVICE,
    "FLUX_QUEUE_POLICY": FLUX_QUEUE_POLICY,
}

# Status.
COND_SUSPENDED: Final = "Suspended"
COND_COMPLETE: Final = "Complete"
COND_FAILED: Final = "Failed"
REASON_SUSPENDED: Final = "Suspended"
REASON_RESUMED: Final = "Resumed"
REASON_DEADLINE: Final = "DeadlineExceeded"
REASON_RUNTIME_NOT_SUPPORTED: Final = "TrainingRuntimeNotSupported"
REASON_ALL_JOBS_COMPLETED: Final = "AllJobsCompleted"
REASON_FAILED_JOBS: Final = "FailedJobs"
REASON_MAX_RESTARTS: Final = "ReachedMaxRestarts"
MSG_SUSPENDED: Final = "TrainJob is suspended"
MSG_RESUMED: Final = "TrainJob is resumed"
MSG_DEADLINE: Final = "TrainJob exceeded its active deadline"
MSG_ALL_JOBS_COMPLETED: Final = "jobset completed successfully"
MSG_FAILED_JOBS: Final = "jobset failed due to one or more job failures"
MSG_MAX_RESTARTS: Final = "jobset failed due to reaching max number of restarts"

DEPRECATION_POLICY_URL: Final = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)
