"""``Warning`` headers as the API server writes them (RFC 7234, quoted and escaped) become the plain text."""

from __future__ import annotations

import pytest

from kubetrain.k8s.client.session import parse_warning_header


@pytest.mark.parametrize(
    ("header", "texts"),
    [
        ('299 - "plain"', ["plain"]),
        ('299 - "Runtime \\"x\\" is deprecated"', ['Runtime "x" is deprecated']),
        ('299 - "back\\\\slash"', ["back\\slash"]),
        ('299 - "a, b", 299 - "c"', ["a, b", "c"]),
        ('299 - "dated" "Wed, 21 Oct 2015 07:28:00 GMT"', ["dated"]),
        ('199 proxy "not from the API server"', ['199 proxy "not from the API server"']),
        ("garbage", ["garbage"]),
    ],
)  # fmt: skip
def test_warning_texts_are_unquoted(header: str, texts: list[str]) -> None:
    assert parse_warning_header(header) == texts
