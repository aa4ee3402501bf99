"""Which check runs at which level and policy version, and the evaluation of one pod template.

Mirrors the registry of Kubernetes' PodSecurity admission (kube-apiserver 1.36): every check belongs to
baseline or restricted and has one implementation per policy version it changed in; a restricted check may
replace ("override") a baseline check from some version on; restricted runs every baseline check that is not
overridden. Policy versions newer than the newest change (1.35) evaluate as the newest, as ``latest`` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Final, Literal

from kubetrain.api.podsecurity import checks_baseline as b
from kubetrain.api.podsecurity import checks_restricted as r
from kubetrain.api.podsecurity._pod import CONTAINER_LISTS, Pod, items, obj, text

Level = Literal["privileged", "baseline", "restricted"]
LEVELS: Final[tuple[Level, ...]] = ("privileged", "baseline", "restricted")
LATEST: Final = "latest"


@dataclass(frozen=True)
class Versioned:
    """The implementation of a check from policy version ``1.<since>`` on."""

    since: int
    fn: b.CheckFn
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    id: str
    level: Level
    versions: tuple[Versioned, ...]

    def at(self, minor: int) -> Versioned | None:
        chosen = None
        for v in self.versions:
            if v.since <= minor:
                chosen = v
        return chosen


CHECKS: Final[tuple[Check, ...]] = (
    # baseline
    Check("appArmorProfile", "baseline", (Versioned(0, b.app_armor_profile),)),
    Check("capabilities_baseline", "baseline", (Versioned(0, b.capabilities_baseline),)),
    Check("hostNamespaces", "baseline", (Versioned(0, b.host_namespaces),)),
    Check("hostPathVolumes", "baseline", (Versioned(0, b.host_path_volumes),)),
    Check("hostPorts", "baseline", (Versioned(0, b.host_ports),)),
    Check("hostProbesAndHostLifecycle", "baseline", (Versioned(34, b.host_probes_and_lifecycle),)),
    Check("privileged", "baseline", (Versioned(0, b.privileged),)),
    Check("procMount", "baseline", (Versioned(0, b.proc_mount), Versioned(35, b.proc_mount_1_35_baseline))),
    Check("seLinuxOptions", "baseline", (Versioned(0, b.se_linux_options_1_0), Versioned(31, b.se_linux_options_1_31))),
    Check(
        "seccompProfile_baseline",
        "baseline",
        (Versioned(0, b.seccomp_baseline_1_0), Versioned(19, b.seccomp_baseline_1_19)),
    ),
    Check(
        "sysctls",
        "baseline",
        (
            Versioned(0, b.sysctls_1_0),
            Versioned(27, b.sysctls_1_27),
            Versioned(29, b.sysctls_1_29),
            Versioned(32, b.sysctls_1_32),
        ),
    ),
    Check("windowsHostProcess", "baseline", (Versioned(0, b.windows_host_process),)),
    # restricted
    Check(
        "allowPrivilegeEscalation",
        "restricted",
        (Versioned(8, r.allow_privilege_escalation_1_8), Versioned(25, r.allow_privilege_escalation_1_25)),
    ),
    Check(
        "capabilities_restricted",
        "restricted",
        (
            Versioned(22, r.capabilities_restricted_1_22, ("capabilities_baseline",)),
            Versioned(25, r.capabilities_restricted_1_25, ("capabilities_baseline",)),
        ),
    ),
    Check("procMount_restricted", "restricted", (Versioned(35, r.proc_mount_restricted, ("procMount",)),)),
    Check("restrictedVolumes", "restricted", (Versioned(0, r.restricted_volumes, ("hostPathVolumes",)),)),
    Check("runAsNonRoot", "restricted", (Versioned(0, r.run_as_non_root_1_0), Versioned(35, r.run_as_non_root_1_35))),
    Check("runAsUser", "restricted", (Versioned(23, r.run_as_user_1_23), Versioned(35, r.run_as_user_1_35))),
    Check(
        "seccompProfile_restricted",
        "restricted",
        (
            Versioned(19, r.seccomp_restricted_1_19, ("seccompProfile_baseline",)),
            Versioned(25, r.seccomp_restricted_1_25, ("seccompProfile_baseline",)),
        ),
    ),
)

NEWEST_MINOR: Final = max(v.since for c in CHECKS for v in c.versions)
_VERSION = re.compile(r"^v1\.(0|[1-9][0-9]*)$")


def parse_level(value: str) -> Level:
    """``privileged`` | ``baseline`` | ``restricted``; ValueError otherwise."""
    for level in LEVELS:
        if value == level:
            return level
    raise ValueError(f"must be one of {', '.join(LEVELS)}, got {value!r}")


def parse_version(value: str) -> int | None:
    """The minor of a ``v1.<minor>`` policy version; None for ``latest``. ValueError otherwise."""
    if value == LATEST:
        return None
    m = _VERSION.match(value)
    if m is None:
        raise ValueError(f'must be "latest" or "v1.x", got {value!r}')
    return int(m.group(1))


def level_rank(level: Level) -> int:
    return LEVELS.index(level)


@cache
def checks_for(level: Level, minor: int | None = None) -> tuple[tuple[Check, Versioned], ...]:
    """The checks a pod must pass to meet ``level`` at policy version ``1.<minor>`` (None: latest), baseline
    checks first, each group in ID order (the order of PodSecurity's messages)."""
    if level == "privileged":
        return ()
    v = NEWEST_MINOR if minor is None else min(minor, NEWEST_MINOR)
    chosen = [(c, impl) for c in CHECKS if (impl := c.at(v)) is not None]
    restricted = [(c, i) for c, i in chosen if c.level == "restricted"]
    baseline = [(c, i) for c, i in chosen if c.level == "baseline"]
    if level == "baseline":
        return tuple(baseline)
    overridden = {o for _, i in restricted for o in i.overrides}
    return tuple((c, i) for c, i in baseline if c.id not in overridden) + tuple(restricted)


@dataclass(frozen=True)
class Violation:
    """A failed check at one field of a pod template (``path`` is relative to the PodTemplateSpec)."""

    check: str
    level: Level  # the lowest level the check belongs to: baseline checks also bind restricted
    path: str
    message: str
    fix: str
    subject: str = "pod"  # 'container "node"', 'volume "data"' or "pod": what the fix applies to
    values: tuple[str, ...] = ()  # the offending values (see ``Hit``)
    unset: tuple[str, ...] = ()  # containers that leave a required field unset (see ``Hit``)


_INDEXED = re.compile(r"^spec\.(\w+)\[(\d+)\]")


def _subject(pod: Pod, path: str) -> str:
    m = _INDEXED.match(path)
    if m is None or m.group(1) not in (*CONTAINER_LISTS, "volumes"):
        return "pod"
    entry = obj(items(pod.spec.get(m.group(1)))[int(m.group(2))])
    kind = {"initContainers": "init container", "ephemeralContainers": "ephemeral container"}.get(
        m.group(1), m.group(1).rstrip("s")
    )
    return f'{kind} "{text(entry.get("name"))}"'


def evaluate(template: object, level: Level, minor: int | None = None) -> list[Violation]:
    """Every violation of ``level`` in a PodTemplateSpec dict (``{"metadata": ..., "spec": ...}``)."""
    return _evaluate(Pod.from_template(template), level, minor)


def _evaluate(pod: Pod, level: Level, minor: int | None) -> list[Violation]:
    return [
        Violation(check.id, check.level, hit.path, hit.message, hit.fix, _subject(pod, hit.path), hit.values, hit.unset)
        for check, impl in checks_for(level, minor)
        for hit in impl.fn(pod)
    ]


@dataclass(frozen=True)
class Assessment:
    """The strictest level a pod template meets and every violation up to restricted (baseline's first, one per
    field); ``restricted``: the violations of restricted exactly as PodSecurity enforcing it finds them (the
    restricted checks that replace baseline ones instead of those), for its summary."""

    level: Level
    violations: tuple[Violation, ...]
    restricted: tuple[Violation, ...] = ()


def assess(template: object, minor: int | None = None) -> Assessment:
    pod = Pod.from_template(template)
    baseline = _evaluate(pod, "baseline", minor)
    restricted = _evaluate(pod, "restricted", minor)
    level: Level = "privileged" if baseline else "baseline" if restricted else "restricted"
    # A restricted check that replaces a baseline one reports the same field again: keep baseline's finding.
    seen = {v.path for v in baseline}
    extra = [v for v in restricted if v.level == "restricted" and v.path not in seen]
    return Assessment(level, (*baseline, *extra), tuple(restricted))
