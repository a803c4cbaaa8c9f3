"""``kill -9`` of a real device process in the middle of a shred (issue 24 item 3): the
pulled key destruction has removed the record's rows but not yet its data keys
(``shred_keys_next``). The shred is one transaction, so the kill leaves the copy as it
was before the page (record readable, keys held, cursor unmoved) and never half-shred;
the next sync applies the destruction again and no byte of the content or its keys is
left in the database file or its WAL."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet
from simulator.forensics import scan_device_database
from simulator.processes import kill_during_sync

pytestmark = pytest.mark.e2e

PASSPHRASE = "shredded device passphrase"
SECRET = "I keep the boat key inside the red teapot."


def test_killed_between_a_shreds_rows_and_its_keys(cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = Fleet(cloud, tmp_path)
    try:
        user = fleet.add_user("ada")
        phone = fleet.add_device(user, "phone", PASSPHRASE)
        laptop = fleet.add_device(user, "laptop", PASSPHRASE)
        phone.agent.say(SECRET, "c1")
        record = phone.agent.remember(SECRET, "c1").record_id
        phone.agent.sync()
        laptop.agent.sync()
        needles = {"sentence": SECRET.encode()}
        needles |= {f"key {n}": k for n, k in enumerate(laptop.agent.data_keys_for(record))}
        assert len(needles) > 1
        cursor = laptop.agent._debug_db().one("SELECT pull_cursor FROM meta")[0]
        before = scan_device_database(laptop.db_path, PASSPHRASE, needles)
        assert {h.needle for h in before.hits} >= {"key 0"}  # the scan can see

        phone.agent.forget_permanently(record)
        phone.agent.sync()
        killed = kill_during_sync(laptop, "shred_keys_next")
        assert killed.returncode == -signal.SIGKILL

        again = laptop.agent
        # rolled back whole: neither rows without keys nor keys without rows
        assert [v.text for v in again.list_records()] == [SECRET]
        keys = {v for k, v in needles.items() if k.startswith("key ")}
        assert set(again.data_keys_for(record)) == keys
        assert again._debug_db().one("SELECT pull_cursor FROM meta")[0] == cursor

        again.sync()
        assert again.list_records()[0].lifecycle == "permanently_forgotten"
        assert again.recall("teapot") == []
        after = scan_device_database(laptop.db_path, PASSPHRASE, needles)
        assert after.clean and after.unreadable_pages == 0, after.hits
    finally:
        fleet.close()
