"""An image's root filesystem read from its layers, and the kubelet's command rules."""

from __future__ import annotations

import pytest

from kubetrain.local.images.rootfs import ImageConfigError, ImageRoot
from kubetrain.local.images.store import StoredImage


def test_paths_resolve_through_layers_whiteouts_and_opaque_directories(loaded: StoredImage) -> None:
    root = ImageRoot(loaded)
    assert root.resolve("/etc/removed") is None  # whited out by the top layer
    assert root.resolve("/opt/old/a") is None and root.resolve("/opt/old/c") is not None  # opaque directory
    assert root.resolve("/etc/passwd") is not None and root.has_dir("/app")
    assert root.which("hello.sh", "/bin:/app", "/")[0] == "/app/hello.sh"
    assert root.which("nothere", "/bin", "/") == (None, None)


@pytest.mark.parametrize(
    ("container", "argv"),
    [
        ({}, (["/bin/sh", "-c"], ["echo default-cmd"])),
        ({"args": ["echo hi"]}, (["/bin/sh", "-c"], ["echo hi"])),
        ({"command": ["/app/hello.sh"]}, (["/app/hello.sh"], [])),
        ({"command": ["sh"], "args": ["-c", "true"]}, (["sh"], ["-c", "true"])),
    ],
)
def test_command_replaces_the_entrypoint_and_args_the_cmd(loaded: StoredImage, container: dict, argv: tuple) -> None:
    assert ImageRoot(loaded).command(container) == argv


def test_the_images_user_and_env(loaded: StoredImage) -> None:
    root = ImageRoot(loaded)
    assert root.user().uid == 0 and root.env()["GREETING"] == "from-image"
    root.config["User"] = "trainer"
    user = root.user()
    assert (user.uid, user.gid, user.numeric) == (1000, 1000, False)
    assert root.groups_of("trainer", 1000) == [50] and root.home_of(1000) == "/home/trainer"
    root.config["User"] = "1000:50"
    assert (root.user().uid, root.user().gid, root.user().numeric) == (1000, 50, True)
    root.config["User"] = "nobody"
    with pytest.raises(ImageConfigError, match="unable to find user nobody: no matching entries in passwd file"):
        root.user()
