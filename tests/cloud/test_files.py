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


def test_an_existing_store_file_is_never_opened_only_tightened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing any descriptor of a file drops every POSIX lock the process holds on it,
    so opening a database another engine of this process uses would drop SQLite's
    locks (writes of another process were lost that way: the CLI's enrollment code
    never reached the serving cloud)."""
    from cloud import files

    path = tmp_path / "store" / "records.db"
    files.private_file(path)
    assert _mode(path) == 0o600
    os.chmod(path, 0o644)
    opened: list[object] = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a) or real_open(*a, **k))
    files.private_file(path)
    assert opened == [] or all(a[1] & os.O_EXCL for a in opened)  # type: ignore[index]
    assert _mode(path) == 0o600
