"""``kubetrain.service.backends``: the one choice of backend the CLI, the UI and the Client make, and its reasons."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubetrain.service.backends import LOCAL_STATE_FIX, BackendUnavailable, is_cluster, open_backend


@pytest.mark.parametrize(
    ("kubeconfig", "context", "env", "cluster"),
    [
        (None, None, "", False),
        ("/k", None, "", True),
        (None, "prod", "", True),
        (None, None, "k8s", True),
        (None, None, "Kubernetes", True),
        (None, None, "local", False),
    ],
)
def test_which_backend(kubeconfig: str | None, context: str | None, env: str, cluster: bool,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBETRAIN_BACKEND", env)
    assert is_cluster(kubeconfig, context) is cluster


def test_an_unreadable_kubeconfig_says_why_and_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable) as info:
        open_backend(str(tmp_path / "missing"), None, elsewhere="use this machine")
    assert "missing" in info.value.message
    assert info.value.fix.endswith("or drop them to use this machine")


def test_an_unusable_state_folder_says_where_to_point_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.write_text("a file, not a folder")
    monkeypatch.setenv("KUBETRAIN_HOME", str(home))
    monkeypatch.delenv("KUBETRAIN_BACKEND", raising=False)
    with pytest.raises(BackendUnavailable) as info:
        open_backend(None, None)
    assert info.value.message.startswith("cannot open this machine's kubetrain state")
    assert info.value.fix == LOCAL_STATE_FIX
