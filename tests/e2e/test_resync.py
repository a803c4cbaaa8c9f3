"""Resync over real HTTP (uvicorn on loopback, devices on SQLCipher): a device too far
behind the compacted change feed is answered ``resync_required``, rebuilds its subset
without losing its own queued operations, keeps nothing the cloud forgot (decrypted
pages and WAL scanned), and ends equal to the cloud's view — also when it was restored
from an old backup, and when it is killed in the middle of the resync."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from device.db import DB_FILENAME
from device.faults import CRASH_ENV
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from simulator.forensics import scan_device_database
from tests.e2e.resync_helpers import cloud_view, remember, view

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
KEPT = [f"My cousin number {i} lives in Tromso." for i in range(3)]
FORGOTTEN = [f"My locker code number {i} is hidden in the attic." for i in range(2)]
CORRECTED = "My bike is a red Bianchi."
CORRECTION = "My bike is a green Bianchi."
OFFLINE_NEW = "My dentist moved to Elm Street."
OFFLINE_FIX = "My cousin number 0 lives in Bergen."


def _needles(handle: DeviceHandle, records: list[str], sentences: list[str]) -> dict[str, bytes]:
    needles = {f"sentence {n}": s.encode() for n, s in enumerate(sentences)}
    for record in records:
        for n, key in enumerate(handle.agent.data_keys_for(record)):
            needles[f"{record} key {n}"] = key
    return needles


def _assert_clean(handle: DeviceHandle, needles: dict[str, bytes]) -> None:
    scan = scan_device_database(handle.db_path, handle.passphrase, needles)
    assert scan.clean and scan.pages > 0 and scan.unreadable_pages == 0, scan.hits


def _pending(cloud: RunningCloud, space_id: str) -> list[str]:
    return [d.device_name for f in cloud.operator.pending(space_id).forgets for d in f.pending]


def _reopen(handle: DeviceHandle) -> None:
    handle.close()
    handle.reopen()


def test_a_long_offline_device_resyncs_and_keeps_its_queued_ops(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
        kept = [remember(phone, s, f"k{i}") for i, s in enumerate(KEPT)]
        gone = [remember(phone, s, f"f{i}") for i, s in enumerate(FORGOTTEN)]
        bike = remember(phone, CORRECTED, "b")
        phone.agent.sync()
        laptop.agent.sync()
        needles = _needles(laptop, gone, FORGOTTEN)
        control = scan_device_database(laptop.db_path, laptop.passphrase, needles)
        assert {h.needle for h in control.hits} >= {f"{gone[0]} key 0", f"{gone[1]} key 0"}

        # the laptop goes away for a long time, and the user keeps using it offline
        laptop.go_offline()
        laptop.agent.say(OFFLINE_NEW, "o1")
        queued_new = laptop.agent.remember(OFFLINE_NEW, "o1").record_id
        laptop.agent.say(OFFLINE_FIX, "o2")
        laptop.agent.correct(kept[0], OFFLINE_FIX, "o2")
        queued = laptop.agent.pending_ops()
        assert queued >= 4  # two episodes, a remember, a correction (and detector marks)

        # meanwhile: forgets, corrections and state changes, and the feed is compacted
        for record in gone:
            phone.agent.forget_permanently(record)
        phone.agent.say(CORRECTION, "b2")
        phone.agent.correct(bike, CORRECTION, "b2")
        phone.agent.dont_use(kept[2])
        phone.agent.use_again(kept[2])
        phone.agent.sync()
        report = cloud.operator.compact(ada.space_id)
        assert report.floor > 0 and report.kept_destructions == len(gone)  # laptop owes them
        assert sorted(_pending(cloud, ada.space_id)) == ["laptop", "laptop"]

        laptop.go_online()
        synced = laptop.agent.sync()
        assert synced.resynced and synced.pull_required
        # no queued op was lost: each reached the cloud once, after the rebuild
        assert synced.applied == queued and synced.duplicates == 0 and not synced.refused
        assert laptop.agent.pending_ops() == 0
        assert cloud.operator.record_status(ada.space_id, queued_new).version == 1
        assert cloud.operator.record_status(ada.space_id, kept[0]).version == 2
        # nothing the cloud forgot is left on the laptop, WAL included
        _assert_clean(laptop, needles)
        assert _pending(cloud, ada.space_id) == []
        # the laptop equals the cloud's view, and the phone agrees once it syncs
        phone.agent.sync()
        known = set(view(laptop.agent)) | set(view(phone.agent))
        assert view(laptop.agent) == cloud_view(cloud, ada.space_id, known)
        assert view(phone.agent) == view(laptop.agent)
        assert view(laptop.agent)[bike] == ("active", 2)
        texts = {v.text for v in laptop.agent.list_records() if v.text}
        assert texts == {*KEPT[1:], OFFLINE_FIX, CORRECTION, OFFLINE_NEW}

        again = laptop.agent.sync()  # the next sync is incremental again
        assert not again.resynced and again.pushed == 0
    finally:
        fleet.close()


def test_a_device_restored_from_an_old_backup_is_forced_to_resync(
    any_cloud: RunningCloud, tmp_path: Path
) -> None:
    cloud = any_cloud
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
        kept = remember(phone, KEPT[0], "k")
        secret = remember(laptop, FORGOTTEN[0], "f")
        laptop.agent.sync()
        phone.agent.sync()
        laptop.agent.sync()
        needles = _needles(laptop, [secret], FORGOTTEN[:1])

        # a backup of the laptop's database (its cursor inside) before the forget
        laptop.agent.close()
        backup = tmp_path / "backup"
        shutil.copytree(laptop.agent.directory, backup)
        _reopen(laptop)

        phone.agent.forget_permanently(secret)
        phone.agent.sync()
        laptop.agent.sync()  # shreds it and acknowledges
        assert _pending(cloud, ada.space_id) == []
        _assert_clean(laptop, needles)
        report = cloud.operator.compact(ada.space_id)
        assert dict(report.deleted).get("key_destruction") == 1  # everyone acknowledged

        # the old backup comes back: the forgotten record with it (the scan can see it)
        laptop.agent.close()
        directory = laptop.agent.directory
        for suffix in ("", "-wal", "-shm"):
            (directory / (DB_FILENAME + suffix)).unlink(missing_ok=True)
            copy = backup / (DB_FILENAME + suffix)
            if copy.exists():
                shutil.copy2(copy, directory / (DB_FILENAME + suffix))
        _reopen(laptop)
        assert secret in {v.record_id for v in laptop.agent.list_records() if v.text}
        restored = scan_device_database(laptop.db_path, laptop.passphrase, needles)
        assert not restored.clean

        synced = laptop.agent.sync()
        assert synced.resynced and secret in synced.resync_removed
        _assert_clean(laptop, needles)
        views = {v.record_id: v for v in laptop.agent.list_records()}
        assert views[secret].is_skeleton and views[kept].text == KEPT[0]
        assert view(laptop.agent) == cloud_view(cloud, ada.space_id, set(view(laptop.agent)))
        assert not laptop.agent.sync().resynced
    finally:
        fleet.close()


def _restored_backup_with_forgotten_ops(
    cloud: RunningCloud, fleet: Fleet, tmp_path: Path
) -> tuple[DeviceHandle, str, str, dict[str, bytes]]:
    """A laptop restored from a backup that still queues ops the original pushed later;
    what they created was then forgotten (acknowledged, compacted). Returns the laptop,
    that record, a record forgotten afterwards (an event the laptop still owes), and
    the needles of the first."""
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    held = remember(phone, KEPT[0], "k")
    phone.agent.sync()
    laptop.agent.sync()
    laptop.go_offline()
    secret = remember(laptop, FORGOTTEN[0], "f")  # queued, not yet pushed
    needles = _needles(laptop, [secret], FORGOTTEN[:1])
    laptop.agent.close()
    backup = tmp_path / "backup"
    shutil.copytree(laptop.agent.directory, backup)
    _reopen(laptop)
    laptop.go_online()
    laptop.agent.sync()  # the original pushes it ...
    phone.agent.sync()
    phone.agent.forget_permanently(secret)  # ... it is forgotten everywhere ...
    phone.agent.sync()
    laptop.agent.sync()
    assert _pending(cloud, ada.space_id) == []
    assert dict(cloud.operator.compact(ada.space_id).deleted).get("key_destruction") == 1
    phone.agent.forget_permanently(held)  # ... and the laptop now owes a newer event
    phone.agent.sync()

    laptop.agent.close()
    directory = laptop.agent.directory
    for suffix in ("", "-wal", "-shm"):
        (directory / (DB_FILENAME + suffix)).unlink(missing_ok=True)
        copy = backup / (DB_FILENAME + suffix)
        if copy.exists():
            shutil.copy2(copy, directory / (DB_FILENAME + suffix))
    _reopen(laptop)
    assert laptop.agent.pending_ops() > 0
    return laptop, secret, held, needles


def _ends_clean(
    cloud: RunningCloud, laptop: DeviceHandle, secret: str, held: str, needles: dict[str, bytes]
) -> None:
    assert laptop.agent.pending_ops() == 0
    _assert_clean(laptop, needles)
    views = {v.record_id: v for v in laptop.agent.list_records()}
    assert views[secret].is_skeleton and views[held].is_skeleton
    space = laptop.user.space_id
    assert view(laptop.agent) == cloud_view(cloud, space, set(views))
    assert _pending(cloud, space) == []


def test_a_restored_backup_with_ops_queued_then_pushed_and_forgotten_ends_clean(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    """The cloud answers the backup's replay ``duplicate``; the resync had not seen
    what it created, so the device asks the cloud's record status, which is a
    skeleton: the record is shredded on the cloud's word."""
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        laptop, secret, held, needles = _restored_backup_with_forgotten_ops(cloud, fleet, tmp_path)
        synced = laptop.agent.sync()
        assert synced.pull_required and synced.resynced  # pull first, rebuild, then push
        assert synced.duplicates == synced.pushed > 0 and not synced.refused
        assert secret in synced.resync_removed
        _ends_clean(cloud, laptop, secret, held, needles)
    finally:
        fleet.close()


