"""One headless Chromium per test module of the UI's browser tests (starting one costs seconds)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ui.harness import browser_session


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with browser_session() as driver:
        yield driver
