"""Not-found messages that help: at most a few close names, never a dump of every object there is."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_SUGGESTIONS = 3


def close_matches(name: str, candidates: Iterable[str], n: int = MAX_SUGGESTIONS) -> list[str]:
    """Names that look like ``name`` (typos, a missing suffix), best first, at most ``n``."""
    pool = sorted(set(candidates) - {name})
    found = difflib.get_close_matches(name, pool, n=n, cutoff=0.6)
    for cand in pool:
        if len(found) >= n:
            break
        if cand not in found and name and (cand.startswith(name) or name.startswith(cand)):
            found.append(cand)
    return found


def not_found_hint(name: str, candidates: Iterable[str], listing: str) -> str:
    """`` (did you mean a or b?)`` or `` (no TrainJobs there; list them with ...)``, to append to an error."""
    pool = list(candidates)
    near = close_matches(name, pool)
    if near:
        return f" (did you mean {' or '.join(repr(x) for x in near)}?)"
    if not pool:
        return f" (there are none; {listing})"
    verb = "exists" if len(pool) == 1 else "exist"
    return f" ({len(pool)} {verb}, none with a similar name; {listing})"
