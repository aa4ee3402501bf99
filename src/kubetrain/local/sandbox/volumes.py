"""Pod volumes as host directories, bound at their ``mountPath``s inside the pod sandbox.

``emptyDir`` is per pod; PVCs and JobSet ``volumeClaimPolicies`` are per-TrainJob directories shared by its pods
(and kept after the TrainJob is deleted, like a retained PVC); ``configMap``/``secret`` are materialised from the
compiled objects with their file modes; ``hostPath`` is bound as is, and only below the directories
``security.allowedHostPaths`` of ``$KUBETRAIN_HOME/config.yaml`` allows.

Permissions are the kubelet's: an ``emptyDir`` is mode 0777 (any ``runAsUser`` may write it), and with the pod's
``fsGroup`` every volume but ``hostPath`` is group-owned by it (as root; an ordinary user has only their own
group), group-writable and setgid, so files created there join the group.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local.sandbox.env import MOUNT_WAIT, MissingReference, ObjectIndex, not_found
from kubetrain.local.sandbox.namespaces import Bind


class VolumeError(KubetrainError):
    pass


HOST_PATHS_SETTING = "security.allowedHostPaths"


def _under(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/") or prefix == ""


def check_host_path(path: str, allowed: list[str], where: str, volume: str, config_file: str) -> str:
    """The real path of a hostPath volume (symlinks and ``..`` resolved), if it lies below an allowed directory;
    otherwise ``VolumeError`` naming the volume, the path and the setting."""
    real = os.path.realpath(path)
    if any(_under(real, os.path.realpath(p)) for p in allowed):
        return real
    resolved = f" (resolves to {real})" if real != os.path.normpath(path) else ""
    now = ", ".join(allowed) if allowed else "none"
    suggestion = os.path.dirname(real) if os.path.isfile(real) else real
    raise VolumeError(
        f"{where}.hostPath.path: volume {volume!r} mounts {path}{resolved} from this machine, which is not below "
        f"a directory allowed for hostPath volumes ({HOST_PATHS_SETTING} in {config_file}: {now}). Fix: add it "
        f"to {HOST_PATHS_SETTING} (e.g. `security: {{allowedHostPaths: [{suggestion}]}}`), or use a "
        "persistentVolumeClaim or emptyDir volume instead"
    )


_RW_MASK, _RO_MASK, _DIR_BITS = 0o660, 0o440, 0o2110


def apply_fs_group(root: Path, gid: int | None, *, read_only: bool, policy: str) -> None:
    """The kubelet's volume ownership for ``fsGroup``: every file group-owned by ``gid`` (when it is given, i.e.
    as root), readable (and writable unless ``read_only``) by the group, directories setgid so new files join it.
    ``OnRootMismatch`` skips the walk when the volume's root already has the group and mode."""
    mask = _RO_MASK if read_only else _RW_MASK
    try:
        st = root.stat()
    except OSError:
        return
    want = st.st_mode | mask | (_DIR_BITS if root.is_dir() else 0)
    if policy == "OnRootMismatch" and (gid is None or st.st_gid == gid) and st.st_mode == want:
        return
    todo = [str(root)]
    if root.is_dir():
        for dirpath, dirnames, filenames in os.walk(root):
            todo += [os.path.join(dirpath, n) for n in dirnames + filenames]
    for p in todo:
        try:
            lst = os.lstat(p)
            if gid is not None and lst.st_gid != gid:
                os.lchown(p, -1, gid)
            if os.path.islink(p):
                continue
            extra = mask | (_DIR_BITS if os.path.isdir(p) else 0)
            if lst.st_mode & 0o7777 | extra != lst.st_mode & 0o7777:
                os.chmod(p, (lst.st_mode & 0o7777) | extra)
        except OSError:
            continue  # a file vanishing mid-walk or one the user cannot change stays as it is, as for the kubelet


def _safe_name(name: str) -> str:
    return name.replace("/", "_")


def _project(kind: str, src: dict[str, Any], index: ObjectIndex, dest: Path, where: str, volume: str) -> None:
    """Fill ``dest`` with the object's keys as files. A missing object raises ``MissingReference`` with the
    kubelet's FailedMount text (``MountVolume.SetUp failed for volume "v" : configmap "x" not found``)."""
    name = src.get("secretName") if kind == "Secret" else src.get("name")
    data = index.data(kind, name or "")
    if data is None:
        if src.get("optional"):
            data = {}
        else:
            raise MissingReference(MOUNT_WAIT, f"{volume} : {not_found(kind, name or '')}", where)
    default_mode = int(src.get("defaultMode", 0o644))
    items = src.get("items")
    entries = (
        [(it["key"], it["path"], int(it.get("mode", default_mode))) for it in items]
        if items
        else [(k, k, default_mode) for k in data]
    )
    dest.mkdir(parents=True, exist_ok=True)
    for key, rel, mode in entries:
        if key not in data:
            if src.get("optional"):
                continue
            raise MissingReference(
                MOUNT_WAIT, f"{volume} : configmap references non-existent config key: {key}"
                if kind == "ConfigMap" else f"{volume} : references non-existent secret key: {key}", f"{where}.items"
            )
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.chmod(0o600)
        target.write_bytes(data[key])
        target.chmod(mode)


