"""``python -m kubetrain.initializers dataset|model``: fetch ``STORAGE_URI`` into the shared volume."""

from __future__ import annotations

import logging
import sys
import time
from urllib.parse import urlparse

from kubetrain.initializers import EXIT_FAILED, EXIT_OK, EXIT_PERMANENT, EXIT_USAGE
from kubetrain.initializers.errors import InitializerError
from kubetrain.initializers.settings import Settings, Step, from_env

USAGE = """\
usage: python -m kubetrain.initializers dataset|model

Fetch STORAGE_URI into /workspace/dataset (dataset) or /workspace/model (model), as Kubeflow Trainer's
dataset-initializer and model-initializer images do. Locally, kubetrain runs this for those images.

STORAGE_URI      hf://<owner>/<name>          a Hugging Face repository (HF_ENDPOINT selects a mirror)
                 file:///<absolute path>      a directory or file this container sees (e.g. a mounted PVC)
ACCESS_TOKEN     token for private or gated hf:// repositories (give it through spec.initializer.*.secretRef)
IGNORE_PATTERNS  comma-separated globs of files to leave out (model default: *.msgpack,*.h5,*.bin,*.pt,*.pth)
OUTPUT_PATH      where to write instead of /workspace/dataset or /workspace/model

Exit status: 0 done; 1 failed, a retry may succeed (network, server); 3 failed, retrying cannot help
(bad STORAGE_URI, not found, credentials refused).

example:
  STORAGE_URI=hf://tatsu-lab/alpaca OUTPUT_PATH=/tmp/alpaca python -m kubetrain.initializers dataset
"""

SCHEMES = ("hf", "file")
log = logging.getLogger("kubetrain.initializers")


class _Formatter(logging.Formatter):
    """``time=... level=... initializer=<step> <message with key=value pairs>``, one line per record."""

    def __init__(self, step: str) -> None:
        super().__init__()
        self.step = step

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        return f"time={stamp} level={record.levelname} initializer={self.step} {record.getMessage()}"


def _fetch(settings: Settings) -> str:
    scheme = urlparse(settings.storage_uri).scheme.lower()
    if scheme == "hf":
        from kubetrain.initializers import huggingface

        repo = huggingface.fetch(settings)
        return f"repo={repo}"
    if scheme == "file":
        from kubetrain.initializers import files

        count, size = files.fetch(settings)
        return f"files={count} bytes={size}"
    upstream = {"s3": "s3://", "cache": "cache://"}
    if scheme in upstream:
        raise InitializerError(
            f"STORAGE_URI {settings.storage_uri!r}: {upstream[scheme]} is served by upstream's initializer images "
            "on a cluster, not by kubetrain's local initializer (hf://, file://)",
            "locally, copy the data to this machine and name it with file:///<path>, or map the initializer image "
            "to an environment holding upstream's initializer in $KUBETRAIN_HOME/images.yaml and give the "
            "container a command",
            permanent=True,
        )
    raise unsupported_scheme(settings, scheme)


def unsupported_scheme(settings: Settings, scheme: str) -> InitializerError:
    """The error for a STORAGE_URI no provider serves: which scheme it has (or that it has none), the schemes that
    work, and where the value comes from, with the value rewritten when the intent is plain (upstream #3826 made its
    initializers name the scheme and the supported ones instead of failing bare)."""
    uri = settings.storage_uri
    where = f"spec.initializer.{settings.step}.storageUri (or STORAGE_URI of the {settings.step}-initializer container)"
    if not scheme:
        # A bare path or repository name: say what it would be with a scheme in front.
        guess = f"file://{uri}" if uri.startswith("/") else f"hf://{uri.lstrip('/')}"
        return InitializerError(
            f"STORAGE_URI {uri!r} has no scheme, so no provider can fetch it; kubetrain's initializer fetches hf:// "
            "and file://",
            f"set {where} to {guess}, or to hf://<owner>/<name> or file:///<absolute path>",
            permanent=True,
        )
    return InitializerError(
        f"STORAGE_URI {uri!r}: unsupported scheme {scheme}://; kubetrain's initializer fetches hf:// and file://",
        f"set {where} to hf://<owner>/<name> or file:///<absolute path>",
        permanent=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        sys.stdout.write(USAGE)
        return EXIT_OK
    if len(args) != 1 or args[0] not in ("dataset", "model"):
        sys.stderr.write(f"error: expected one argument, dataset or model; got {' '.join(args) or 'none'}\n\n{USAGE}")
        return EXIT_USAGE
    step: Step = "dataset" if args[0] == "dataset" else "model"
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Formatter(step))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per HTTP request drowns what matters
    started = time.monotonic()
    try:
        settings = from_env(step)
        log.info("start storage_uri=%s destination=%s", settings.storage_uri, settings.destination)
        summary = _fetch(settings)
    except InitializerError as exc:
        # One line, last in the log: locally it becomes the step's failure message.
        sys.stdout.flush()
        print(f"error: {exc}", flush=True)
        return EXIT_PERMANENT if exc.permanent else EXIT_FAILED
    except KeyboardInterrupt:
        return 130
    log.info("done %s seconds=%.1f", summary, time.monotonic() - started)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
