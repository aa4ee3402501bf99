"""User settings of the local backend: ``$KUBETRAIN_HOME/config.yaml``.

```yaml
capacity:                 # what the local scheduler may hand out (default: what this machine has)
  cpu: 6                  #   keep 2 cores for yourself
  nvidia.com/gpu: 2
  example.com/fpga: 1     #   extended resources exist only when declared here
retention:
  ttlAfterFinished: 7d    # finished TrainJobs (state and logs) are pruned this long after they finished
  maxFinished: 100        # and only the newest 100 finished ones are kept
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local import paths

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class ConfigError(KubetrainError):
    pass


def parse_duration(value: Any, where: str) -> float:
    """``90``, ``45s``, ``30m``, ``12h``, ``7d``, ``2w`` → seconds."""
    m = _DURATION.match(str(value))
    if m is None:
        raise ConfigError(f"{where}: {value!r} is not a duration (e.g. 3600, 30m, 12h, 7d)")
    return float(m.group(1)) * _UNIT[m.group(2)]


@dataclass
class Retention:
    ttl_after_finished: float | None = None
    """Seconds after which a finished TrainJob is pruned (state and logs), like a Job's
    ``ttlSecondsAfterFinished``. ``None``: kept until ``kubetrain prune`` or ``delete``."""
    max_finished: int | None = None
    """Keep at most this many finished TrainJobs; the oldest are pruned first. ``None``: no limit."""


@dataclass
class Settings:
    capacity: dict[str, Any] = field(default_factory=dict)
    """Resource name → quantity the local scheduler may hand out. Overrides what is detected (cpu: the CPUs this
    process may use; memory: MemTotal; nvidia.com/gpu: ``nvidia-smi -L``; ephemeral-storage: the size of the disk
    holding ``$KUBETRAIN_HOME``). Other extended resources (``example.com/fpga``) exist only when declared here."""
    retention: Retention = field(default_factory=Retention)
    """When finished TrainJobs are removed automatically (checked whenever a TrainJob is submitted)."""


def load() -> Settings:
    path = paths.config_file()
    if not path.exists():
        return Settings()
    import yaml

    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot be read as YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping with `capacity` and/or `retention`")
    unknown = sorted(set(raw) - {"capacity", "retention"})
    if unknown:
        raise ConfigError(f"{path}: unknown setting(s) {', '.join(unknown)} (known: capacity, retention)")
    capacity = raw.get("capacity") or {}
    if not isinstance(capacity, dict):
        raise ConfigError(f"{path}: capacity: expected a mapping of resource name to quantity")
    ret = raw.get("retention") or {}
    if not isinstance(ret, dict):
        raise ConfigError(f"{path}: retention: expected a mapping (ttlAfterFinished, maxFinished)")
    bad = sorted(set(ret) - {"ttlAfterFinished", "maxFinished"})
    if bad:
        raise ConfigError(f"{path}: retention: unknown key(s) {', '.join(bad)} (known: ttlAfterFinished, maxFinished)")
    ttl = ret.get("ttlAfterFinished")
    max_finished = ret.get("maxFinished")
    if max_finished is not None and (not isinstance(max_finished, int) or max_finished < 0):
        raise ConfigError(f"{path}: retention.maxFinished: expected a number >= 0, got {max_finished!r}")
    return Settings(
        capacity={str(k): v for k, v in capacity.items()},
        retention=Retention(
            ttl_after_finished=None if ttl is None else parse_duration(ttl, f"{path}: retention.ttlAfterFinished"),
            max_finished=max_finished,
        ),
    )
