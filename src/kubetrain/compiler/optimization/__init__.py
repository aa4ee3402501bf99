"""OptimizationJob trials, pure: which values each trial gets (``suggest``), the trial TrainJobs made from the
template (``template``, ``trials``), the rules that need them (``checks``) and what a controller does next
(``progress``). No clock, I/O or randomness: random search is a hash of the seed (see ``suggest``).
"""

from kubetrain.compiler.optimization.checks import check_optimizationjob, trial_path
from kubetrain.compiler.optimization.progress import Plan, Trial, plan, ranked, state_of, trial_of
from kubetrain.compiler.optimization.suggest import seed_of, suggestion, suggestions, trial_count
from kubetrain.compiler.optimization.template import env_name
from kubetrain.compiler.optimization.trials import (
    ANNOTATION_PARAMETERS,
    LABEL_OPTIMIZATIONJOB,
    LABEL_TRIAL_INDEX,
    build_trial,
    build_trials,
    owned_by,
    trial_name,
    trial_parameters,
)

__all__ = [
    "ANNOTATION_PARAMETERS",
    "LABEL_OPTIMIZATIONJOB",
    "LABEL_TRIAL_INDEX",
    "Plan",
    "Trial",
    "build_trial",
    "build_trials",
    "check_optimizationjob",
    "env_name",
    "owned_by",
    "plan",
    "ranked",
    "seed_of",
    "state_of",
    "suggestion",
    "suggestions",
    "trial_count",
    "trial_name",
    "trial_of",
    "trial_parameters",
    "trial_path",
]
