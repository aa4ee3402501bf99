"""``kubetrain logs`` at size: terminal rendering speed, memory on a large log, and how fast Ctrl-C stops it.

1. Rendering: 300,000 training-log lines (64 KiB chunks, as the backends yield them) through the CLI's
   ``LogView`` into a pseudo-terminal drained by a reader thread, against the per-line printing the CLI used
   before (``click.echo`` per line, and a rich ``Console.print`` per line as ``run`` did), in the same run.
   Target: >= 50,000 lines/s on a terminal.
2. Memory: ``kubetrain logs`` (a real process, local backend) of a ~300 MB log to /dev/null: peak RSS against
   the same command on a 3 MB log (constant memory: the ratio stays near 1), and throughput against ``cat``.
3. Ctrl-C: the same command writing into a terminal that is read slowly (a backlog builds up); time from SIGINT
   to exit.
"""

from __future__ import annotations

import os
import pty
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import write_section

LINES = 300_000
LINE = "epoch 3 step {i:>7} loss 0.{i:06d} lr 3.0e-04 grad_norm 1.2345 tokens/s 181234.5 mem 12.3GiB"


def chunks(lines: int, steps: int = 1, progress: bool = False) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    buf: list[str] = []
    size = 0
    for i in range(lines):
        step = f"node-{i % steps}-0"
        text = LINE.format(i=i)
        if progress and i % 10 == 0:
            text = f" 10%|#         | 1/10\r 50%|#####     | 5/10\r{text}"
        buf.append(text + "\n")
        size += len(text) + 1
        if size >= 64 * 1024 or (steps > 1 and len(buf) >= 50):
            out.append((step, "".join(buf)))
            buf, size = [], 0
    if buf:
        out.append(("node-0-0", "".join(buf)))
    return out


class Pty:
    """A pseudo-terminal whose other end is read (and discarded) by a thread, optionally slowly."""

    def __init__(self, rate: float | None = None) -> None:
        self.master, self.slave = pty.openpty()
        self.rate = rate
        self.received = 0
        self._stop = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self) -> None:
        while not self._stop:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.received += len(data)
            if self.rate:
                time.sleep(len(data) / self.rate)

    def close(self) -> None:
        self._stop = True
        os.close(self.slave)
        self.thread.join(5)
        os.close(self.master)


def rate(fn: Callable[[int], None], lines: int) -> float:
    term = Pty()
    try:
        t0 = time.perf_counter()
        fn(term.slave)
        return lines / (time.perf_counter() - t0)
    finally:
        term.close()


def logview(data: list[tuple[str, str]]) -> Callable[[int], None]:
    from kubetrain.cli.logview import LogView

    def go(fd: int) -> None:
        view = LogView(fd, tty=True, prefix=None)
        for step, text in data:
            view.write(step, text)
        view.close()

    return go


def click_per_line(data: list[tuple[str, str]]) -> Callable[[int], None]:
    import click

    def go(fd: int) -> None:
        with os.fdopen(os.dup(fd), "w", buffering=1) as f:  # line-buffered, like stdout on a terminal
            for _, text in data:
                for line in text.splitlines():
                    click.echo(line, file=f)

    return go


def rich_per_line(data: list[tuple[str, str]]) -> Callable[[int], None]:
    from rich.console import Console

    def go(fd: int) -> None:
        with os.fdopen(os.dup(fd), "w", buffering=1) as f:
            console = Console(file=f, force_terminal=True, highlight=False)
            for _, text in data:
                for line in text.splitlines():
                    console.print(line, markup=False, highlight=False, soft_wrap=True)

    return go


