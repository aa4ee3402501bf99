"""How log text reaches the user: as written when piped; on a terminal, progress bars live and lines as the
terminal would leave them; prefixes; the live status area; Ctrl-C drops the backlog."""

from __future__ import annotations

import io

from kubetrain.cli.logview import LogView


def view(tty: bool, prefix: bool | None = None) -> tuple[LogView, io.BytesIO]:
    out = io.BytesIO()
    return LogView(out, tty=tty, prefix=prefix), out


def test_piped_single_step_is_byte_for_byte() -> None:
    v, out = view(tty=False)
    for chunk in (" 10%|#  |\r", " 50%|### |\r100%|####|\n", "done\nunfinished"):
        v.write("node-0-0", chunk)
    v.close()
    assert out.getvalue().decode() == " 10%|#  |\r 50%|### |\r100%|####|\ndone\nunfinished"


def test_piped_several_steps_get_prefixes_on_whole_lines() -> None:
    v, out = view(tty=False)
    v.write("node-0-0", "")
    v.write("node-1-0", "")
    v.write("node-0-0", "a\nhalf")
    v.write("node-1-0", "b\n")
    v.write("node-0-0", " done\n")
    v.write("node-1-0", "tail")
    v.close()
    assert out.getvalue().decode().splitlines() == [
        "[node-0/0] a",
        "[node-1/0] b",
        "[node-0/0] half done",
        "[node-1/0] tail",
    ]
    assert v.lines == 4


def test_terminal_shows_the_progress_bar_live_and_its_last_state_once() -> None:
    v, out = view(tty=True)
    v.write("node-0-0", "epoch 1\n 10%|#  |\r")
    v.flush(now=10.0)
    first = out.getvalue().decode()
    assert first.startswith("epoch 1\n") and first.endswith(" 10%|#  |")  # live, without a newline
    v.write("node-0-0", " 60%|#####|\r")
    v.flush(now=20.0)
    assert out.getvalue().decode().endswith("\r\x1b[J 60%|#####|")  # redrawn in place
    v.write("node-0-0", "100%|######|\nepoch 2\n")
    v.close()
    screen = out.getvalue().decode()
    assert screen.endswith("\r\x1b[J100%|######|\nepoch 2\n")
    assert "\r 10%" not in screen.split("\x1b[J")[-1]  # the finished line is its last state only


def test_terminal_footer_is_dim_cut_to_the_width_and_gone_at_the_end() -> None:
    v, out = view(tty=True)
    v._width, v._width_at = 30, 1e18  # a 30-column terminal
    v.set_footer(["trainjob default/x: Pending (ImagePullBackOff: node-0-0 Pending: Back-off pulling image)"])
    v.write("node-0-0", "log line\n")
    v.flush(now=5.0)
    text = out.getvalue().decode()
    assert "log line\n\x1b[2mtrainjob default/x: Pending …\x1b[0m" in text  # 29 columns: never wraps
    v.close()
    assert out.getvalue().decode().endswith("\r\x1b[J")


def test_abort_drops_the_backlog() -> None:
    v, out = view(tty=False, prefix=True)
    v.write("node-0-0", "x\n" * 10)  # buffered, not yet flushed (fewer than 64 KiB, within 30 ms)
    v._last_flush = float("inf")
    v.write("node-0-0", "y\n")
    v.abort()
    v.flush()
    assert b"y" not in out.getvalue()


def test_nothing_piles_up_in_memory_whatever_the_mode() -> None:
    for tty, prefix in ((False, None), (False, True), (True, None)):
        v, out = view(tty=tty, prefix=prefix)
        chunk = "x" * 99 + "\n"
        for _ in range(2000):  # ~200 KB per write, 400 MB in all if it were kept
            v.write("node-0-0", chunk * 2000)
            assert v._buf_len <= 64 * 1024 + len(chunk) * 2000 + 64
            out.seek(0)
            out.truncate()
