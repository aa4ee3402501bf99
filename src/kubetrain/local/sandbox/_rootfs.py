"""Mounts a container's root filesystem from its image's layers, then runs bubblewrap on it (run as a script:
stdlib only, started with ``-S -E``, between ``nsenter`` and ``bwrap``).

bubblewrap 0.8 (Debian 12) has no ``--overlay``, so this step makes the mount itself: a mount namespace of its own
(in a user namespace of its own too, when not root: it maps only the invoking user's uid and gid, as every other
namespace of a local pod does), an overlayfs whose lower layers are the image's unpacked layers (read-only, shared
by every container of the image) and whose upper layer is this container's own, then ``exec bwrap`` with
``--bind <merged> /``. The mount lives exactly as long as the container's namespaces: nothing to unmount after a
crash. Linux lets an ordinary user mount overlayfs in a user namespace since 5.11.

Usage: ``python -S -E _rootfs.py SPEC -- bwrap ...`` where SPEC is JSON: ``{"layers_root", "layers" (names under
layers_root, top first), "upper", "work", "merged", "path" (where to find bwrap)}``.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys

from _userns import map_own_ids  # a sibling file: this script runs with -S, outside the package

CLONE_NEWUSER = 0x10000000
CLONE_NEWNS = 0x00020000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
EXIT_SETUP = 125  # like a container runtime that could not create the container


def _fail(message: str) -> None:
    sys.stderr.write(f"kubetrain: {message}\n")
    sys.stderr.flush()
    os._exit(EXIT_SETUP)


def main() -> None:
    spec = json.loads(sys.argv[1])
    if sys.argv[2] != "--":
        _fail("usage: _rootfs.py SPEC -- COMMAND...")
    argv = sys.argv[3:]
    libc = ctypes.CDLL(None, use_errno=True)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWNS | (CLONE_NEWUSER if uid != 0 else 0)) != 0:
        _fail(f"could not make the container's mount namespace: {os.strerror(ctypes.get_errno())}")
    if uid != 0:
        try:
            map_own_ids(uid, gid)
        except OSError as exc:
            _fail(f"could not map uid {uid} into the container's user namespace: {exc.strerror}")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        _fail(f"could not make the container's mounts private: {os.strerror(ctypes.get_errno())}")
    # Layer names relative to their directory keep the options short: 60 layers fit the kernel's page-size limit.
    os.chdir(spec["layers_root"])
    options = f"lowerdir={':'.join(spec['layers'])},upperdir={spec['upper']},workdir={spec['work']},userxattr"
    if libc.mount(b"overlay", spec["merged"].encode(), b"overlay", 0, options.encode()) != 0:
        err = ctypes.get_errno()
        _fail(
            f"could not mount the image's root filesystem (overlayfs: {os.strerror(err)}); this needs Linux 5.11 "
            "or later without root, and a filesystem for $KUBETRAIN_HOME that supports user extended attributes"
        )
    os.chdir("/")
    for d in spec["path"].split(":"):
        exe = os.path.join(d, argv[0])
        if d and os.access(exe, os.X_OK):
            os.execv(exe, argv)
    _fail(f"{argv[0]} not found in {spec['path']}")


if __name__ == "__main__":
    main()
