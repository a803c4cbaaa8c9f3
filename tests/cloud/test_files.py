"""Every file the cloud stores is its owner's only (issue 22, item 8): the record
store, its WAL, the key store and the master key are 0600 and their folders 0700,
under a permissive umask, whether the folders existed or not."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from cloud.config import CloudConfig
from cloud.service import CloudService
from tests.cloud.conftest import FakeClock


@pytest.fixture
def open_umask() -> Iterator[None]:
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("folder_exists", [False, True])
def test_store_files_are_0600_in_0700_folders(
    tmp_path: Path, open_umask: None, folder_exists: bool
) -> None:
    store, keys = tmp_path / "store", tmp_path / "keys"
    if folder_exists:
        store.mkdir(mode=0o755)
        keys.mkdir(mode=0o755)
    config = CloudConfig(
        store_url=f"sqlite:///{store / 'records.db'}",
        key_store_path=keys / "keys.db",
        clock=FakeClock(),
    )
    service = CloudService(config)
    try:
        service.add_user("ada")  # writes to both stores
        files = [p for folder in (store, keys) for p in folder.iterdir()]
        names = {p.name for p in files}
        assert {"records.db", "keys.db"} <= names and any(n.endswith("-wal") for n in names)
        for path in files:
            assert _mode(path) == 0o600, f"{path.name} is {oct(_mode(path))}"
        for folder in (store, keys):
            assert _mode(folder) == 0o700, f"{folder} is {oct(_mode(folder))}"
    finally:
        service.close()
