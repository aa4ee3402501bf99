"""Where the local backend keeps its state: ``$KUBETRAIN_HOME`` (default ``~/.kubetrain``)."""

from __future__ import annotations

import os
from pathlib import Path

from kubetrain.api.errors import KubetrainError

_checked: set[Path] = set()


class HomeError(KubetrainError):
    pass


def home() -> Path:
    """The state directory, created on first use. Raises ``HomeError`` (with the fix) when it cannot be used by
    this user, before anything is written."""
    root = Path(os.environ.get("KUBETRAIN_HOME") or Path.home() / ".kubetrain").expanduser().resolve()
    if root in _checked:
        return root
    where = "KUBETRAIN_HOME" if os.environ.get("KUBETRAIN_HOME") else "the default KUBETRAIN_HOME"
    try:
        root.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise HomeError(
            f"{where} {root} cannot be created: {exc.strerror}. Fix: set KUBETRAIN_HOME to a directory you can "
            "write, e.g. `export KUBETRAIN_HOME=$HOME/.kubetrain`"
        ) from None
    if not root.is_dir():
        raise HomeError(f"{where} {root} is not a directory. Fix: set KUBETRAIN_HOME to a directory")
    if not os.access(root, os.W_OK | os.X_OK):
        st = root.stat()
        owner = "root" if st.st_uid == 0 else f"uid {st.st_uid}"
        raise HomeError(
            f"{where} {root} is owned by {owner} and not writable by you (uid {os.geteuid()}); it was probably "
            f"created by running kubetrain with sudo. Fix: `sudo chown -R {os.geteuid()}:{os.getegid()} {root}`, "
            "or set KUBETRAIN_HOME to a directory you own"
        )
    _checked.add(root)
    return root


def db_path() -> Path:
    return home() / "state.db"


def trainjob_dir(namespace: str, name: str, uid: str) -> Path:
    """Per-TrainJob files (logs, pod scratch, materialised volumes). Keyed by uid so a re-created job with the
    same name never overwrites the logs of the previous one."""
    return home() / "trainjobs" / namespace / f"{name}-{uid[:8]}"


def claims_dir(namespace: str, name: str) -> Path:
    """PVCs of a TrainJob. Keyed by name (not uid) like a PVC outliving its pods: user data survives a delete."""
    return home() / "volumes" / namespace / name


def claim_dir(namespace: str, name: str, uid: str) -> Path:
    """The directory an applied PersistentVolumeClaim is bound to (its uid keeps a re-created claim apart)."""
    return home() / "claims" / namespace / f"{name}-{uid[:8]}"


def container_log(pod_log: Path, container: str | None, default: str | None) -> Path:
    """The log file of one container of a pod whose default container writes ``pod_log`` (``node-0-0.log``): the
    others write ``node-0-0.<container>.log`` beside it (container names hold no dot)."""
    if container is None or container == default:
        return pod_log
    return pod_log.with_name(f"{pod_log.name[: -len('.log')]}.{container}.log")


def supervisor_log() -> Path:
    return home() / "supervisor.log"


def config_file() -> Path:
    return home() / "config.yaml"


def images_dir() -> Path:
    """The image store: unpacked layers, image configs and names (``kubetrain.local.images.store``)."""
    return home() / "images"


def remove_tree(path: Path) -> None:
    """Remove a directory tree, including what overlayfs and images leave unwritable or unreadable to their owner
    (overlayfs's ``work/work`` is mode 0000, an image may hold read-only directories): such directories are made
    accessible to their owner and the removal tried again. What cannot be removed at all is left in place."""
    import shutil
    import stat

    def fix(_func: object, failed: str, _exc: object) -> None:
        parent = os.path.dirname(failed)
        for p in (parent, failed):
            try:
                st = os.lstat(p)
                if stat.S_ISDIR(st.st_mode):
                    os.chmod(p, st.st_mode | stat.S_IRWXU)
            except OSError:
                pass
        try:
            if os.path.isdir(failed) and not os.path.islink(failed):
                shutil.rmtree(failed, ignore_errors=True)
            else:
                os.unlink(failed)
        except OSError:
            pass

    if not os.path.lexists(path):
        return
    shutil.rmtree(path, onerror=fix)
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=True)
