"""securityContext rules of the local backend, without processes: the kubelet's merge of pod and container
fields, its runAsNonRoot messages, containerd's capability arithmetic, the hostPath and privileged admission,
and how a pod waiting on a configuration error is shown."""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kubetrain.local import config
from kubetrain.local.logs.stream import step_view
from kubetrain.local.sandbox import security_context as sc
from kubetrain.local.sandbox.namespaces import bwrap_argv, closed_ancestors
from kubetrain.local.sandbox.volumes import VolumeError, apply_fs_group, check_host_path
from kubetrain.local.store.db import PodRow
from kubetrain.local.submit import admission

WHERE = "JobSet j spec.replicatedJobs[node].template.spec.template.spec.containers[node]"
POD_WHERE = "JobSet j spec.replicatedJobs[node].template.spec.template.spec"
POD = "j-node-0-0_default(u1)"
NO_PASSWD_UID = 54321  # an id without a passwd entry: its default gid is 0 and it has no /etc/group groups


@dataclass
class P:
    """A pod spec with one container, built fluently."""

    pod: dict[str, Any] = field(default_factory=dict)
    ctr: dict[str, Any] = field(default_factory=dict)

    def psc(self, **kw: Any) -> P:
        self.pod.setdefault("securityContext", {}).update(kw)
        return self

    def csc(self, **kw: Any) -> P:
        self.ctr.setdefault("securityContext", {}).update(kw)
        return self

    def resolve(self, *, rootless: bool = False, available: frozenset[str] = frozenset(sc.ALL_CAPS)) -> sc.Security:
        return sc.resolve(
            self.pod, {"name": "node", **self.ctr}, pod=POD, where=WHERE, pod_where=POD_WHERE,
            rootless=rootless, available=available,
        )


# -- ids and groups ---------------------------------------------------------------------------------------------


def test_container_fields_win_over_the_pods() -> None:
    s = P().psc(runAsUser=1000, runAsGroup=3000).csc(runAsUser=2000).resolve()
    assert (s.uid, s.gid) == (2000, 3000)
    s = P().psc(runAsUser=1000, runAsGroup=3000).csc(runAsGroup=4000).resolve()
    assert (s.uid, s.gid) == (1000, 4000)


def test_fs_group_and_supplemental_groups_are_the_pods_and_strict_keeps_only_them() -> None:
    s = P().psc(runAsUser=NO_PASSWD_UID, runAsGroup=3000, fsGroup=2000, supplementalGroups=[4000, 2000]).resolve()
    assert s.groups == (2000, 4000)
    s = P().psc(runAsUser=NO_PASSWD_UID, fsGroup=2000, supplementalGroupsPolicy="Strict").resolve()
    assert s.groups == (2000,)


def test_defaults_as_root_are_root_and_a_uid_without_passwd_entry_gets_gid_0() -> None:
    s = P().resolve()
    assert (s.uid, s.gid, s.home) == (0, 0, None)
    s = P().psc(runAsUser=NO_PASSWD_UID).resolve()
    assert (s.uid, s.gid, s.home) == (NO_PASSWD_UID, 0, "/")


def test_a_uid_with_a_passwd_entry_gets_its_group_and_home_as_from_an_image() -> None:
    import pwd

    users = [u for u in pwd.getpwall() if u.pw_uid != 0]
    if not users:
        pytest.skip("no non-root account in /etc/passwd")
    u = users[0]
    s = P().psc(runAsUser=u.pw_uid).resolve()
    assert (s.gid, s.home) == (u.pw_gid, u.pw_dir)


def test_without_root_the_default_is_the_user_and_only_the_pods_own_gid_can_be_given() -> None:
    s = P().psc(fsGroup=2000).resolve(rootless=True)
    assert (s.uid, s.gid) == (os.getuid(), os.getgid())
    s = P().psc(runAsUser=1000, runAsGroup=3000, fsGroup=2000, supplementalGroups=[4000, 3000]).resolve(rootless=True)
    assert (s.uid, s.gid, s.groups, s.unmapped_groups) == (1000, 3000, (3000,), (2000, 4000))
    s = P().psc(runAsUser=1000, runAsGroup=1000, fsGroup=1000).resolve(rootless=True)
    assert (s.groups, s.unmapped_groups) == ((1000,), ())


