"""Which values each trial gets: random search (seeded, stateless) and grid search.

Random search draws trial ``i``'s value of parameter ``p`` from ``SHA-256(seed, i, p)`` (counter mode): the same
seed gives the same trials on every machine and Python version, and any trial's values are known on their own,
without replaying the trials before it. So both controllers stay stateless (a restarted one finds trial 7's values
from the spec alone) and the compiler stays pure. docs/optimization.md says why this is not Optuna's sampler.

The transforms follow the usual definitions of these distributions (Optuna's among them): uniform on [min, max];
log-uniform has a uniform logarithm; an Int space takes the integers in [min, max], each equally likely (log-uniform:
on the log scale, from min - 0.5 to max + 0.5, rounded); a categorical space picks each choice equally often.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Sequence

from kubetrain.api.optimization import OptimizationJobSpec, Parameter, parameter_range

_DOMAIN = b"kubetrain/optimization/random/v1"


def seed_of(spec: OptimizationJobSpec, uid: str | None) -> int:
    """The random search's seed: ``random.seed`` when set, else derived from the OptimizationJob's uid (the same
    for that object across restarts, another for the next one), else 0 (an object not created yet)."""
    algorithm = spec.search_algorithm
    seed = algorithm.random.seed if algorithm is not None and algorithm.random is not None else None
    if seed is not None:
        return seed
    if uid:
        return int.from_bytes(hashlib.sha256(uid.encode()).digest()[:8], "big", signed=True)
    return 0


def unit(seed: int, index: int, name: str) -> float:
    """A number in [0, 1) for trial ``index`` and parameter ``name``: 53 bits of SHA-256 over the three."""
    digest = hashlib.sha256(b"\0".join((_DOMAIN, str(seed).encode(), str(index).encode(), name.encode()))).digest()
    return (int.from_bytes(digest[:8], "big") >> 11) / float(1 << 53)


def grid_size(spec: OptimizationJobSpec) -> int:
    """Combinations of a grid (every parameter categorical); 0 when a parameter is not."""
    sizes = [len(p.search_space.categorical.choices) if p.search_space.categorical else 0 for p in spec.parameters]
    return math.prod(sizes)


def trial_count(spec: OptimizationJobSpec) -> int:
    """Trials the search runs: numTrials, or fewer when a grid has fewer combinations."""
    if spec.algorithm == "grid":
        return min(spec.trials, grid_size(spec))
    return spec.trials


def suggestion(spec: OptimizationJobSpec, index: int, seed: int) -> dict[str, str]:
    """Trial ``index``'s value of every parameter (in the spec's order), as the strings the trial gets."""
    if spec.algorithm == "grid":
        return _grid(spec.parameters, index)
    return {p.name: _sample(p, unit(seed, index, p.name)) for p in spec.parameters}


def suggestions(spec: OptimizationJobSpec, seed: int) -> list[dict[str, str]]:
    return [suggestion(spec, i, seed) for i in range(trial_count(spec))]


def _grid(parameters: Sequence[Parameter], index: int) -> dict[str, str]:
    """Combination ``index`` in ``itertools.product`` order: the last parameter changes fastest."""
    out: dict[str, str] = {}
    rest = index
    for p in reversed(parameters):
        choices = p.search_space.categorical.choices if p.search_space.categorical else []
        rest, at = divmod(rest, len(choices))
        out[p.name] = choices[at]
    return {p.name: out[p.name] for p in parameters}


def grid_combinations(parameters: Sequence[Parameter]) -> list[tuple[str, ...]]:
    """Every combination, in trial order (tests compare it with ``itertools.product``)."""
    spaces = [p.search_space.categorical.choices for p in parameters if p.search_space.categorical]
    return list(itertools.product(*spaces))


def _sample(parameter: Parameter, u: float) -> str:
    space = parameter.search_space
    if space.categorical is not None:
        choices = space.categorical.choices
        return choices[min(int(u * len(choices)), len(choices) - 1)]
    rng = parameter_range(space)
    numeric = space.uniform or space.log_uniform
    if rng is None or numeric is None:
        raise ValueError(f"parameter {parameter.name!r} has no valid search space")  # validation refuses it first
    if rng.integer:
        lo, hi = rng.int_low, rng.int_high
        if rng.log:
            a, b = math.log(lo - 0.5), math.log(hi + 0.5)
            value = round(math.exp(a + (b - a) * u))
        else:
            value = lo + int(u * (hi - lo + 1))
        return str(min(max(value, lo), hi))
    if rng.log:
        a, b = math.log(rng.low), math.log(rng.high)
        x = math.exp(a + (b - a) * u)
    else:
        x = rng.low + (rng.high - rng.low) * u
    return _float_text(x, rng.low, rng.high, numeric.min, numeric.max)


def _float_text(x: float, low: float, high: float, low_text: str, high_text: str) -> str:
    """Eight significant digits, kept inside [min, max] (rounding may not step outside the bounds)."""
    text = f"{x:.8g}"
    value = float(text)
    if value < low:
        return low_text
    if value > high:
        return high_text
    return text
