"""A local container's ``securityContext``: who it runs as, its capabilities, its root filesystem.

The pod and container fields are merged as the kubelet does (the container's ``runAsUser``, ``runAsGroup`` and
``runAsNonRoot`` win over the pod's; ``fsGroup`` and ``supplementalGroups`` are the pod's; ``capabilities``,
``privileged``, ``readOnlyRootFilesystem`` and ``allowPrivilegeEscalation`` are the container's), then applied in
one of two ways:

- **as an ordinary user**, inside the pod's own user namespace (bubblewrap's): ``runAsUser``/``runAsGroup`` are the
  ids the process sees, both mapped to the invoking user's own uid and gid, so files it creates belong to that user
  on the host and it can never write what that user could not. Capabilities exist only inside that namespace.
  Only one gid can be mapped without root, so ``fsGroup``/``supplementalGroups`` other than the pod's gid cannot be
  granted (``Security.unmapped_groups`` says which; the supervisor reports them).
- **as root**, with the real ids, as a kubelet would: ``runAsUser: 1000`` is host uid 1000 with exactly its rights
  (never root's), its groups are set with ``setgroups``, and the capability bounding set is cut to the container's.

The last step of every container is ``setpriv`` (util-linux) inside the sandbox, which sets the ids, groups and
capability sets and then executes the command, so a non-root process ends with no effective capabilities and a
bounding set equal to the container's, as under containerd.
"""

from __future__ import annotations

import functools
import os
import pwd
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubetrain.api.errors import KubetrainError
from kubetrain.local.sandbox.programs import which

if TYPE_CHECKING:
    from kubetrain.local.images.rootfs import ImageRoot

# Linux capabilities by number (capability.h); /proc/<pid>/status shows them as bit masks.
ALL_CAPS: tuple[str, ...] = (
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
    "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
    "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
    "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
    "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
    "CHECKPOINT_RESTORE",
)  # fmt: skip

# What a container gets when its securityContext names no capabilities: containerd's (and CRI-O's) default set.
DEFAULT_CAPS: frozenset[str] = frozenset(
    {
        "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID", "SETFCAP",
        "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
    }
)  # fmt: skip

WAITING_REASON = "CreateContainerConfigError"

PRIVILEGED_ENV = "KUBETRAIN_ALLOW_PRIVILEGED"
"""Set to ``1`` by ``kubetrain run/apply --allow-privileged``: privileged containers may be submitted (root only)."""


class SecurityContextError(KubetrainError):
    """A securityContext this machine cannot honour (the message names the field and the fix)."""


class ContainerConfigError(SecurityContextError):
    """What the kubelet reports as the container's waiting reason ``CreateContainerConfigError``."""

    reason = WAITING_REASON


def cap_mask(status_text: str, key: str) -> frozenset[str]:
    """The capability names of a ``Cap*`` line of ``/proc/<pid>/status`` (``CapBnd``, ``CapEff``, ...)."""
    for line in status_text.splitlines():
        if line.startswith(key + ":"):
            bits = int(line.split(":", 1)[1].strip(), 16)
            return frozenset(name for i, name in enumerate(ALL_CAPS) if bits >> i & 1)
    return frozenset()


def _own_bounding_set() -> frozenset[str]:
    """The capabilities this process may hand on: for an ordinary user, those it holds inside a user namespace."""
    try:
        with open("/proc/self/status") as f:
            return cap_mask(f.read(), "CapBnd")
    except OSError:
        return frozenset(ALL_CAPS)


@dataclass(frozen=True)
class Security:
    """How one container's process is set up. ``caps`` is its bounding set (``None``: all, for privileged)."""

    uid: int
    gid: int
    groups: tuple[int, ...] = ()
    caps: frozenset[str] | None = DEFAULT_CAPS
    read_only_root: bool = False
    privileged: bool = False
    rootless: bool = False
    unmapped_groups: tuple[int, ...] = ()
    """Requested ``fsGroup``/``supplementalGroups`` an ordinary user's pod cannot be given (one gid is mapped)."""
    home: str | None = None
    """``HOME`` for a process that runs as another host user than kubetrain (root only), from its passwd entry; in
    an image, from the image's passwd (``/`` without an entry), as container runtimes set it."""
    setpriv: tuple[str, ...] = ()
    """How to start ``setpriv`` inside the pod when it is not the host's own path (a pod in an image: ``tools``)."""

    def bwrap_options(self) -> list[str]:
        """Options for the pod's bubblewrap. Without root the ids are mapped in bubblewrap's user namespace and
        the capabilities raised there (the final ``setpriv`` lowers them like a kernel exec)."""
        if not self.rootless:
            return []
        out = ["--uid", str(self.uid), "--gid", str(self.gid)]
        for cap in sorted(self.caps or ()):
            out += ["--cap-add", f"CAP_{cap}"]
        return out

    def exec_prefix(self, *, entering: bool = False) -> list[str]:
        """``setpriv ... --`` run inside the sandbox right before the command. ``entering``: for a process that
        joins the pod from outside (an exec probe), which has to shed what ``nsenter`` gave it."""
        out = ["setpriv"]
        if (not self.rootless or entering) and self.caps is not None:
            out += ["--bounding-set", ",".join(["-all", *(f"+{c.lower()}" for c in sorted(self.caps))])]
        if not self.rootless:
            out += ["--reuid", str(self.uid), "--regid", str(self.gid)]
            out += ["--groups", ",".join(map(str, self.groups))] if self.groups else ["--clear-groups"]
        # Ambient and inheritable capabilities would survive the exec; a container's never do.
        if self.setpriv:
            out[:1] = list(self.setpriv)
        else:
            out[0] = which("setpriv") or "setpriv"  # the same path inside: the host's /usr is the pod's
        return [*out, "--inh-caps", "-all", "--ambient-caps", "-all", "--"]

    def may(self, st: os.stat_result, want: int) -> bool:
        """Whether the mode bits of ``st`` allow ``want`` (``os.R_OK``/``W_OK``/``X_OK`` bits) to this identity
        (root-mode pods only: an ordinary user's pod is that user)."""
        if self.uid == 0:
            return True
        if st.st_uid == self.uid:
            shift = 6
        elif st.st_gid == self.gid or st.st_gid in self.groups:
            shift = 3
        else:
            shift = 0
        return (st.st_mode >> shift) & want == want


