"""The tests' own small image (``image_archive`` in tests/local/conftest.py) loaded into each test's store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubetrain.local.images import archive
from kubetrain.local.images.store import ImageStore, StoredImage

from ..conftest import kt_home  # noqa: F401  (the isolated $KUBETRAIN_HOME fixture)


def load(path: Path, names: list[str] | None = None) -> StoredImage:
    found, files = archive.read(path)
    try:
        return ImageStore().add(found[0], names=names if names is not None else found[0].names, source=str(path))
    finally:
        files.close()


@pytest.fixture
def loaded(kt_home: Path, image_archive: Path) -> Iterator[StoredImage]:  # noqa: F811
    yield load(image_archive)
