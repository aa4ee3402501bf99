"""Reading upstream's variables."""

from __future__ import annotations

import pytest

from kubetrain.initializers.errors import InitializerError
from kubetrain.initializers.patterns import ignored
from kubetrain.initializers.settings import MODEL_IGNORE_PATTERNS, from_env


def test_defaults_are_upstreams() -> None:
    m = from_env("model", {"STORAGE_URI": "hf://a/b"})
    assert (m.destination, m.ignore_patterns, m.access_token) == ("/workspace/model", MODEL_IGNORE_PATTERNS, None)
    d = from_env("dataset", {"STORAGE_URI": "hf://a/b", "ACCESS_TOKEN": "t"})
    assert (d.destination, d.ignore_patterns, d.access_token) == ("/workspace/dataset", (), "t")


def test_ignore_patterns_are_comma_separated_and_empty_means_none() -> None:
    assert from_env("model", {"STORAGE_URI": "x://y", "IGNORE_PATTERNS": " *.bin, ,docs/ "}).ignore_patterns == (
        "*.bin", "docs/")
    assert from_env("model", {"STORAGE_URI": "x://y", "IGNORE_PATTERNS": ""}).ignore_patterns == ()


def test_missing_storage_uri_names_the_trainjob_field() -> None:
    with pytest.raises(InitializerError) as err:
        from_env("model", {"STORAGE_URI": "  "})
    assert err.value.permanent and "spec.initializer.model.storageUri" in err.value.fix


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("original/consolidated.00.pth", ("*.pth",), True),  # `*` crosses directories, as in the hub client
        ("docs/a/b.md", ("docs/",), True),
        ("docsx/a.md", ("docs/",), False),
        ("model.safetensors", ("*.bin", "*.pt"), False),
    ],
)
def test_patterns(path: str, patterns: tuple[str, ...], expected: bool) -> None:
    assert ignored(path, patterns) is expected
