"""Search spaces, objectives and algorithms for ``Client.optimize``, shaped like the Kubeflow SDK's (``Search``,
``Objective``, ``RandomSearch``/``GridSearch``, ``TrialConfig``; kubeflow/trainer#3881's design of
``TrainerClient().optimize()``), turned into the OptimizationJob's wire fields."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.errors import KubetrainError


@dataclass(frozen=True)
class SearchSpace:
    """One parameter's space; build it with ``Search``."""

    kind: str  # uniform | logUniform | categorical
    low: float | int | None = None
    high: float | int | None = None
    integer: bool = False
    choices: tuple[Any, ...] = ()

    def wire(self, name: str) -> dict[str, Any]:
        if self.kind == "categorical":
            return {"categorical": {"choices": [str(c) for c in self.choices]}}
        return {self.kind: {"min": _number(name, self.low), "max": _number(name, self.high),
                            "type": "Int" if self.integer else "Float"}}

    def cast(self, placeholder: str) -> str:
        """Python source turning the placeholder's text back into the type the values were given in."""
        if self.kind == "categorical":
            kinds = {type(c) for c in self.choices}
            if kinds == {int}:
                return f"int({placeholder!r})"
            if kinds <= {int, float}:
                return f"float({placeholder!r})"
            return repr(placeholder)
        return f"{'int' if self.integer else 'float'}({placeholder!r})"


class Search:
    """``Search.loguniform(1e-4, 1e-1)``, ``Search.uniform(0, 1)``, ``Search.randint(1, 8)``,
    ``Search.choice([16, 32, 64])``."""

    @staticmethod
    def uniform(min: float, max: float) -> SearchSpace:
        return SearchSpace("uniform", min, max)

    @staticmethod
    def loguniform(min: float, max: float) -> SearchSpace:
        return SearchSpace("logUniform", min, max)

    @staticmethod
    def randint(min: int, max: int) -> SearchSpace:
        return SearchSpace("uniform", min, max, integer=True)

    @staticmethod
    def choice(values: list[Any] | tuple[Any, ...]) -> SearchSpace:
        return SearchSpace("categorical", choices=tuple(values))


@dataclass(frozen=True)
class Objective:
    metric: str = "loss"
    direction: str = "Minimize"  # Maximize | Minimize (any case)

    def wire(self) -> dict[str, str]:
        direction = {"maximize": "Maximize", "minimize": "Minimize", "max": "Maximize", "min": "Minimize"}.get(
            self.direction.lower())
        if direction is None:
            raise KubetrainError(f"Objective(direction={self.direction!r}): expected 'Maximize' or 'Minimize'")
        return {"metric": self.metric, "direction": direction}


@dataclass(frozen=True)
class RandomSearch:
    seed: int | None = None

    def wire(self) -> dict[str, Any]:
        return {"random": {} if self.seed is None else {"seed": self.seed}}


@dataclass(frozen=True)
class GridSearch:
    def wire(self) -> dict[str, Any]:
        return {"grid": {}}


@dataclass(frozen=True)
class TrialConfig:
    num_trials: int = 1
    parallel_trials: int = 1


@dataclass
class BestTrial:
    """What ``Client.get_best_results`` returns: the best trial, its values and what it reported."""

    name: str
    parameters: dict[str, str]
    objective: float
    metrics: dict[str, str] = field(default_factory=dict)


def _number(name: str, value: float | int | None) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise KubetrainError(f"search_space[{name!r}]: bounds must be finite numbers, got {value!r}")
    return str(value) if isinstance(value, int) else repr(float(value))