def pod_volumes(
    spec: dict[str, Any],
    *,
    pod_dir: Path,
    claims_dir: Path,
    claim_templates: set[str],
    index: ObjectIndex,
    where: str,
) -> dict[str, Path]:
    """Host directory (or file) for each volume of the pod, created and filled now."""
    out: dict[str, Path] = {}
    psc = spec.get("securityContext") or {}
    fs_group = psc.get("fsGroup")
    # An ordinary user has one group to give; root gives files the pod's fsGroup like the kubelet.
    chown_gid = fs_group if isinstance(fs_group, int) and os.geteuid() == 0 else None
    policy = str(psc.get("fsGroupChangePolicy") or "Always")
    # 0777 emptyDirs are reachable only through the pod's bind: their host parent is the user's alone.
    (pod_dir / "volumes").mkdir(parents=True, exist_ok=True, mode=0o700)
    owned: list[tuple[Path, bool]] = []
    for i, vol in enumerate(spec.get("volumes") or []):
        name = vol["name"]
        vwhere = f"{where}.volumes[{i}]"
        if "emptyDir" in vol:
            path = pod_dir / "volumes" / _safe_name(name)
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(0o777)
            owned.append((path, False))
        elif "persistentVolumeClaim" in vol:
            claim_name = vol["persistentVolumeClaim"]["claimName"]
            claim = index.claim(claim_name)
            if claim is not None:
                path = _bound_claim(claim, f"{vwhere}.persistentVolumeClaim")
            else:
                # No claim of that name applied: a directory of this TrainJob, as before claims could be applied.
                path = claims_dir / _safe_name(claim_name)
                _claims_parent(claims_dir)
            path.mkdir(parents=True, exist_ok=True)
            owned.append((path, bool(vol["persistentVolumeClaim"].get("readOnly"))))
        elif "configMap" in vol:
            path = pod_dir / "volumes" / _safe_name(name)
            _project("ConfigMap", vol["configMap"], index, path, f"{vwhere}.configMap", _mount(name))
            owned.append((path, True))
        elif "secret" in vol:
            path = pod_dir / "volumes" / _safe_name(name)
            _project("Secret", vol["secret"], index, path, f"{vwhere}.secret", _mount(name))
            owned.append((path, True))
        elif "hostPath" in vol:
            from kubetrain.local import config, paths

            allowed = config.load().security.allowed_host_paths
            path = Path(
                check_host_path(str(vol["hostPath"]["path"]), allowed, vwhere, name, str(paths.config_file()))
            )
            kind = vol["hostPath"].get("type", "")
            if kind == "DirectoryOrCreate":
                path.mkdir(parents=True, exist_ok=True)
            elif not path.exists():
                raise VolumeError(f"{vwhere}.hostPath.path: {path} does not exist on this machine")
        else:
            kinds = sorted(k for k in vol if k != "name")
            raise VolumeError(
                f"{vwhere}: volume type {kinds} is not supported by the local backend "
                "(supported: emptyDir, persistentVolumeClaim, configMap, secret, hostPath)"
            )
        out[name] = path
    # JobSet adds a volume for each volumeClaimPolicies template a container mounts without declaring it.
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for m in c.get("volumeMounts") or []:
            if m["name"] not in out and m["name"] in claim_templates:
                path = claims_dir / _safe_name(m["name"])
                _claims_parent(claims_dir)
                path.mkdir(parents=True, exist_ok=True)
                out[m["name"]] = path
                owned.append((path, False))
    if isinstance(fs_group, int):
        for path, read_only in owned:
            apply_fs_group(path, chown_gid, read_only=read_only, policy=policy)
    return out


def _mount(volume: str) -> str:
    return f'MountVolume.SetUp failed for volume "{volume}"'


def _bound_claim(claim: dict[str, Any], where: str) -> Path:
    """The directory an applied claim is bound to (``kubetrain.local.objects`` binds it)."""
    from kubetrain.local import paths

    meta, spec = claim["metadata"], claim.get("spec") or {}
    if spec.get("volumeMode") == "Block":
        raise VolumeError(
            f"{where}: persistentvolumeclaim {meta['name']!r} asks for volumeMode Block, which the local backend "
            "cannot provide (a claim is a directory here). Fix: use volumeMode: Filesystem"
        )
    root = paths.claim_dir(meta.get("namespace", "default"), meta["name"], meta["uid"])
    _claims_parent(root.parent)
    return root


def _claims_parent(claims_dir: Path) -> None:
    """A new claims directory is the user's alone (group-writable claims must not be reachable by others)."""
    if not claims_dir.exists():
        claims_dir.mkdir(parents=True, exist_ok=True, mode=0o700)


def container_binds(container: dict[str, Any], volumes: dict[str, Path], where: str) -> list[Bind]:
    binds: list[Bind] = []
    for i, m in enumerate(container.get("volumeMounts") or []):
        if m["name"] not in volumes:
            raise VolumeError(
                f"{where}.volumeMounts[{i}].name: no volume {m['name']!r} in the pod (declare it under volumes)"
            )
        src = volumes[m["name"]]
        if m.get("subPath"):
            src = src / m["subPath"]
            if not src.exists():
                src.mkdir(parents=True, exist_ok=True)
        mount_path = m.get("mountPath", "")
        if not os.path.isabs(mount_path):
            raise VolumeError(
                f"{where}.volumeMounts[{i}].mountPath: must be an absolute path, got {mount_path!r}"
            )
        binds.append(Bind(str(src), os.path.normpath(mount_path), bool(m.get("readOnly"))))
    return binds


def claim_template_names(jobset_spec: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for p in jobset_spec.get("volumeClaimPolicies") or []:
        for t in p.get("templates") or []:
            if (t.get("metadata") or {}).get("name"):
                names.add(t["metadata"]["name"])
    return names
