"""Pods in their real image against the same pods in a Python environment (issue #26).

Figures (one run, interleaved, medians):
  * first start of an image: ``kubetrain images load`` (read, verify and unpack every layer), with the image's size
  * a later 2-pod start in the image (command ``true``) / the same TrainJob with images.yaml mapping the image to
    this Python environment; target <= 1.2x, or +0.2 s
  * the quickstart (2 nodes x 2 processes, DDP) in the image / in the environment, when the image has torch (the
    bed's ``localhost/kubetrain-train:dev``: ``--image`` or ``$K8S_HOME/images/train.tar``); target +0.2 s at most
  * disk: bytes each extra pod of one image adds (its writable layer and the kubelet's files); target ~0

Usage: ``.venv/bin/python bench/run_all.py local_images`` (writes its BENCHMARKS.md section), or
``python bench/local_images.py --image train.tar --runs 5 --print-only``. Without a torch image only the small test
image of ``tests/local/images/testimage.py`` is used.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BED_IMAGE = Path(os.environ.get("K8S_HOME", str(Path.home() / "k8s-node"))) / "images" / "train.tar"


def _noop(name: str, image: str, nodes: int) -> str:
    return textwrap.dedent(f"""
        apiVersion: trainer.kubeflow.org/v1alpha1
        kind: TrainJob
        metadata: {{name: {name}}}
        spec:
          runtimeRef: {{name: torch-distributed}}
          trainer: {{image: "{image}", numNodes: {nodes}, command: ["true"]}}
        """)


def _quickstart(image: str) -> str:
    text = (ROOT / "examples" / "quickstart" / "cluster.yaml").read_text()
    return text.replace("  trainer:\n", f"  trainer:\n    image: {image}\n", 1)


def _configmap() -> str:
    code = (ROOT / "examples" / "quickstart" / "train.py").read_text()
    return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: quickstart-code}\ndata:\n  train.py: |\n" + "".join(
        f"    {line}\n" if line else "\n" for line in code.splitlines()
    )


def _disk(path: Path) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        for n in dirnames + filenames:
            try:
                st = os.lstat(os.path.join(dirpath, n))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


class Bench:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.home = work / "home"
        self.env = {**os.environ, "KUBETRAIN_HOME": str(self.home), "PYTHONWARNINGS": "ignore"}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.cli = [sys.executable, "-m", "kubetrain.cli.main"]

    def kubetrain(self, *args: str) -> float:
        t0 = time.perf_counter()
        done = subprocess.run([*self.cli, *args], env=self.env, cwd=self.work, capture_output=True, text=True)
        took = time.perf_counter() - t0
        if done.returncode != 0:
            raise RuntimeError(f"kubetrain {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        return took

    def mapped(self, image: str, to_venv: bool) -> None:
        mapping = self.home / "images.yaml"
        if to_venv:
            mapping.write_text(f'"{image}": {sys.prefix}\n')
        else:
            mapping.unlink(missing_ok=True)

    def run(self, manifest: str, image: str, *, in_image: bool) -> float:
        self.mapped(image, not in_image)
        return self.kubetrain("run", "-q", "--replace", "-f", manifest)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--image", type=Path, default=BED_IMAGE if BED_IMAGE.exists() else None,
                        help="an archive of an image with torch (the bed's training image by default, when built)")
    parser.add_argument("--print-only", action="store_true")
    opts = parser.parse_args(argv or [])
    work = Path(tempfile.mkdtemp(prefix="kubetrain-bench-images-"))
    bench = Bench(work)
    sys.path.insert(0, str(ROOT))
    from tests.local.images.testimage import SmallImage

    small_name = "localhost/kubetrain-test:1"
    small = SmallImage(name=small_name).docker_archive(work / "small.tar")
    archives = [("small test image (dash, coreutils)", small, small_name)]
    torch_image = None
    if opts.image is not None:
        refs = opts.image.with_suffix(".refs")
        torch_image = refs.read_text().split()[0] if refs.exists() else "localhost/kubetrain-train:dev"
        archives.append((f"{torch_image} (Debian 12, torch CPU)", opts.image, torch_image))
    lines = ["## Local pods in their image (`bench/local_images.py`)", ""]
    lines += ["| first start: `kubetrain images load` | archive | unpacked | time |", "|---|---|---|---|"]
    for what, path, _name in archives:
        took = bench.kubetrain("images", "load", "-i", str(path))
        layers = bench.home / "images" / "layers"
        unpacked = sum(_disk(p) for p in layers.iterdir() if p.is_dir())
        lines.append(f"| {what} | {path.stat().st_size / 1e6:.0f} MB | {unpacked / 1e6:.0f} MB (all loaded so far) "
                     f"| {took:.1f} s |")
    run_image = torch_image or small_name
    (work / "noop.yaml").write_text(_noop("noop", run_image, 2))
    cases = {"2 pods, `true`: image": lambda: bench.run("noop.yaml", run_image, in_image=True),
             "2 pods, `true`: environment": lambda: bench.run("noop.yaml", run_image, in_image=False)}
    if torch_image is not None:
        (work / "cm.yaml").write_text(_configmap())
        bench.kubetrain("apply", "-f", "cm.yaml")
        (work / "quickstart.yaml").write_text(_quickstart(torch_image))
        cases["quickstart 2x2: image"] = lambda: bench.run("quickstart.yaml", torch_image, in_image=True)
        cases["quickstart 2x2: environment"] = lambda: bench.run("quickstart.yaml", torch_image, in_image=False)
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for fn in cases.values():
        fn()  # warm-up: page cache, .pyc, the compile cache
    for i in range(opts.runs):
        for k, fn in cases.items():
            samples[k].append(fn())
        print(f"run {i + 1}/{opts.runs} done", file=sys.stderr)
    med = {k: statistics.median(v) for k, v in samples.items()}
    lines += ["", f"Later starts: median wall time of `kubetrain run` over {opts.runs} interleaved runs, after one "
              f"warm-up; {os.cpu_count()} cores; the image is {run_image}. \"environment\": the same TrainJob with "
              "images.yaml mapping the image to this Python environment (the fast path).", "",
              "| case | median (s) | min (s) | max (s) |", "|---|---|---|---|"]
    lines += [f"| {k} | {med[k]:.2f} | {min(v):.2f} | {max(v):.2f} |" for k, v in samples.items()]
    noop_i, noop_e = med["2 pods, `true`: image"], med["2 pods, `true`: environment"]
    lines += ["", "- a later pod start in the image / in the environment (2 pods, `true`): "
              f"**{noop_i / noop_e:.2f}x**, {noop_i - noop_e:+.2f} s (target <= 1.2x, or +0.2 s)"]
    if torch_image is not None:
        q_i, q_e = med["quickstart 2x2: image"], med["quickstart 2x2: environment"]
        lines.append(f"- the quickstart 2x2 in the image / in the environment: **{q_i / q_e:.2f}x, {q_i - q_e:+.2f} s**"
                     " (target +0.2 s at most)")
    else:
        lines.append("- the quickstart 2x2: not measured (no image with torch: build the bed's training image)")
    # Disk: the same TrainJob with 1 and with 4 pods, in the image and in the environment; what extra pods add.
    per_pod = {}
    for in_image in (True, False):
        usage = {}
        for n in (1, 4):
            name = f"disk{n}{'i' if in_image else 'e'}"
            (work / f"{name}.yaml").write_text(_noop(name, run_image, n))
            bench.run(f"{name}.yaml", run_image, in_image=in_image)
            usage[n] = sum(_disk(p) for p in (bench.home / "trainjobs" / "default").glob(f"{name}-*"))
        per_pod[in_image] = (usage[4] - usage[1]) / 3
    lines.append(f"- disk per extra pod of one image: **{per_pod[True] / 1e3:.0f} kB** in the image, "
                 f"{per_pod[False] / 1e3:.0f} kB in the environment (its log and scratch): the image's layers are "
                 "shared, a pod adds its writable layer (the mount points of /etc/hosts, resolv.conf, hostname, "
                 "/dev, /proc, /sys and the tools) and those files (target ~0)")
    lines.append(f"- machine load average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
                 "(other sessions' work included: the pairs are interleaved so it hits both sides alike)")
    text = "\n".join(lines) + "\n"
    subprocess.run(["chmod", "-R", "u+rwx", str(work)], check=False, capture_output=True)
    shutil.rmtree(work, ignore_errors=True)
    sys.stdout.write(text)
    if not opts.print_only:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _report import write_section

        write_section("local_images", text, after="local_launch")


if __name__ == "__main__":
    main(sys.argv[1:])