@pytest.mark.parametrize("value", [-1, "1000", True, 2**31])
def test_bad_ids_name_the_field(value: Any) -> None:
    with pytest.raises(sc.SecurityContextError) as e:
        P().psc(runAsUser=value).resolve()
    assert str(e.value).startswith(f"{POD_WHERE}.securityContext.runAsUser: expected a number from 0 to 2147483647")


# -- runAsNonRoot: the kubelet's own messages ---------------------------------------------------------------------


def test_run_as_non_root_with_the_default_uid_as_root_is_the_kubelets_image_message() -> None:
    with pytest.raises(sc.ContainerConfigError) as e:
        P().psc(runAsNonRoot=True).resolve()
    assert str(e.value) == f'container has runAsNonRoot and image will run as root (pod: "{POD}", container: node)'
    assert e.value.reason == "CreateContainerConfigError"


def test_run_as_non_root_with_an_explicit_uid_0_breaks_the_policy() -> None:
    with pytest.raises(sc.ContainerConfigError) as e:
        P().psc(runAsNonRoot=True).csc(runAsUser=0).resolve(rootless=True)
    assert str(e.value) == f'container\'s runAsUser breaks non-root policy (pod: "{POD}", container: node)'


def test_run_as_non_root_passes_for_a_non_zero_uid_and_for_an_ordinary_users_default() -> None:
    assert P().psc(runAsNonRoot=True, runAsUser=1000).resolve().uid == 1000
    if os.getuid() != 0:
        assert P().psc(runAsNonRoot=True).resolve(rootless=True).uid == os.getuid()
    # The container may turn the pod's requirement off, as on a cluster.
    assert P().psc(runAsNonRoot=True).csc(runAsNonRoot=False).resolve().uid == 0


# -- capabilities: containerd's arithmetic -------------------------------------------------------------------------

ALL = frozenset(sc.ALL_CAPS)