# -- a local TrainJob whose log is a file of the size we want --------------------------------------------------
def local_job(home: Path, log_bytes: int) -> None:
    os.environ["KUBETRAIN_HOME"] = str(home)
    from kubetrain.local.store.db import PodRow, Store

    store = Store()
    tj = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "big", "namespace": "default", "uid": "u"},
        "spec": {"runtimeRef": {"name": "torch-distributed"}},
        "status": {
            "conditions": [
                {
                    "type": "Complete",
                    "status": "True",
                    "reason": "Done",
                    "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        },
    }
    store.put_trainjob(tj, [], str(home))
    log = home / "big.log"
    line = (LINE.format(i=1) + "\n").encode()
    block = line * (1024 * 1024 // len(line))
    with open(log, "wb") as f:
        written = 0
        while written < log_bytes:
            f.write(block)
            written += len(block)
    store.put_pod(PodRow("default", "big", "node-0-0", "node", "Succeeded", None, None, 0, 0, None, str(log)))
    store.close()


def run_logs(home: Path, stdout: int) -> tuple[float, float]:
    """Seconds and peak RSS (MiB) of ``kubetrain logs big`` writing to ``stdout``."""
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        os.dup2(stdout, 1)
        os.execve(sys.executable, [sys.executable, "-m", "kubetrain.cli.main", "logs", "big"], env)
    _, status, usage = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return time.perf_counter() - t0, usage.ru_maxrss / 1024


def ctrl_c_latency(home: Path) -> float:
    term = Pty(rate=2 * 1024 * 1024)  # a slow terminal: 2 MB/s, the command produces far more
    env = {**os.environ, "KUBETRAIN_HOME": str(home)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "kubetrain.cli.main", "logs", "big"],
        stdout=term.slave,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    time.sleep(2.0)
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    took = time.perf_counter() - t0
    term.close()
    return took


def main() -> str:
    single = chunks(LINES)
    multi = chunks(LINES, steps=4)
    bars = chunks(LINES, progress=True)
    base_lines = 30_000  # the per-line baselines are slow: time a tenth and report lines/s
    small = chunks(base_lines)
    rows = []
    click_rate = rate(click_per_line(small), base_lines)
    rich_rate = rate(rich_per_line(small), base_lines)
    for label, data in (
        ("1 step", single),
        ("4 steps, [step/rank] prefixes", multi),
        ("1 step, 10% progress-bar lines", bars),
    ):
        r = rate(logview(data), LINES)
        rows.append(f"| LogView, {label} | {r:,.0f} | {r / click_rate:.1f}× | {r / rich_rate:.1f}× |")
    rows.append(f"| baseline: click.echo per line | {click_rate:,.0f} | 1.0× | {click_rate / rich_rate:.1f}× |")
    rows.append(f"| baseline: rich Console.print per line | {rich_rate:,.0f} | {rich_rate / click_rate:.2f}× | 1.0× |")
    one = float(rows[0].split("|")[2].replace(",", ""))

    with tempfile.TemporaryDirectory() as tmp:
        big, little = Path(tmp) / "big", Path(tmp) / "little"
        big.mkdir()
        little.mkdir()
        local_job(big, 300 * 1024 * 1024)
        local_job(little, 3 * 1024 * 1024)
        with open(os.devnull, "wb") as null:
            t_big, rss_big = run_logs(big, null.fileno())
            _, rss_little = run_logs(little, null.fileno())
            t0 = time.perf_counter()
            subprocess.run(["cat", str(big / "big.log")], stdout=null, check=True)
            t_cat = time.perf_counter() - t0
        size_mb = (big / "big.log").stat().st_size / 1e6
        stop = ctrl_c_latency(big)

    md = [
        "## Logs (`bench/log_render.py`)",
        "",
        f"Rendering {LINES:,} lines (~95 characters) through the CLI's `LogView` into a pseudo-terminal drained by "
        "a reader thread; baselines print one line at a time the way the CLI did before, in the same run. A "
        "terminal emulator's own drawing is not included (there is none here): what is measured is how fast "
        "kubetrain hands lines to the terminal, and that it writes few, large pieces instead of one per line.",
        "",
        "| renderer | lines/s | × click.echo | × rich |",
        "|---|---:|---:|---:|",
        *rows,
        "",
        f"- Target ≥ 50,000 lines/s on a terminal: **{one:,.0f}** ({'met' if one >= 50_000 else 'NOT met'}).",
        f"- `kubetrain logs` of a {size_mb:,.0f} MB local log to /dev/null: peak RSS **{rss_big:.0f} MiB** vs "
        f"{rss_little:.0f} MiB for a 3 MB log (×{rss_big / rss_little:.2f}: constant memory); "
        f"{size_mb / t_big:,.0f} MB/s, {t_cat / t_big:.2f}× the speed of `cat` ({size_mb / t_cat:,.0f} MB/s).",
        f"- Ctrl-C while a slow terminal (2 MB/s) lags behind the log: the command exits **{stop * 1000:.0f} ms** "
        "after SIGINT.",
    ]
    text = "\n".join(md)
    write_section("logs", text)
    print(text)
    return text


if __name__ == "__main__":
    main()
