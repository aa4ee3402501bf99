"""Python environments for the framework examples, built from the pinned extras in pyproject.toml and cached.

Each framework gets its own virtualenv (their pins conflict), made once per set of pinned requirements and kept
under ``$KUBETRAIN_TEST_ENVS`` (default ``<tmp>/kubetrain-envs-<uid>``, world-readable: pods of the MPI runtimes run
as uid 1000 and must run its interpreter). The directory name carries a hash of the requirements, the Python
version and this recipe, so a new pin builds a new environment and an unchanged one is reused across runs and
clones. A test gets the environment with :func:`framework_env`; it is skipped (with pip's reason) only when the
package registry cannot be reached, and fails when pip fails for any other reason.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Bump when the way environments are built changes, so cached ones are rebuilt.
RECIPE = "1"
# Every torch these environments get is the local CPU build: a resolver free to choose would fetch GBs of CUDA.
CONSTRAINTS = "torch==2.13.0\n"
# pip's words for a registry it could not reach (DNS, refused, timeouts, proxy, TLS) rather than a bad pin.
_OFFLINE = re.compile(
    r"NewConnectionError|Failed to establish a new connection|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|ConnectTimeoutError|Read timed out|"
    r"ProxyError|Max retries exceeded|SSLError|No address associated with hostname"
)


@dataclass(frozen=True)
class Framework:
    """A runtime's framework: its environment's name (for a built-in runtime also its pyproject extra and its
    example's directory), the runtime, the image glob its pods' environment stands in for and the pyproject extras
    that environment is made of (``(extra,)`` unless given)."""

    extra: str
    runtime: str
    image: str
    combines: tuple[str, ...] = ()

    @property
    def extras(self) -> tuple[str, ...]:
        return self.combines or (self.extra,)


FRAMEWORKS = {
    f.extra: f
    for f in (
        Framework("deepspeed", "deepspeed-distributed", "ghcr.io/kubeflow/trainer/deepspeed-runtime*"),
        Framework("jax", "jax-distributed", "nvcr.io/nvidia/jax*"),
        Framework("xgboost", "xgboost-distributed", "ghcr.io/kubeflow/trainer/xgboost-runtime*"),
        Framework("mlx", "mlx-distributed", "ghcr.io/kubeflow/trainer/mlx-runtime*"),
        Framework("tensorflow", "tensorflow-distributed", "tensorflow/tensorflow:*"),
        # mpiImplementation Intel and MPICH: examples/mpi's runtimes, whose images are mpi-operator's base images
        # for those MPIs; and DeepSpeed's runtime image with Intel MPI in place of OpenMPI.
        Framework("intel-mpi", "mpi-intel", "mpioperator/intel*"),
        Framework("mpich", "mpi-mpich", "mpioperator/mpich*"),
        # OpenMPI 5 in place of the machine's OpenMPI 4.1 for examples/mpi's deepspeed-distributed runtime.
        Framework("openmpi5", "deepspeed-distributed", "ghcr.io/kubeflow/trainer/deepspeed-runtime*"),
        Framework("deepspeed-intel-mpi", "deepspeed-distributed", "ghcr.io/kubeflow/trainer/deepspeed-runtime*",
                  combines=("deepspeed", "intel-mpi")),
    )
}

@dataclass(frozen=True)
class Env:
    framework: Framework
    prefix: Path
    requirements: tuple[str, ...]
    build_seconds: float  # how long building it took (when it was built, maybe by an earlier run)
    reused: bool

    def images_yaml(self, home: Path) -> None:
        """Make ``$KUBETRAIN_HOME/images.yaml`` map this framework's runtime image to the environment."""
        home.mkdir(parents=True, exist_ok=True)
        path = home / "images.yaml"
        lines = path.read_text().splitlines() if path.exists() else []
        lines.append(f"{json.dumps(self.framework.image)}: {json.dumps(str(self.prefix))}")
        path.write_text("\n".join(lines) + "\n")


def requirements(extra: str) -> tuple[str, ...]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = tuple(project["optional-dependencies"][extra])
    loose = [r for r in reqs if "==" not in r]
    assert not loose, f"extra {extra!r} must pin exactly (==): {loose}"
    return reqs


def cache_root() -> Path:
    root = Path(os.environ.get("KUBETRAIN_TEST_ENVS") or Path(tempfile.gettempdir()) / f"kubetrain-envs-{os.getuid()}")
    root.mkdir(mode=0o755, parents=True, exist_ok=True)
    if root.stat().st_uid != os.getuid():
        pytest.fail(f"{root} belongs to another user; set KUBETRAIN_TEST_ENVS to a directory of your own")
    root.chmod(0o755)
    return root


def _key(reqs: tuple[str, ...]) -> str:
    identity = json.dumps([RECIPE, sys.version_info[:2], sys.implementation.name, os.uname().machine, reqs])
    return hashlib.sha256(identity.encode()).hexdigest()[:12]


def framework_env(extra: str) -> Env:
    """The environment for ``extra`` (built now, or reused from the cache)."""
    framework = FRAMEWORKS[extra]
    # The extras' pins in order, each once (two extras may both pin mpi4py).
    reqs = tuple(dict.fromkeys(r for name in framework.extras for r in requirements(name)))
    root = cache_root()
    prefix = root / f"{extra}-{_key(reqs)}"
    marker = prefix / "kubetrain-env.json"
    with open(root / f"{extra}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test process may be building the same environment
        if marker.exists():
            seconds = float(json.loads(marker.read_text())["build_seconds"])
            return Env(framework, prefix, reqs, seconds, reused=True)
        shutil.rmtree(prefix, ignore_errors=True)  # a build that was interrupted
        started = time.monotonic()
        _build(prefix, reqs)
        seconds = time.monotonic() - started
        marker.write_text(json.dumps({"requirements": reqs, "build_seconds": round(seconds, 1)}))
        return Env(framework, prefix, reqs, seconds, reused=False)


def _build(prefix: Path, reqs: tuple[str, ...]) -> None:
    # venvs cannot be moved (their scripts name their own path), so the build happens in place and only the marker
    # file, written last, says it is complete.
    base = getattr(sys, "_base_executable", sys.executable)
    _run([base, "-m", "venv", str(prefix)], "creating the virtualenv")
    constraints = prefix / "constraints.txt"
    constraints.write_text(CONSTRAINTS)
    pip = [str(prefix / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", "install", "--quiet"]
    _run([*pip, "--retries", "2", "--timeout", "60", "-c", str(constraints), *reqs], f"pip install {' '.join(reqs)}")
    # The pods of the MPI runtimes run as another user; everything here must be readable and runnable by them.
    for path in [prefix, *prefix.rglob("*")]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode | 0o444 | (0o111 if mode & 0o100 else 0))


def _run(argv: list[str], what: str) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode == 0:
        return
    output = proc.stdout + proc.stderr
    offline = _OFFLINE.search(output)
    if offline:
        pytest.skip(f"the package registry is unreachable ({what}: {offline.group(0)})")
    tail = "\n".join(line for line in output.splitlines() if not line.startswith("WARNING: Location"))[-4000:]
    pytest.fail(f"{what} failed (exit {proc.returncode}):\n{tail}")
