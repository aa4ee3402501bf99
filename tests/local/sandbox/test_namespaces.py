"""The sandbox root bubblewrap builds (kubetrain.local.sandbox.namespaces). Pure: no processes, no namespaces."""

from __future__ import annotations

import os
from pathlib import Path

from kubetrain.local.sandbox import namespaces


class TestSandboxRoot:
    def test_new_mount_points_never_create_host_directories(self, tmp_path: Path) -> None:
        src = tmp_path / "src"
        src.mkdir()
        dest = "/etc/kubetrain-test-does-not-exist/inner"
        argv = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[namespaces.Bind(str(src), dest)],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
        )
        # /etc gets rebuilt as a tmpfs of binds instead of being bound whole (which would mkdir on the host).
        i = argv.index("--tmpfs")
        assert argv[i + 1] == "/etc"
        assert ["--dev-bind", "/etc", "/etc"] not in [argv[j : j + 3] for j in range(len(argv))]
        assert argv[-2:] == ["--", "true"]
        assert not os.path.exists("/etc/kubetrain-test-does-not-exist")

    def test_symlinked_destination_is_mounted_inside_the_sandbox_not_through_the_link(
        self, tmp_path: Path
    ) -> None:
        target = tmp_path / "real"
        target.write_text("host file")
        (tmp_path / "link").symlink_to(target)
        argv = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
            resolv_conf=str(tmp_path / "resolv"),
        )
        argv2 = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[namespaces.Bind(str(tmp_path / "src"), str(tmp_path / "link"))],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
        )
        assert ["--ro-bind", str(tmp_path / "resolv"), "/etc/resolv.conf"] == argv[
            argv.index("/etc/resolv.conf") - 2 : argv.index("/etc/resolv.conf") + 1
        ]
        pairs = [argv2[j : j + 2] for j in range(len(argv2))]
        assert ["--tmpfs", str(tmp_path)] in pairs  # the link's directory is rebuilt inside the sandbox
        assert ["--symlink", str(target), str(tmp_path / "link")] not in [
            argv2[j : j + 3] for j in range(len(argv2))
        ]
        assert target.read_text() == "host file"

    def test_existing_mount_point_does_not_shadow(self, tmp_path: Path) -> None:
        argv = namespaces.bwrap_argv(
            enter=["nsenter", "--net=/proc/1/ns/net", "--"],
            hostname="h",
            binds=[namespaces.Bind(str(tmp_path), "/usr")],
            hosts_file="/dev/null",
            chdir="/",
            command=["true"],
        )
        assert "--tmpfs" not in argv


