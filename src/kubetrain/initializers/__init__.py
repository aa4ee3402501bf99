"""The dataset and model initializers: kubetrain's stand-in for upstream's ``dataset-initializer`` and
``model-initializer`` images, run as ``python -m kubetrain.initializers dataset|model``.

The contract is upstream's: the source comes from ``STORAGE_URI``, options from upper-cased variables
(``ACCESS_TOKEN``, ``IGNORE_PATTERNS``; ``spec.initializer.<step>.env`` and the Secret of ``secretRef`` arrive as
such variables), and the files land where upstream's images put them, on the shared ``initializer`` volume mounted
at ``/workspace``: a dataset in ``/workspace/dataset``, a model in ``/workspace/model``.

This package stands alone: it is the program inside a pod, so it imports nothing else of kubetrain (an
import-linter contract keeps it so) and only the standard library until a scheme needs its client library.
"""

from __future__ import annotations

from typing import Final

WORKSPACE: Final = "/workspace"
DATASET_DIR: Final = f"{WORKSPACE}/dataset"
MODEL_DIR: Final = f"{WORKSPACE}/model"

# Exit statuses. A failure that the same input can never get past (a malformed or unsupported STORAGE_URI, a
# source that does not exist, credentials the source refuses) exits with EXIT_PERMANENT, so that a runner may stop
# instead of retrying through a Job's backoffLimit; anything else (network, server errors) exits with EXIT_FAILED.
EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
EXIT_PERMANENT: Final = 3

# What a container of upstream's initializer images runs when its command is unset (their entrypoint).
ENTRYPOINTS: Final = {
    "dataset": ("python", "-m", "kubetrain.initializers", "dataset"),
    "model": ("python", "-m", "kubetrain.initializers", "model"),
}