def test_a_restored_backup_killed_after_its_resync_still_asks_and_ends_clean(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    """Killed after the resync committed and the push was answered, before the
    receipts: what the resync kept unseen is persisted, so the next sync still asks the
    cloud about the duplicate's record instead of keeping forgotten content."""
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        laptop, secret, held, needles = _restored_backup_with_forgotten_ops(cloud, fleet, tmp_path)
        laptop.agent.close()
        _sync_in_a_process(laptop.agent.directory, laptop.passphrase, "push_answered")
        _reopen(laptop)
        marker = laptop.agent._debug_db().one("SELECT resync_started_at FROM meta")[0]
        assert marker is None  # the resync finished before the kill
        kept = laptop.agent._debug_db().all("SELECT record_id FROM resync_kept")
        assert secret in {row[0] for row in kept}
        synced = laptop.agent.sync()
        assert not synced.resynced and synced.duplicates == synced.pushed > 0
        assert secret in synced.resync_removed
        _ends_clean(cloud, laptop, secret, held, needles)
        assert laptop.agent._debug_db().all("SELECT record_id FROM resync_kept") == []
    finally:
        fleet.close()


def _sync_in_a_process(directory: Path, passphrase: str, crash_at: str) -> int:
    env = {**os.environ, "MEMSYNC_PASSPHRASE": passphrase, CRASH_ENV: crash_at}
    done = subprocess.run(
        [sys.executable, "-m", "simulator.cli", "device", "sync", "--dir", str(directory)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done.returncode


@pytest.mark.parametrize("crash_at", ["pull_answered", "resync_pulled"])
def test_killed_in_the_middle_of_a_resync_then_converges(
    cloud: RunningCloud, tmp_path: Path, crash_at: str
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        ada = fleet.add_user("ada")
        phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
        kept = remember(phone, KEPT[0], "k")
        gone = remember(phone, FORGOTTEN[0], "f")
        phone.agent.sync()
        laptop.agent.sync()
        needles = _needles(laptop, [gone], FORGOTTEN[:1])
        laptop.agent.say(OFFLINE_NEW, "o1")
        queued_new = laptop.agent.remember(OFFLINE_NEW, "o1").record_id
        queued = laptop.agent.pending_ops()
        phone.agent.forget_permanently(gone)
        phone.agent.dont_use(kept)
        phone.agent.use_again(kept)
        phone.agent.sync()
        assert cloud.operator.compact(ada.space_id).floor > 0
        laptop.agent.close()

        _sync_in_a_process(laptop.agent.directory, laptop.passphrase, crash_at)

        _reopen(laptop)
        marker = laptop.agent._debug_db().one("SELECT resync_started_at FROM meta")[0]
        assert marker is not None  # killed mid-resync: the marker says start again
        assert laptop.agent.pending_ops() == queued  # the queue was never touched
        synced = laptop.agent.sync()
        assert synced.resynced and synced.applied == queued and synced.duplicates == 0
        assert laptop.agent._debug_db().one("SELECT resync_started_at FROM meta")[0] is None
        _assert_clean(laptop, needles)
        assert cloud.operator.record_status(ada.space_id, queued_new).version == 1
        phone.agent.sync()
        assert view(laptop.agent) == view(phone.agent)
        known = set(view(laptop.agent))
        assert view(laptop.agent) == cloud_view(cloud, ada.space_id, known)
        assert _pending(cloud, ada.space_id) == []
    finally:
        fleet.close()
