"""An image's root filesystem as its pods will see it, read straight from its unpacked layers (no mount needed):
the file a path resolves to (whiteouts, opaque directories and symlinks inside the image honoured), its users and
groups, and what the image config says a container runs (Entrypoint/Cmd with the kubelet's rules, Env,
WorkingDir, User)."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local.images.layers import OPAQUE_XATTR
from kubetrain.local.images.store import StoredImage

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_MAX_LINKS = 40


class ImageConfigError(KubetrainError):
    pass


def _whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _opaque(path: str) -> bool:
    try:
        return os.getxattr(path, OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False


@dataclass(frozen=True)
class ImageUser:
    """Who a container runs as by default: the image's ``User`` resolved against its own /etc/passwd."""

    uid: int
    gid: int
    name: str | None  # the name the image gave, when it gave a name
    numeric: bool  # the image named a uid, so ``runAsNonRoot`` can be checked


class ImageRoot:
    def __init__(self, image: StoredImage) -> None:
        self.image = image
        self.layers = [str(p) for p in reversed(image.layer_dirs())]  # top first
        self.config = image.run_config

    def _entry(self, rel: str) -> str | None:
        """The host path of ``rel`` (no leading /, no symlink resolution of its last part) in the topmost layer
        that has it, or None when absent or whited out."""
        parts = rel.split("/")
        for layer in self.layers:
            path = os.path.join(layer, rel)
            try:
                st = os.lstat(path)
            except OSError:
                # An opaque directory (or a whiteout) on the way hides the layers below.
                if any(self._hides(layer, parts[:i]) for i in range(1, len(parts))):
                    return None
                continue
            return None if _whiteout(st) else path
        return None

    @staticmethod
    def _hides(layer: str, parts: list[str]) -> bool:
        p = os.path.join(layer, *parts)
        try:
            st = os.lstat(p)
        except OSError:
            return False
        return _whiteout(st) or (stat.S_ISDIR(st.st_mode) and _opaque(p)) or not stat.S_ISDIR(st.st_mode)

    def resolve(self, path: str) -> str | None:
        """The host file that ``path`` (absolute, inside the image) is, following the image's symlinks."""
        todo = [p for p in path.split("/") if p and p != "."]
        done: list[str] = []
        hops = 0
        while todo:
            part = todo.pop(0)
            if part == "..":
                if done:
                    done.pop()
                continue
            rel = "/".join([*done, part])
            host = self._entry(rel)
            if host is None:
                return None
            if os.path.islink(host):
                hops += 1
                if hops > _MAX_LINKS:
                    return None
                target = os.readlink(host)
                if target.startswith("/"):
                    done = []
                todo = [p for p in target.split("/") if p and p != "."] + todo
                continue
            done.append(part)
        return self._entry("/".join(done)) if done else (self.layers[0] if self.layers else None)

    def read(self, path: str) -> str | None:
        host = self.resolve(path)
        if host is None or not os.path.isfile(host):
            return None
        try:
            return Path(host).read_text(errors="replace")
        except OSError:
            return None

    def _table(self, path: str) -> list[list[str]]:
        return [line.split(":") for line in (self.read(path) or "").splitlines() if line and not line.startswith("#")]

    def passwd_entry(self, *, uid: int | None = None, name: str | None = None) -> list[str] | None:
        for row in self._table("/etc/passwd"):
            if len(row) >= 6 and ((name is not None and row[0] == name) or (uid is not None and row[2] == str(uid))):
                return row
        return None

    def group_id(self, name: str) -> int | None:
        for row in self._table("/etc/group"):
            if len(row) >= 3 and row[0] == name and row[2].isdigit():
                return int(row[2])
        return None

    def groups_of(self, user: str | None, gid: int) -> list[int]:
        """Supplementary groups the image's /etc/group gives ``user`` (containerd adds them by default)."""
        if not user:
            return []
        out = []
        for row in self._table("/etc/group"):
            if len(row) >= 4 and row[2].isdigit() and user in row[3].split(",") and int(row[2]) != gid:
                out.append(int(row[2]))
        return out

    def home_of(self, uid: int) -> str:
        row = self.passwd_entry(uid=uid)
        return row[5] if row and row[5] else "/"

    def name_of(self, uid: int) -> str | None:
        row = self.passwd_entry(uid=uid)
        return row[0] if row else None

    def user(self) -> ImageUser:
        """The image's ``User`` (``uid``, ``uid:gid``, ``name``, ``name:group``); root when it names none."""
        spec = str(self.config.get("User") or "").strip()
        if not spec:
            return ImageUser(0, 0, "root", True)
        user, _, group = spec.partition(":")
        if user.isdigit():
            uid, numeric = int(user), True
            row = self.passwd_entry(uid=uid)
            name = row[0] if row else None
            gid = int(row[3]) if row and row[3].isdigit() else 0
        else:
            row = self.passwd_entry(name=user)
            if row is None or not row[2].isdigit():
                raise ImageConfigError(
                    f"unable to find user {user}: no matching entries in passwd file of image "
                    f"{self.image.names[0] if self.image.names else self.image.id}"
                )
            uid, numeric, name = int(row[2]), False, user
            gid = int(row[3]) if row[3].isdigit() else 0
        if group:
            if group.isdigit():
                gid = int(group)
            else:
                found = self.group_id(group)
                if found is None:
                    raise ImageConfigError(f"unable to find group {group}: no matching entries in group file")
                gid = found
        return ImageUser(uid, gid, name, numeric)

    def env(self) -> dict[str, str]:
        """The image's ``Env`` (with the default PATH when it sets none, as container runtimes add it)."""
        out: dict[str, str] = {}
        for item in self.config.get("Env") or []:
            key, sep, value = str(item).partition("=")
            if sep:
                out[key] = value
        out.setdefault("PATH", DEFAULT_PATH)
        return out

    def working_dir(self) -> str:
        return str(self.config.get("WorkingDir") or "/")

    def command(self, container: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(entrypoint part, args part) before ``$(VAR)`` expansion, by the kubelet's rules: ``command`` replaces
        the image's Entrypoint (and then its Cmd is not used), ``args`` replace its Cmd."""
        command = list(container.get("command") or [])
        args = list(container.get("args") or [])
        if command:
            return command, args
        entrypoint = [str(x) for x in self.config.get("Entrypoint") or []]
        if args:
            return entrypoint, args
        return entrypoint, [str(x) for x in self.config.get("Cmd") or []]

    def which(self, program: str, path_env: str, workdir: str) -> tuple[str | None, str | None]:
        """(the path inside the image, the host file) ``program`` runs as, searching ``path_env`` like execvp; a
        program that is found but not executable is returned with its host file so the caller can say so."""
        if "/" in program:
            cands = [program if program.startswith("/") else os.path.normpath(os.path.join(workdir, program))]
        else:
            cands = [os.path.normpath(os.path.join(workdir, d, program)) for d in path_env.split(":")]
        first_found: tuple[str | None, str | None] = (None, None)
        for cand in cands:
            host = self.resolve(cand)
            if host is not None and os.path.isfile(host):
                if os.stat(host).st_mode & 0o111:
                    return cand, host
                first_found = first_found if first_found[0] else (cand, host)
        return first_found

    def has_dir(self, path: str) -> bool:
        host = self.resolve(path)
        return host is not None and os.path.isdir(host)
