"""An OptimizationJob's own rules: what upstream's CRD (schema and CEL) enforces, with field paths and fixes, plus
kubetrain's checks for a search that could never produce a trial.

Rules that need the trials themselves (placeholders, trial names, the trial TrainJob against its runtime) are the
compiler's (``kubetrain.compiler.optimization.checks``).
"""

from __future__ import annotations

import math

from kubetrain.api import constants as c
from kubetrain.api.errors import Result
from kubetrain.api.optimization import (
    INT,
    OptimizationJob,
    OptimizationJobSpec,
    Parameter,
    parameter_range,
)
from kubetrain.api.validation import name_rules

_GRID_RULE = "Grid search requires all parameters to be Categorical; Uniform and LogUniform are not supported."


def validate_optimizationjob_object(oj: OptimizationJob, *, old: OptimizationJob | None = None) -> Result:
    """Schema- and CEL-level rules of an OptimizationJob on its own (and the immutable spec against ``old``)."""
    result = Result()
    name_rules(result, oj.metadata.name, c.KIND_OPTIMIZATIONJOB)
    spec = oj.spec
    _algorithm(result, spec)
    if spec.parallel > spec.trials:
        result.error("spec.parallelTrials", f"parallelTrials cannot exceed numTrials ({spec.parallel} > "
                     f"{spec.trials})", f"set parallelTrials to at most {spec.trials}, or raise numTrials")
    _duplicates(result, "spec.objectives", [o.metric for o in spec.objectives], "metric")
    _duplicates(result, "spec.parameters", [p.name for p in spec.parameters], "name")
    for i, parameter in enumerate(spec.parameters):
        _parameter(result, f"spec.parameters[{i}]", parameter, grid=spec.algorithm == "grid")
    meta = spec.train_job_template.metadata
    if meta is not None and (meta.name is not None or meta.namespace is not None):
        result.error("spec.trainJobTemplate.metadata", "name and namespace cannot be set in a template.",
                     "remove them: each trial is named after the OptimizationJob and lives in its namespace")
    if spec.algorithm == "grid":
        _grid_size(result, spec)
    if old is not None and old.spec != spec:
        result.error("spec", "OptimizationJobSpec is immutable and cannot be updated after creation",
                     "delete the OptimizationJob and create it again (its trials go with it), or create a new one "
                     "under another name")
    return result


def _algorithm(result: Result, spec: OptimizationJobSpec) -> None:
    algorithm = spec.search_algorithm
    if algorithm is None:
        return
    seed = algorithm.random.seed if algorithm.random is not None else None
    if seed is not None and not -(2**63) <= seed < 2**63:
        result.error("spec.searchAlgorithm.random.seed", f"seed {seed} does not fit in 64 bits (int64)",
                     "use a seed between -9223372036854775808 and 9223372036854775807")
    chosen = [n for n in ("random", "grid") if getattr(algorithm, n) is not None]
    if len(chosen) != 1:
        result.error("spec.searchAlgorithm", "exactly one of the fields in [random grid] must be set"
                     + (f" (found {' and '.join(chosen)})" if chosen else ""),
                     "keep one of `random: {seed: 42}` or `grid: {}`; without searchAlgorithm the search is random")


def _duplicates(result: Result, path: str, keys: list[str], key: str) -> None:
    for dup in sorted({k for k in keys if keys.count(k) > 1}):
        at = keys.index(dup, keys.index(dup) + 1)
        result.error(f"{path}[{at}].{key}", f"Duplicate value: {key} {dup!r} appears more than once",
                     f"keep one entry per {key}")


def _parameter(result: Result, path: str, parameter: Parameter, *, grid: bool) -> None:
    space = parameter.search_space
    where = f"{path}.searchSpace"
    chosen = [n for n in ("uniform", "log_uniform", "categorical") if getattr(space, n) is not None]
    if grid and space.categorical is None:
        result.error(where, _GRID_RULE, "list the values to try as categorical.choices, or use random search")
    if len(chosen) != 1:
        named = " and ".join("logUniform" if n == "log_uniform" else n for n in chosen)
        result.error(where, "exactly one of the fields in [uniform logUniform categorical] must be set"
                     + (f" (found {named})" if chosen else ""),
                     "give the parameter one of uniform: {min, max}, logUniform: {min, max} or categorical: "
                     "{choices: [...]}")
        return
    if space.categorical is not None:
        choices = space.categorical.choices
        for dup in sorted({v for v in choices if choices.count(v) > 1}):
            result.error(f"{where}.categorical.choices", f"Duplicate value: {dup!r}",
                         "list each choice once (choices are a set)")
        return
    kind = space.kind
    rng = parameter_range(space)
    if rng is None:
        return  # the bounds' pattern errors were reported when the document was read
    if kind == "logUniform" and rng.low <= 0:
        result.error(f"{where}.logUniform.min", f"min must be strictly greater than 0 (got {_text(rng.low)})",
                     "a log scale starts above 0: use e.g. min: \"1e-5\"")
    if rng.low >= rng.high:
        result.error(f"{where}.{kind}", f"min must be strictly less than max (min {_text(rng.low)}, max "
                     f"{_text(rng.high)})", "swap the bounds, or widen the range")
        return
    if rng.integer:
        if rng.int_low > rng.int_high:
            result.error(f"{where}.{kind}", f"no integer lies between min {_text(rng.low)} and max "
                         f"{_text(rng.high)} (type Int), so no trial can get a value", "widen the range to "
                         "include an integer, or use type Float")
        elif not (float(rng.low).is_integer() and float(rng.high).is_integer()):
            result.warn(f"{where}.{kind}", f"type {INT} with fractional bounds: values are the integers "
                        f"{rng.int_low}..{rng.int_high}", "write whole-number bounds")


def _grid_size(result: Result, spec: OptimizationJobSpec) -> None:
    sizes = [len(p.search_space.categorical.choices) for p in spec.parameters if p.search_space.categorical]
    if len(sizes) != len(spec.parameters):
        return  # reported above
    combinations = math.prod(sizes)
    if combinations < spec.trials:
        result.warn("spec.numTrials", f"the grid has {combinations} combination{'s' if combinations != 1 else ''}"
                    f", so only {combinations} of the {spec.trials} trials will run",
                    f"set numTrials: {combinations}, or add choices")
    elif combinations > spec.trials:
        result.warn("spec.numTrials", f"the grid has {combinations} combinations; numTrials {spec.trials} runs "
                    f"only the first {spec.trials}", f"set numTrials: {min(combinations, 100)} to try "
                    + ("every one" if combinations <= 100 else "as many as allowed (100)"))


def _text(x: float) -> str:
    return f"{x:g}"
