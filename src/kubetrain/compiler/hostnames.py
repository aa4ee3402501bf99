"""Every pod hostname a TrainJob will get must be a DNS label (at most 63 characters).

JobSet names pods ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`` and uses that as the hostname (the JobSet
is named after the TrainJob). A name that is too long only fails when the pods start (the kubelet, or
``sethostname`` locally, rejects it), so it is checked at validation time, with the longest name that would fit.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.errors import Result
from kubetrain.compiler.info import Info

MAX_HOSTNAME = 63


def _completions(pod_set_count: int, replicated_job: dict[str, Any]) -> int:
    completions = ((replicated_job.get("template") or {}).get("spec") or {}).get("completions")
    return max(pod_set_count, completions if isinstance(completions, int) else 0, 1)


def validate_hostnames(info: Info) -> Result:
    result = Result()
    name = info.name
    longest = ""
    for ps in info.pod_sets:
        host = f"{name}-{ps.name}-{max(ps.replicas, 1) - 1}-{_completions(ps.count, ps.replicated_job) - 1}"
        if len(host) > len(longest):
            longest = host
    if len(longest) <= MAX_HOSTNAME:
        return result
    allowed = MAX_HOSTNAME - (len(longest) - len(name))
    result.error(
        "metadata.name",
        f'TrainJob name "{name}" ({len(name)} characters) is too long for runtime "{info.runtime.name}": its pod '
        f'hostname "{longest}" would have {len(longest)} characters, and a hostname may have at most '
        f"{MAX_HOSTNAME}; with this runtime and node count the longest TrainJob name allowed is {max(allowed, 0)} "
        "characters",
        f"shorten metadata.name to at most {max(allowed, 0)} characters",
    )
    return result
