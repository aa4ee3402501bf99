"""Mapping the invoking user's own uid and gid (to themselves) into a user namespace just made with ``unshare``:
what every user namespace of the local backend maps, so nothing inside gains rights over files the user could not
write. Stdlib only: imported by the scripts that run outside the package (``_nsholder``, ``_rootfs``)."""

from __future__ import annotations


def map_own_ids(uid: int, gid: int) -> None:
    """Raises ``OSError`` when the kernel refuses the mapping."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")
