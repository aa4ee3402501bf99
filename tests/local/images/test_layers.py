"""Unpacking one layer: overlayfs's whiteouts, entries that would leave the layer, corrupt and truncated input."""

from __future__ import annotations

import gzip
import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from kubetrain.local.images.layers import OPAQUE_XATTR, LayerError, unpack

from .testimage import _digest, _dir, _file, _info, _tar


def _unpack(data: bytes, dest: Path) -> tuple[str, str, int]:
    dest.mkdir()
    return unpack(io.BytesIO(data), dest, what="layer 1/1")


def test_whiteouts_become_overlayfs_whiteouts_and_opaque_directories(tmp_path: Path) -> None:
    layer = _tar([_dir("etc"), (_info("etc/.wh.passwd"), b""), _dir("opt"), (_info("opt/.wh..wh..opq"), b""),
                  _file("opt/kept", b"k")])
    blob, diff_id, size = _unpack(layer, tmp_path / "l")
    st = os.lstat(tmp_path / "l" / "etc" / "passwd")
    assert stat.S_ISCHR(st.st_mode) and st.st_rdev == 0
    assert os.getxattr(tmp_path / "l" / "opt", OPAQUE_XATTR) == b"y"
    assert not (tmp_path / "l" / "opt" / ".wh..wh..opq").exists()
    assert blob == diff_id == _digest(layer) and size == len(layer)


def test_gzip_layers_give_both_digests_and_keep_modes_and_times(tmp_path: Path) -> None:
    layer = _tar([_dir("bin", 0o555), _file("bin/tool", b"#!/bin/sh\n", 0o4755), _file("ro", b"x", 0o400)])
    gz = gzip.compress(layer)
    blob, diff_id, _ = _unpack(gz, tmp_path / "l")
    assert blob == _digest(gz) and diff_id == _digest(layer)
    tool = (tmp_path / "l" / "bin" / "tool").stat()
    assert stat.S_IMODE(tool.st_mode) == 0o4755 and tool.st_mtime == 1_700_000_000
    assert stat.S_IMODE((tmp_path / "l" / "bin").stat().st_mode) == 0o555


@pytest.mark.parametrize(
    ("entries", "said"),
    [
        ([_file("../escape", b"x")], "points outside the layer"),
        ([(_link := tarfile.TarInfo("out"), None), _file("out/passwd", b"x")], "symlink out of the layer"),
    ],
)
def test_entries_that_would_leave_the_layer_are_refused(tmp_path: Path, entries: list, said: str) -> None:
    for ti, _ in entries:
        if ti.name == "out":
            ti.type, ti.linkname = tarfile.SYMTYPE, str(tmp_path / "outside")
    (tmp_path / "outside").mkdir()
    with pytest.raises(LayerError, match=said):
        _unpack(_tar(entries), tmp_path / "l")
    assert not (tmp_path / "outside" / "passwd").exists()


@pytest.mark.parametrize("cut", ["truncated-gzip", "garbage"])
def test_corrupt_or_truncated_layers_are_one_clear_error(tmp_path: Path, cut: str) -> None:
    layer = gzip.compress(_tar([_file("a", os.urandom(300_000))]))
    data = layer[: len(layer) // 2] if cut == "truncated-gzip" else b"\x1f\x8b" + os.urandom(5000)
    with pytest.raises(LayerError, match=r"corrupt or truncated.*export the image again"):
        _unpack(data, tmp_path / "l")
