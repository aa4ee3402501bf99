"""examples/mpi: mpirun across the local "nodes", 4 ranks: OpenMPI on the deepspeed-distributed runtime, and Intel
MPI and MPICH, each with its own Hydra launcher, on the example's runtimes."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.examples.envs import framework_env
from tests.requirements import needs_local_sandbox

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, needs_local_sandbox]
needs_openmpi = pytest.mark.skipif(
    shutil.which("mpirun") is None or importlib.util.find_spec("mpi4py") is None,
    reason="needs OpenMPI's mpirun (make system-deps) and mpi4py (.[train])",
)


@needs_openmpi
def test_mpi_example_allreduces_over_4_ranks(tmp_path: Path) -> None:
    env = {**os.environ, "KUBETRAIN_HOME": str(tmp_path / "home")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", str(ROOT / "examples/mpi/trainjob.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"the MPI example did not finish in 300 s:\n{out}\n{err}")
    assert proc.returncode == 0, out + err
    ranks = sorted(re.findall(r"rank (\d)/4 on \S+: sum of ranks = 6", out))
    assert ranks == ["0", "1", "2", "3"], out
    assert "MPI library: Open MPI" in out, out


@needs_openmpi
def test_a_session_directory_left_in_the_hosts_tmp_by_another_user_changes_nothing(tmp_path: Path) -> None:
    # On a node OpenMPI's session directory is in the container's own /tmp; locally the host's /tmp is shared,
    # and a run of the same TrainJob by another user (or uid mapping) leaves /tmp/ompi.<pod>.<uid> behind.
    left = Path("/tmp/ompi.mpi-allreduce-launcher-0-0.1000")
    if os.geteuid() != 0 or left.exists():
        pytest.skip("needs root to leave another user's session directory behind, and none there already")
    left.mkdir(mode=0o700)
    os.chown(left, 4242, 4242)
    try:
        env = {**os.environ, "KUBETRAIN_HOME": str(tmp_path / "home")}
        r = subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", "run", "-f", str(ROOT / "examples/mpi/trainjob.yaml")],
            capture_output=True, text=True, env=env, timeout=300,
        )
    finally:
        left.rmdir()
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("sum of ranks = 6") == 4, r.stdout


@pytest.mark.timeout(1200)  # may build the MPI's environment first (tests/examples/envs.py)
@pytest.mark.parametrize(("example", "library"), [
    ("intel", "Intel(R) MPI Library 2021.17 for Linux* OS"),
    ("mpich", "MPICH Version:      5.0.2"),
])
def test_hydra_mpi_examples_allreduce_over_4_ranks_on_2_nodes(example: str, library: str, tmp_path: Path) -> None:
    """examples/mpi/{intel,mpich}.yaml: the implementation's own mpiexec.hydra, from the environment the runtime's
    image maps to, starts 2 ranks on each pod the hostfile lists, reached over kubetrain's stand-in for ssh."""
    home = tmp_path / "home"
    framework_env("intel-mpi" if example == "intel" else "mpich").images_yaml(home)
    r = subprocess.run(
        [sys.executable, "-m", "kubetrain.cli.main", "run", "--timeout", "4m", "-f",
         str(ROOT / "examples" / "mpi" / f"{example}.yaml")],
        capture_output=True, text=True, env={**os.environ, "KUBETRAIN_HOME": str(home)}, timeout=300,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert f"MPI library: {library}" in r.stdout, r.stdout
    ranks = sorted(re.findall(r"rank (\d)/4 on (\S+): sum of ranks = 6", r.stdout))
    assert [rank for rank, _ in ranks] == ["0", "1", "2", "3"], r.stdout
    job = f"mpi-{example}-allreduce"
    # Two ranks on each pod of the hostfile: the ranks did not all start on the launcher.
    assert sorted(host for _, host in ranks) == [f"{job}-launcher-0-0"] * 2 + [f"{job}-node-0-0"] * 2, r.stdout


@pytest.mark.timeout(900)  # may build the environment first (tests/examples/envs.py)
def test_openmpi_5_reads_the_hostfile_only_when_mpirun_is_told(tmp_path: Path) -> None:
    """OpenMPI 5 ignores the OMPI_MCA_orte_* variables the MPI policy gives the launcher (as Kubeflow Trainer's
    do, kubeflow/trainer#4028): a plain `mpirun` starts its ranks on the launcher alone and the job still ends
    Complete. Naming the hostfile starts them on both pods, through kubetrain's stand-in for ssh (PRRTE's agent)."""
    home = tmp_path / "home"
    framework_env("openmpi5").images_yaml(home)
    work = tmp_path / "work"
    work.mkdir()
    tmp_path.chmod(0o755)
    work.chmod(0o755)  # the runtime's pods run as uid 1000
    shutil.copy(ROOT / "examples" / "mpi" / "allreduce.py", work)
    manifest = (ROOT / "examples" / "mpi" / "trainjob.yaml").read_text()
    plain = work / "plain.yaml"
    plain.write_text(manifest)
    named = work / "named.yaml"
    named.write_text(manifest.replace("command: [mpirun, python", "command: [mpirun, --hostfile, /etc/mpi/hostfile, "
                                      "python").replace("name: mpi-allreduce", "name: mpi-allreduce-hostfile"))
    hosts = {}
    for manifest_file in (plain, named):
        r = subprocess.run(
            [sys.executable, "-m", "kubetrain.cli.main", "run", "--timeout", "4m", "-f", str(manifest_file)],
            capture_output=True, text=True, env={**os.environ, "KUBETRAIN_HOME": str(home)}, timeout=300,
        )
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
        assert "MPI library: Open MPI v5.0.11" in r.stdout, r.stdout
        hosts[manifest_file.stem] = sorted(h for _, h in re.findall(r"rank (\d)/\d on (\S+): sum of ranks", r.stdout))
    assert set(hosts["plain"]) == {"mpi-allreduce-launcher-0-0"}, hosts  # the node pod sat idle
    assert hosts["named"] == ["mpi-allreduce-hostfile-launcher-0-0"] * 2 + ["mpi-allreduce-hostfile-node-0-0"] * 2
