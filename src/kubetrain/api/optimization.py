"""OptimizationJob: a hyperparameter search over TrainJobs (upstream ``trainer.kubeflow.org/v1alpha1``, KEP-3562).

The wire shape is upstream's (``pkg/apis/trainer/v1alpha1/optimizationjob_types.go`` on its main branch): the same
field names, defaults and bounds; the CEL rules are in ``crd_tables`` and, for every entry point, in
``optimization_checks``. Each trial is a TrainJob made from ``spec.trainJobTemplate``
(``kubetrain.compiler.optimization``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import Field

from kubetrain.api._base import Model, OpenModel, defaulted, top_level
from kubetrain.api.constants import API_VERSION, KIND_OPTIMIZATIONJOB
from kubetrain.api.meta import Condition, JobLike, ObjectMeta, TemplateMeta
from kubetrain.api.trainjob import TrainJobSpec

MAXIMIZE: Final = "Maximize"
MINIMIZE: Final = "Minimize"
INT: Final = "Int"
FLOAT: Final = "Float"
MAX_TRIALS: Final = 100
MAX_PARAMETERS: Final = 100
MAX_CHOICES: Final = 100
MAX_TEXT: Final = 64
NUMBER_PATTERN: Final = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
"""A bound (``min``/``max``) is a decimal number written as a string, so it is never rounded on the wire."""

Direction = Literal["Maximize", "Minimize"]
ParameterType = Literal["Int", "Float"]


def _number(description: str) -> Any:
    return Field(min_length=1, max_length=MAX_TEXT, pattern=NUMBER_PATTERN, description=description)


class Objective(Model):
    metric: str = Field(
        min_length=1, max_length=MAX_TEXT,
        description='The metric to optimize, by the name trials report it under status.trainerStatus.metrics '
        '(e.g. "loss").',
    )
    direction: Direction | None = defaulted(MINIMIZE, "Maximize or Minimize (the default) the metric.")


class RandomAlgorithm(Model):
    # No minimum/maximum in the schema (upstream has none, and the API server refuses int64 bounds written out):
    # the range is checked by ``optimization_checks``.
    seed: int | None = Field(
        None, json_schema_extra={"format": "int64"},
        description="Seed of the random search: the same seed gives the same trials every time. Without one, "
        "kubetrain derives it from the OptimizationJob's uid (stable for that object).",
    )


class GridAlgorithm(Model):
    """Every combination of the parameters' choices, in order, up to numTrials."""


class SearchAlgorithm(Model):
    random: RandomAlgorithm | None = Field(None, description="Sample each parameter at random (the default).")
    grid: GridAlgorithm | None = Field(
        None, description="Walk every combination of categorical choices, up to numTrials."
    )

    @property
    def name(self) -> str:
        return "grid" if self.grid is not None else "random"


class UniformSpace(Model):
    """Values spread evenly over [min, max]."""

    min: str = _number("Lower bound, a decimal number as a string.")
    max: str = _number("Upper bound, a decimal number as a string; greater than min.")
    type: ParameterType | None = defaulted(FLOAT, "Float (the default) or Int.")


class LogUniformSpace(Model):
    """Values whose logarithm is spread evenly over [log min, log max] (learning rates, weight decay)."""

    min: str = _number("Lower bound, a decimal number as a string; greater than 0.")
    max: str = _number("Upper bound, a decimal number as a string; greater than min.")
    type: ParameterType | None = defaulted(FLOAT, "Float (the default) or Int.")


class CategoricalSpace(Model):
    choices: list[str] = Field(
        min_length=1, max_length=MAX_CHOICES, description="The values to choose from, each a string."
    )


class SearchSpace(Model):
    """Exactly one of uniform, logUniform or categorical."""

    uniform: UniformSpace | None = None
    log_uniform: LogUniformSpace | None = None
    categorical: CategoricalSpace | None = None

    @property
    def kind(self) -> str:
        """``uniform``, ``logUniform`` or ``categorical``: the first that is set (validation wants one)."""
        for name in ("uniform", "log_uniform", "categorical"):
            if getattr(self, name) is not None:
                return "logUniform" if name == "log_uniform" else name
        return ""


