"""``hf://`` sources, downloaded with ``huggingface_hub.snapshot_download`` as upstream's images do.

A dataset URI names its repository by its first two parts (``hf://tatsu-lab/alpaca/data/train.parquet`` fetches
the whole ``tatsu-lab/alpaca``; the SDK turns the rest into ``dataset.data_files``), a model URI by all of it. A
model is fetched as upstream fetches one: only ``*.json``, ``*.safetensors``, ``*.model``, ``*.txt`` and ``*.gguf``
files. ``HF_ENDPOINT`` (a mirror) and the library's other variables work as usual."""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlparse

from kubetrain.initializers.errors import InitializerError
from kubetrain.initializers.settings import Settings

log = logging.getLogger("kubetrain.initializers")

MODEL_ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.gguf"]

_TOKEN_FIX = (
    "put the token in a Secret under the key ACCESS_TOKEN and name it in spec.initializer.{step}.secretRef "
    "(or set ACCESS_TOKEN in spec.initializer.{step}.env)"
)


def repo_id(settings: Settings) -> str:
    parsed = urlparse(settings.storage_uri)
    parts = [p for p in parsed.path.split("/") if p]
    if settings.step == "dataset":
        name = f"{parsed.netloc}/{parts[0]}" if parts else parsed.netloc
    else:
        name = "/".join([parsed.netloc, *parts])
    if not parsed.netloc:
        raise InitializerError(
            f"STORAGE_URI {settings.storage_uri!r} names no repository",
            "write hf://<owner>/<name>, e.g. hf://meta-llama/Llama-3.2-1B-Instruct",
            permanent=True,
        )
    return name


def fetch(settings: Settings) -> str:
    """Download into ``settings.destination``; returns the repository id."""
    try:
        import httpx
        import huggingface_hub
        from huggingface_hub import constants as hf_constants
        from huggingface_hub import errors as hf_errors
    except ImportError:
        raise InitializerError(
            "hf:// needs the huggingface_hub package, which this Python environment lacks",
            "pip install 'kubetrain[initializers]' into the environment standing in for the initializer image "
            "(locally: the one $KUBETRAIN_HOME/images.yaml maps the image to, else kubetrain's own)",
            permanent=True,
        ) from None
    name = repo_id(settings)
    repo_type = "dataset" if settings.step == "dataset" else "model"
    endpoint = hf_constants.ENDPOINT
    log.info("downloading repo=%s type=%s endpoint=%s into=%s", name, repo_type, endpoint, settings.destination)
    kwargs: dict[str, Any] = {
        "repo_id": name,
        "repo_type": repo_type,
        "local_dir": settings.destination,
        "ignore_patterns": list(settings.ignore_patterns) or None,
    }
    if settings.step == "model":
        kwargs["allow_patterns"] = MODEL_ALLOW_PATTERNS
    if settings.access_token:
        # Passed to the call rather than through `huggingface_hub.login` (which upstream's images use): login
        # would also store the token in the user's home, which locally is the real one, not a container's.
        kwargs["token"] = settings.access_token
    fix_token = _TOKEN_FIX.format(step=settings.step)
    what = f"{repo_type} {name} on {endpoint}"
    try:
        huggingface_hub.snapshot_download(**kwargs)
    except hf_errors.GatedRepoError:
        raise InitializerError(
            f"{what} is gated, and "
            + ("ACCESS_TOKEN has not been granted access" if settings.access_token else "no ACCESS_TOKEN was given"),
            ("request access on the repository's page, then " if settings.access_token else "") + fix_token,
            permanent=True,
        ) from None
    except hf_errors.RepositoryNotFoundError:
        auth = "with the given ACCESS_TOKEN" if settings.access_token else "without an ACCESS_TOKEN"
        raise InitializerError(
            f"{what} was not found {auth} (it does not exist, or it is private)",
            f"check the name in STORAGE_URI; for a private repository {fix_token}",
            permanent=True,
        ) from None
    except hf_errors.RevisionNotFoundError as exc:
        raise InitializerError(f"{what}: {_first_line(exc)}", "check the repository", permanent=True) from None
    except hf_errors.HFValidationError as exc:
        raise InitializerError(
            f"STORAGE_URI {settings.storage_uri!r}: {name!r} is not a valid repository id ({_first_line(exc)})",
            "write hf://<owner>/<name> with letters, digits, '-', '_' and '.'",
            permanent=True,
        ) from None
    except hf_errors.HfHubHTTPError as exc:
        code = exc.response.status_code if exc.response is not None else None
        if code in (401, 403):
            raise InitializerError(
                f"{what}: the hub refused the credentials (HTTP {code}: {_first_line(exc)})",
                fix_token.replace("put the token", "put a valid token"),
                permanent=True,
            ) from None
        raise InitializerError(
            f"{what}: HTTP {code}: {_first_line(exc)}", "retry later; the hub or the mirror failed", permanent=False
        ) from None
    except (hf_errors.LocalEntryNotFoundError, httpx.HTTPError) as exc:
        raise InitializerError(
            f"could not reach {endpoint} for {name}: {_cause(exc)}",
            "check the network (a local pod reaches the internet only through slirp4netns: docs/local.md), "
            "or set HF_ENDPOINT to a reachable mirror",
            permanent=False,
        ) from None
    return name


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    # The library's messages start with a status line, then say what happened; keep one short sentence.
    for line in lines:
        if not line.endswith("Client Error.") and not line.endswith("Server Error."):
            return line[:300]
    return lines[0][:300] if lines else type(exc).__name__


def _cause(exc: BaseException) -> str:
    cause = exc.__cause__ or exc.__context__
    return _first_line(cause) if cause is not None else _first_line(exc)