@pytest.mark.parametrize(
    ("caps", "expected"),
    [
        ({}, sc.DEFAULT_CAPS),
        ({"drop": ["ALL"]}, frozenset()),
        ({"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}, frozenset({"NET_BIND_SERVICE"})),
        ({"drop": ["all"], "add": ["cap_net_bind_service"]}, frozenset({"NET_BIND_SERVICE"})),
        ({"add": ["ALL"]}, ALL),
        ({"add": ["ALL"], "drop": ["SYS_ADMIN"]}, ALL - {"SYS_ADMIN"}),
        ({"add": ["ALL"], "drop": ["ALL"]}, frozenset()),
        ({"drop": ["NET_RAW", "MKNOD"]}, sc.DEFAULT_CAPS - {"NET_RAW", "MKNOD"}),
        ({"add": ["SYS_PTRACE"], "drop": ["SYS_PTRACE"]}, sc.DEFAULT_CAPS),
    ],
)
def test_capabilities_add_and_drop_like_containerd(caps: dict[str, Any], expected: frozenset[str]) -> None:
    assert P().csc(capabilities=caps).resolve().caps == expected


def test_unknown_capability_names_its_path() -> None:
    with pytest.raises(sc.SecurityContextError) as e:
        P().csc(capabilities={"add": ["NET_BIND_SERVICE", "FLY"]}).resolve()
    assert str(e.value).startswith(f"{WHERE}.securityContext.capabilities.add[1]: unknown capability 'FLY'")


def test_a_capability_the_user_does_not_have_is_refused_and_defaults_shrink_silently() -> None:
    have = frozenset({"CHOWN", "NET_BIND_SERVICE"})
    with pytest.raises(sc.SecurityContextError) as e:
        P().csc(capabilities={"add": ["SYS_ADMIN"]}).resolve(available=have)
    assert str(e.value).startswith(
        f"{WHERE}.securityContext.capabilities.add: SYS_ADMIN not among kubetrain's own (root's bounding set) "
        "capabilities, and a pod never gets more than the user who runs it."
    )
    assert P().resolve(available=have).caps == have


def test_cap_mask_reads_proc_status_lines() -> None:
    text = "Name:\tx\nCapEff:\t0000000000000400\nCapBnd:\t00000000a80425fb\n"
    assert sc.cap_mask(text, "CapEff") == {"NET_BIND_SERVICE"}
    assert sc.cap_mask(text, "CapBnd") == sc.DEFAULT_CAPS


# -- privileged ----------------------------------------------------------------------------------------------------


def test_privileged_without_root_is_refused_with_the_fix() -> None:
    with pytest.raises(sc.SecurityContextError) as e:
        P().csc(privileged=True).resolve(rootless=True)
    text = str(e.value)
    assert text.startswith(f"{WHERE}.securityContext.privileged: privileged containers need root")
    assert "Fix: remove privileged: true" in text


def test_privileged_as_root_keeps_every_capability() -> None:
    s = P().csc(privileged=True).resolve()
    assert s.privileged and s.caps is None
    assert "--bounding-set" not in s.exec_prefix()


# -- what the sandbox is given -------------------------------------------------------------------------------------


def test_root_mode_sets_ids_groups_and_bounding_set_with_setpriv() -> None:
    s = P().psc(runAsUser=1000, runAsGroup=3000, supplementalGroups=[4000], supplementalGroupsPolicy="Strict")
    sec = s.csc(capabilities={"drop": ["ALL"], "add": ["CHOWN", "KILL"]}).resolve()
    assert sec.bwrap_options() == []
    assert os.path.basename(sec.exec_prefix()[0]) == "setpriv"
    assert sec.exec_prefix()[1:] == [
        "--bounding-set", "-all,+chown,+kill", "--reuid", "1000", "--regid", "3000",
        "--groups", "4000", "--inh-caps", "-all", "--ambient-caps", "-all", "--",
    ]
    assert "--clear-groups" in P().resolve().exec_prefix()


def test_rootless_maps_ids_in_bubblewraps_namespace_and_raises_capabilities_there() -> None:
    sec = P().psc(runAsUser=1000, runAsGroup=3000).csc(capabilities={"drop": ["ALL"], "add": ["KILL"]})
    s = sec.resolve(rootless=True)
    assert s.bwrap_options() == ["--uid", "1000", "--gid", "3000", "--cap-add", "CAP_KILL"]
    assert s.exec_prefix()[1:] == ["--inh-caps", "-all", "--ambient-caps", "-all", "--"]
    # A probe entering the pod from outside sheds the namespace's full set first.
    assert s.exec_prefix(entering=True)[1:3] == ["--bounding-set", "-all,+kill"]


def test_read_only_root_remounts_everything_but_volumes(tmp_path: Path) -> None:
    vol = tmp_path / "v"
    vol.mkdir()
    from kubetrain.local.sandbox.namespaces import Bind

    sec = P().csc(readOnlyRootFilesystem=True).resolve()
    argv = bwrap_argv(
        enter=[], hostname="h", binds=[Bind(str(vol), "/kt-scratch/data")], hosts_file="/dev/null", chdir="/",
        command=["true"], security=sec,
    )
    pairs = list(itertools.pairwise(argv))
    assert ("--ro-bind", "/usr") in pairs and ("--dev-bind", "/usr") not in pairs
    assert ("--bind", str(vol)) in pairs
    assert argv[argv.index("--unshare-pid") - 2 :][:2] == ["--remount-ro", "/"]
    plain = bwrap_argv(enter=[], hostname="h", binds=[], hosts_file="/dev/null", chdir="/", command=["true"])
    assert "--remount-ro" not in plain and ("--dev-bind", "/usr") in list(itertools.pairwise(plain))


def test_closed_ancestors_are_the_directories_the_uid_cannot_enter(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    (closed / "env" / "bin").mkdir(parents=True)
    (closed / "secret").mkdir()
    closed.chmod(0o700)
    tmp_path.chmod(0o755)
    sec = P().psc(runAsUser=NO_PASSWD_UID).resolve()
    found = closed_ancestors([str(closed / "env" / "bin")], sec)
    assert found.get(str(closed)) == {"env"}
    assert all(not k.startswith(str(closed) + "/") for k in found)
    argv = bwrap_argv(
        enter=[], hostname="h", binds=[], hosts_file="/dev/null", chdir="/", command=["true"], security=sec,
        reach=[str(closed / "env" / "bin")],
    )
    i = argv.index(str(closed))
    assert argv[i - 3 : i] == ["--perms", "0755", "--tmpfs"]
    assert str(closed / "env") in argv and str(closed / "secret") not in argv


# -- volumes: fsGroup ownership and hostPath -----------------------------------------------------------------------


def test_fs_group_makes_volumes_group_writable_and_setgid(tmp_path: Path) -> None:
    root = tmp_path / "vol"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "f").write_text("x")
    (root / "sub" / "f").chmod(0o600)
    root.chmod(0o755)
    gid = os.getgid()
    apply_fs_group(root, gid, read_only=False, policy="Always")
    assert root.stat().st_mode & 0o7777 == 0o2775
    assert (root / "sub").stat().st_mode & 0o2070 == 0o2070
    assert (root / "sub" / "f").stat().st_mode & 0o7777 == 0o660
    (root / "sub" / "f").chmod(0o600)
    apply_fs_group(root, gid, read_only=False, policy="OnRootMismatch")  # the root matches: no walk
    assert (root / "sub" / "f").stat().st_mode & 0o7777 == 0o600


def test_host_path_must_lie_below_an_allowed_directory(tmp_path: Path) -> None:
    allowed = tmp_path / "data"
    (allowed / "set").mkdir(parents=True)
    (tmp_path / "data2").mkdir()
    (allowed / "escape").symlink_to("/etc")
    ok = check_host_path(str(allowed / "set"), [str(allowed)], "W", "v", "/h/config.yaml")
    assert ok == str(allowed / "set")
    for bad in (tmp_path / "data2", allowed / "escape", allowed / ".." / "data2"):
        with pytest.raises(VolumeError):
            check_host_path(str(bad), [str(allowed)], "W", "v", "/h/config.yaml")
    with pytest.raises(VolumeError) as e:
        check_host_path("/", [], "W.volumes[0]", "root", "/h/config.yaml")
    assert str(e.value).startswith(
        "W.volumes[0].hostPath.path: volume 'root' mounts / from this machine, which is not below a directory "
        "allowed for hostPath volumes (security.allowedHostPaths in /h/config.yaml: none). Fix: add it to "
        "security.allowedHostPaths"
    )
    assert check_host_path("/etc", ["/"], "W", "v", "c") == "/etc"  # written out by the user: allowed


def _jobset(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "kind": "JobSet",
            "metadata": {"name": "j"},
            "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]},
        }
    ]


def test_admission_names_every_refused_volume_and_container(kt_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(sc.PRIVILEGED_ENV, raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    pod = {
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}, {"name": "ok", "emptyDir": {}}],
        "containers": [{"name": "node", "securityContext": {"privileged": True}}],
    }
    with pytest.raises(sc.SecurityContextError) as e:
        admission.check(_jobset(pod))
    text = str(e.value)
    assert f"{POD_WHERE}.volumes[0].hostPath.path: volume 'root' mounts / from this machine" in text
    assert f"{POD_WHERE}.containers[node].securityContext.privileged: privileged containers are refused" in text
    assert "pass --allow-privileged to `kubetrain run` or `kubetrain apply`" in text
    monkeypatch.setenv(sc.PRIVILEGED_ENV, "1")
    (kt_home / "config.yaml").write_text("security: {allowedHostPaths: [/]}\n")
    admission.check(_jobset(pod))


def test_admission_refuses_privileged_for_an_ordinary_user_even_with_the_flag(
    kt_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sc.PRIVILEGED_ENV, "1")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(sc.SecurityContextError) as e:
        admission.check(_jobset({"containers": [{"name": "c", "securityContext": {"privileged": True}}]}))
    assert "privileged containers need root" in str(e.value)


def test_config_security_section(kt_home: Path) -> None:
    kt_home.mkdir(parents=True, exist_ok=True)
    cfg = kt_home / "config.yaml"
    cfg.write_text("security:\n  allowedHostPaths: [/data]\n  allowPrivileged: true\n")
    assert config.load().security == config.Security(allowed_host_paths=["/data"], allow_privileged=True)
    for text, msg in [
        ("security: {allowedHostPaths: data}\n", "security.allowedHostPaths: expected a list of absolute"),
        ("security: {allowedHostPaths: [data]}\n", "security.allowedHostPaths: expected a list of absolute"),
        ("security: {allowPrivileged: yes-please}\n", "security.allowPrivileged: expected true or false"),
        ("security: {hostPaths: [/]}\n", "security: unknown key(s) hostPaths"),
    ]:
        cfg.write_text(text)
        with pytest.raises(config.ConfigError) as e:
            config.load()
        assert msg in str(e.value)


# -- how a waiting pod is shown ------------------------------------------------------------------------------------


def test_a_pending_pods_waiting_reason_is_split_from_its_message() -> None:
    row = PodRow("default", "t", "node-0-0", "node", "Pending", None, None, None, 0,
                 "CreateContainerConfigError: container has runAsNonRoot and image will run as root", "log")
    v = step_view(row)
    assert v.reason == "CreateContainerConfigError"
    assert v.message == "container has runAsNonRoot and image will run as root"
    row.message = "exit code 1; back-off 10s restarting failed container"
    assert step_view(row).reason is None