class Parameter(Model):
    name: str = Field(
        min_length=1, max_length=MAX_TEXT,
        description="The hyperparameter's name: {{.name}} in the template is replaced by its value, and every "
        "trial's trainer gets it as KUBEFLOW_TRAINER_OPT_<NAME>.",
    )
    search_space: SearchSpace = Field(description="Where the values come from.")


class ParameterAssignment(Model):
    name: str = Field(min_length=1, max_length=MAX_TEXT, description="The hyperparameter.")
    value: str = Field(min_length=1, max_length=MAX_TEXT, description="Its value, as a string.")


class TrainJobTemplateSpec(Model):
    metadata: TemplateMeta | None = Field(
        None, description="Labels and annotations of every trial TrainJob (name and namespace come from the "
        "OptimizationJob)."
    )
    spec: TrainJobSpec = Field(description="The spec of every trial TrainJob, with {{.name}} placeholders.")


class OptimizationJobSpec(Model):
    objectives: list[Objective] = Field(
        min_length=1, max_length=1, description="The metric to optimize (exactly one for now)."
    )
    search_algorithm: SearchAlgorithm | None = defaulted(
        {"random": {}}, "How trials' values are chosen: random (the default) or grid."
    )
    parameters: list[Parameter] = Field(
        min_length=1, max_length=MAX_PARAMETERS, description="The hyperparameters to search over."
    )
    num_trials: int | None = defaulted(
        1, "How many trials (TrainJobs) to run in all, 1 to 100.", ge=1, le=MAX_TRIALS
    )
    parallel_trials: int | None = defaulted(
        1, "How many trials may run at once, 1 to 100 and at most numTrials.", ge=1, le=MAX_TRIALS
    )
    train_job_template: TrainJobTemplateSpec = Field(description="What every trial runs.")

    @property
    def objective(self) -> Objective:
        return self.objectives[0]

    @property
    def trials(self) -> int:
        return self.num_trials or 1

    @property
    def parallel(self) -> int:
        return self.parallel_trials or 1

    @property
    def algorithm(self) -> str:
        return self.search_algorithm.name if self.search_algorithm is not None else "random"


class OptimizationResult(Model):
    train_job_name: str = Field(
        min_length=1, max_length=63, description="The trial TrainJob with the best objective so far."
    )
    parameters: list[ParameterAssignment] | None = Field(
        None, max_length=MAX_PARAMETERS, description="That trial's hyperparameter values."
    )


class OptimizationJobStatus(OpenModel):
    conditions: list[Condition] | None = Field(
        None, max_length=100, description="Created, Running, Complete and Failed, each with a reason."
    )
    result: OptimizationResult | None = Field(
        None, description="The best trial so far and its parameters, updated as trials finish."
    )


class OptimizationJob(JobLike, Model):
    api_version: str = API_VERSION
    kind: Literal["OptimizationJob"] = KIND_OPTIMIZATIONJOB
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: OptimizationJobSpec
    status: OptimizationJobStatus | None = None

    def to_wire(self) -> dict[str, Any]:
        return top_level(super().to_wire())


@dataclass(frozen=True)
class Range:
    """A numeric search space read from its strings: what sampling and validation both use."""

    low: float
    high: float
    log: bool
    integer: bool

    @property
    def int_low(self) -> int:
        """The smallest integer an Int space can give (its bounds may be fractional: ``1.5`` gives 2)."""
        return math.ceil(self.low)

    @property
    def int_high(self) -> int:
        return math.floor(self.high)


def parameter_range(space: SearchSpace) -> Range | None:
    """The numeric range of a uniform or logUniform space; None for categorical, unset or unreadable bounds."""
    numeric = space.uniform or space.log_uniform
    if numeric is None:
        return None
    try:
        low, high = float(numeric.min), float(numeric.max)
    except ValueError:
        return None
    if not (math.isfinite(low) and math.isfinite(high)):
        return None
    return Range(low, high, space.log_uniform is not None and space.uniform is None, numeric.type == INT)
