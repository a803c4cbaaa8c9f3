"""``kill -9`` of a real device process between the server's commit and the device's
own receipt transaction (and between a pulled page and its local commit).

The device runs ``memsync device sync`` in a subprocess against the real cloud
(uvicorn on loopback), through the simulator's helper ``kill_during_sync``. The test
fault hook ``MEMSYNC_DEVICE_CRASH_AT`` makes that process SIGKILL itself at the named
point, so the kill lands exactly there. Then the device is opened again and syncs: the
replay is answered ``duplicate``, nothing is applied twice, nothing acknowledged is
lost, and the device converges.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.cloud_runner import RunningCloud
from simulator.errors import CrashPointNotReached, DeviceNotReady, UnknownCrashPoint
from simulator.fleet import Fleet
from simulator.processes import SOURCE_ROOT, kill_during_sync

pytestmark = pytest.mark.e2e

PASSPHRASE = "killed device passphrase"
SENTENCES = [f"My neighbour number {i} keeps bees on the roof." for i in range(5)]


def test_killed_after_the_server_committed_replays_as_duplicates(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path)
    user = fleet.add_user("ada")
    space = user.space_id
    phone = fleet.add_device(user, "phone", PASSPHRASE)
    records = []
    for i, sentence in enumerate(SENTENCES):
        phone.agent.say(sentence, f"c{i}")
        records.append(phone.agent.remember(sentence, f"c{i}").record_id)
    queued = phone.agent.pending_ops()

    killed = kill_during_sync(phone, "push_answered")
    assert killed.point == "push_answered" and killed.returncode == -signal.SIGKILL

    # the server committed everything; the device never stored a receipt
    for record in records:
        assert cloud.operator.record_status(space, record).version == 1
    again = phone.agent  # reopened by the helper on the same folder
    assert again.pending_ops() == queued  # nothing acknowledged was lost
    report = again.sync()
    assert report.duplicates == queued and report.refused == []  # replayed, not re-applied
    assert again.pending_ops() == 0
    views = {v.record_id: v for v in again.list_records()}
    for record in records:
        assert views[record].sync_state == "synced" and views[record].version == 1
        assert cloud.operator.record_status(space, record).version == 1  # applied once
    fleet.close()


def test_killed_while_a_pulled_page_was_not_yet_committed(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path)
    user = fleet.add_user("ada")
    phone = fleet.add_device(user, "phone", PASSPHRASE)
    for i, sentence in enumerate(SENTENCES):
        phone.agent.say(sentence, f"c{i}")
        phone.agent.remember(sentence, f"c{i}")
    phone.agent.sync()
    laptop = fleet.add_device(user, "laptop", PASSPHRASE)

    killed = kill_during_sync(laptop, "pull_answered")
    assert killed.returncode == -signal.SIGKILL

    again = laptop.agent
    assert again.list_records() == []  # the page was never half applied
    again.sync()
    assert sorted(v.text for v in again.list_records()) == sorted(SENTENCES)
    assert {v.record_id for v in again.list_records()} == {
        v.record_id for v in phone.agent.list_records()
    }
    fleet.close()


def test_the_helper_refuses_what_it_cannot_do_and_says_when_the_point_was_not_reached(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path)
    phone = fleet.add_device(fleet.add_user("ada"), "phone", PASSPHRASE)
    with pytest.raises(UnknownCrashPoint, match="somewhere"):
        kill_during_sync(phone, "somewhere")
    phone.go_offline()
    with pytest.raises(DeviceNotReady, match="ada/phone is offline"):
        kill_during_sync(phone, "pull_answered")
    phone.go_online()
    # nothing queued: the push never reaches its point; the sync finishes instead
    with pytest.raises(CrashPointNotReached, match="without reaching 'push_answered'"):
        kill_during_sync(phone, "push_answered")
    assert phone.agent.sync().pushed == 0  # the reopened agent works
    fleet.close()


def test_an_unknown_crash_point_is_refused() -> None:
    env = {**os.environ, "MEMSYNC_DEVICE_CRASH_AT": "somewhere"}
    done = subprocess.run(
        [sys.executable, "-c", "from device import faults; faults.reached('push_answered')"],
        cwd=SOURCE_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "expected one of" in done.stderr