def _int(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0 or value > 2**31 - 1:
        raise SecurityContextError(f"{where}: expected a number from 0 to 2147483647, got {value!r}")
    return value


def _capability(name: Any, where: str) -> str:
    text = str(name).upper()
    text = text.removeprefix("CAP_")
    if text != "ALL" and text not in ALL_CAPS:
        raise SecurityContextError(
            f"{where}: unknown capability {name!r} (expected a Linux capability name such as NET_BIND_SERVICE, "
            "or ALL)"
        )
    return text


def capabilities(spec: dict[str, Any] | None, where: str) -> frozenset[str]:
    """The container's bounding set from ``capabilities.add``/``drop``, in containerd's order: ``add: [ALL]``,
    then ``drop: [ALL]``, then the named additions, then the named removals."""
    spec = spec or {}
    add = [_capability(c, f"{where}.add[{i}]") for i, c in enumerate(spec.get("add") or [])]
    drop = [_capability(c, f"{where}.drop[{i}]") for i, c in enumerate(spec.get("drop") or [])]
    caps = set(DEFAULT_CAPS)
    if "ALL" in add:
        caps = set(ALL_CAPS)
    if "ALL" in drop:
        caps = set()
    caps |= {c for c in add if c != "ALL"}
    caps -= set(drop)
    return frozenset(caps)


def pod_ref(name: str, namespace: str, uid: str) -> str:
    """A pod as the kubelet names it in messages: ``name_namespace(uid)``."""
    return f"{name}_{namespace}({uid})"


def _passwd(uid: int) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        return None


def _image_groups(user: pwd.struct_passwd | None) -> list[int]:
    """Groups the "image" (this machine's group database) gives the user besides its own, as containerd adds
    them by default."""
    if user is None:
        return []
    return list(_group_list(user.pw_name, user.pw_gid))


@functools.lru_cache(maxsize=64)
def _group_list(name: str, gid: int) -> tuple[int, ...]:
    # Read once per supervisor: the group database is consulted (NSS) for every container otherwise, tens of
    # milliseconds each on a busy machine, and a pod's groups are fixed when its TrainJob starts anyway.
    try:
        return tuple(g for g in os.getgrouplist(name, gid) if g != gid)
    except OSError:
        return ()


def resolve(
    pod_spec: dict[str, Any],
    container: dict[str, Any],
    *,
    pod: str,
    where: str,
    pod_where: str,
    rootless: bool | None = None,
    available: frozenset[str] | None = None,
    image: ImageRoot | None = None,
) -> Security:
    """The effective security of ``container`` in a pod with ``pod_spec``. ``pod`` names the pod in the kubelet's
    messages (``pod_ref``); ``where``/``pod_where`` are the field paths of the container and of the pod spec.

    Raises ``ContainerConfigError`` where the kubelet would not create the container (runAsNonRoot) and
    ``SecurityContextError`` for what cannot be done here (privileged without root, a capability this user lacks).
    ``image``: the container runs in that image, whose ``User``, passwd and groups give the defaults (as a
    container runtime takes them); otherwise this machine's user database stands in for the image.
    """
    rootless = os.geteuid() != 0 if rootless is None else rootless
    psc = pod_spec.get("securityContext") or {}
    csc = container.get("securityContext") or {}
    cwhere = f"{where}.securityContext"
    pwhere = f"{pod_where}.securityContext"

    def pick(key: str) -> tuple[Any, str]:
        if csc.get(key) is not None:
            return csc[key], f"{cwhere}.{key}"
        return psc.get(key), f"{pwhere}.{key}"

    run_as_user, user_where = pick("runAsUser")
    run_as_user = _int(run_as_user, user_where)
    run_as_group, group_where = pick("runAsGroup")
    run_as_group = _int(run_as_group, group_where)
    non_root, _ = pick("runAsNonRoot")
    name = container.get("name", "")

    image_user = None
    if image is not None:
        from kubetrain.local.images.rootfs import ImageConfigError

        try:
            image_user = image.user()
        except ImageConfigError as exc:
            raise ContainerConfigError(f"{exc} (pod: \"{pod}\", container: {name})") from None
    # Without an image, its user is the one kubetrain runs pods as by default (root as root, else you).
    default_uid = image_user.uid if image_user is not None else os.getuid() if rootless else 0
    uid = default_uid if run_as_user is None else run_as_user
    if non_root:
        if run_as_user == 0:
            raise ContainerConfigError(
                f'container\'s runAsUser breaks non-root policy (pod: "{pod}", container: {name})'
            )
        if run_as_user is None and image_user is not None and not image_user.numeric:
            raise ContainerConfigError(
                f"container has runAsNonRoot and image has non-numeric user ({image_user.name}), cannot verify "
                f'user is non-root (pod: "{pod}", container: {name})'
            )
        if run_as_user is None and uid == 0:
            raise ContainerConfigError(
                f'container has runAsNonRoot and image will run as root (pod: "{pod}", container: {name})'
            )
    user = _passwd(uid) if image is None else None
    if run_as_group is not None:
        gid = run_as_group
    elif run_as_user is None:
        gid = image_user.gid if image_user is not None else os.getgid() if rootless else 0
    elif image is not None:
        row = image.passwd_entry(uid=uid)
        gid = int(row[3]) if row and row[3].isdigit() else 0
    else:
        gid = user.pw_gid if user is not None else 0

    fs_group = _int(psc.get("fsGroup"), f"{pwhere}.fsGroup")
    supplemental = psc.get("supplementalGroups") or []
    requested = [_int(g, f"{pwhere}.supplementalGroups[{i}]") for i, g in enumerate(supplemental)]
    wanted = [g for g in [fs_group, *requested] if g is not None]
    strict = psc.get("supplementalGroupsPolicy") == "Strict"
    groups: list[int] = []
    own = image.groups_of(image.name_of(uid), gid) if image is not None else _image_groups(user)
    for g in ([] if strict else own) + wanted:
        if g not in groups:
            groups.append(g)
    unmapped: tuple[int, ...] = ()
    if rootless:
        # One gid is mapped into an ordinary user's namespaces: the pod's own. Others cannot be granted.
        unmapped = tuple(g for g in dict.fromkeys(wanted) if g != gid)
        groups = [g for g in groups if g == gid]

    privileged = bool(csc.get("privileged"))
    if privileged and rootless:
        raise SecurityContextError(privileged_needs_root(f"{cwhere}.privileged"))
    caps: frozenset[str] | None = None
    if not privileged:
        caps = capabilities(csc.get("capabilities"), f"{cwhere}.capabilities")
        have = _own_bounding_set() if available is None else available
        asked = {_capability(c, "") for c in (csc.get("capabilities") or {}).get("add") or []} - {"ALL"}
        missing = sorted(asked - have)
        if missing:
            whose = "this user's (inside its user namespace)" if rootless else "kubetrain's own (root's bounding set)"
            raise SecurityContextError(
                f"{cwhere}.capabilities.add: {', '.join(missing)} not among {whose} capabilities, and a pod never "
                f"gets more than the user who runs it. Fix: remove {', '.join(missing)} from capabilities.add"
            )
        caps = caps & have

    home = None
    if image is not None:
        home = image.home_of(uid)
    elif not rootless and uid != 0:
        home = user.pw_dir if user is not None else "/"
    return Security(
        uid=uid,
        gid=gid,
        groups=tuple(groups),
        caps=caps,
        read_only_root=bool(csc.get("readOnlyRootFilesystem")),
        privileged=privileged,
        rootless=rootless,
        unmapped_groups=unmapped,
        home=home,
    )


def check_workdir(security: Security, chdir: str, where: str) -> None:
    """A root-mode pod running as another user must be able to read its working directory, as an image's."""
    try:
        st = os.stat(chdir)
    except OSError:
        return  # bubblewrap's own error names it
    if not security.may(st, os.X_OK | os.R_OK):
        owner = "root" if st.st_uid == 0 else f"uid {st.st_uid}"
        raise SecurityContextError(
            f"{where}: the container runs as uid {security.uid} (securityContext.runAsUser), which may not read "
            f"its working directory {chdir} (owned by {owner}, mode {st.st_mode & 0o7777:04o}). Like an image's "
            f"files, it must be readable by that user. Fix: `chmod o+rx {chdir}` (or chgrp it to gid "
            f"{security.gid}), set workingDir to a directory that user can read, or run kubetrain as that user"
        )


def privileged_needs_root(where: str) -> str:
    return (
        f"{where}: privileged containers need root, and kubetrain runs as uid {os.getuid()}: a privileged pod "
        "would get every capability of this machine. Fix: remove privileged: true (grant only the capabilities "
        "it needs with capabilities.add), or run it on a cluster"
    )


def privileged_allowed(settings_allow: bool) -> bool:
    return settings_allow or os.environ.get(PRIVILEGED_ENV) == "1"
