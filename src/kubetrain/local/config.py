"""User settings of the local backend: ``$KUBETRAIN_HOME/config.yaml``.

```yaml
capacity:                 # what the local scheduler may hand out (default: what this machine has)
  cpu: 6                  #   keep 2 cores for yourself
  nvidia.com/gpu: 2
  example.com/fpga: 1     #   extended resources exist only when declared here
retention:
  ttlAfterFinished: 7d    # finished TrainJobs (state and logs) are pruned this long after they finished
  maxFinished: 100        # and only the newest 100 finished ones are kept
security:
  allowedHostPaths: [/data, /scratch]   # hostPath volumes only below these directories (default: none)
  allowPrivileged: false  # root only: accept privileged containers (like `kubetrain run --allow-privileged`)
autoscaling:              # elastic TrainJobs with elasticPolicy.metrics (the HPA's defaults shown)
  syncPeriod: 15s
  scaleDownStabilization: 5m
  tolerance: 0.1
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
class Security:
    allowed_host_paths: list[str] = field(default_factory=list)
    """Directories below which pods may mount ``hostPath`` volumes. Default: none, so a TrainJob never reaches
    this machine's files except through its working directory and volumes (``/`` must be written here to allow
    everything)."""
    allow_privileged: bool = False
    """Accept ``privileged: true`` containers (only when kubetrain runs as root); ``kubetrain run/apply
    --allow-privileged`` does the same for one submit."""


@dataclass
class Autoscaling:
    sync_period: float = 15.0
    """Seconds between two autoscaling decisions (kube-controller-manager's
    ``--horizontal-pod-autoscaler-sync-period``)."""
    scale_down_stabilization: float = 300.0
    """A scale-down takes the highest recommendation of this many seconds (``behavior.scaleDown``'s
    ``stabilizationWindowSeconds``)."""
    tolerance: float = 0.1
    """Ratios of current to target metric within ``1 ± tolerance`` change nothing
    (``--horizontal-pod-autoscaler-tolerance``)."""


@dataclass
class Settings:
    capacity: dict[str, Any] = field(default_factory=dict)
    """Resource name → quantity the local scheduler may hand out. Overrides what is detected (cpu: the CPUs this
    process may use; memory: MemTotal; nvidia.com/gpu: ``nvidia-smi -L``; ephemeral-storage: the size of the disk
    holding ``$KUBETRAIN_HOME``). Other extended resources (``example.com/fpga``) exist only when declared here."""
    retention: Retention = field(default_factory=Retention)
    """When finished TrainJobs are removed automatically (checked whenever a TrainJob is submitted)."""
    security: Security = field(default_factory=Security)
    """What pods may reach on this machine beyond their own sandbox (hostPath, privileged)."""
    autoscaling: Autoscaling = field(default_factory=Autoscaling)
    """How the supervisor of an elastic TrainJob with ``elasticPolicy.metrics`` scales it (the HPA's algorithm)."""


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
        raise ConfigError(f"{path}: expected a mapping with `capacity`, `retention`, `security` and/or `autoscaling`")
    unknown = sorted(set(raw) - {"capacity", "retention", "security", "autoscaling"})
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting(s) {', '.join(unknown)} (known: capacity, retention, security, autoscaling)"
        )
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
        security=_security(raw.get("security"), path),
        autoscaling=_autoscaling(raw.get("autoscaling"), f"{path}: autoscaling"),
    )


def _security(raw: Any, path: Any) -> Security:
    if raw is None:
        return Security()
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: security: expected a mapping (allowedHostPaths, allowPrivileged)")
    bad = sorted(set(raw) - {"allowedHostPaths", "allowPrivileged"})
    if bad:
        raise ConfigError(
            f"{path}: security: unknown key(s) {', '.join(bad)} (known: allowedHostPaths, allowPrivileged)"
        )
    prefixes = raw.get("allowedHostPaths") or []
    if not isinstance(prefixes, list) or not all(isinstance(p, str) and p.startswith("/") for p in prefixes):
        raise ConfigError(
            f"{path}: security.allowedHostPaths: expected a list of absolute directories (e.g. [/data]), "
            f"got {prefixes!r}"
        )
    allow = raw.get("allowPrivileged", False)
    if not isinstance(allow, bool):
        raise ConfigError(f"{path}: security.allowPrivileged: expected true or false, got {allow!r}")
    return Security(allowed_host_paths=list(prefixes), allow_privileged=allow)


def _autoscaling(raw: Any, where: str) -> Autoscaling:
    if raw is None:
        return Autoscaling()
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping (syncPeriod, scaleDownStabilization, tolerance)")
    bad = sorted(set(raw) - {"syncPeriod", "scaleDownStabilization", "tolerance"})
    if bad:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(bad)} (known: syncPeriod, scaleDownStabilization, tolerance)"
        )
    out = Autoscaling()
    if raw.get("syncPeriod") is not None:
        out.sync_period = parse_duration(raw["syncPeriod"], f"{where}.syncPeriod")
        if out.sync_period <= 0:
            raise ConfigError(f"{where}.syncPeriod: must be more than 0 seconds")
    if raw.get("scaleDownStabilization") is not None:
        out.scale_down_stabilization = parse_duration(raw["scaleDownStabilization"], f"{where}.scaleDownStabilization")
    tol = raw.get("tolerance")
    if tol is not None:
        if isinstance(tol, bool) or not isinstance(tol, int | float) or not 0 <= tol < 1:
            raise ConfigError(f"{where}.tolerance: expected a number from 0 to below 1, got {tol!r}")
        out.tolerance = float(tol)
    return out
