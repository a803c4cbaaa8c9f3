"""``kill -9`` of a real device process between the server's commit and the device's
own receipt transaction (and between a pulled page and its local commit).

The device runs ``memsync device sync`` in a subprocess against the real cloud
(uvicorn on loopback). The test fault hook ``MEMSYNC_DEVICE_CRASH_AT`` makes that
process SIGKILL itself at the named point, so the kill lands exactly there. Then the
device is opened again and syncs: the replay is answered ``duplicate``, nothing is
applied twice, nothing acknowledged is lost, and the device converges.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from device.agent import DeviceAgent
from device.faults import CRASH_ENV
from simulator.cloud_runner import RunningCloud

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
PASSPHRASE = "killed device passphrase"
SENTENCES = [f"My neighbour number {i} keeps bees on the roof." for i in range(5)]


def _sync_in_a_process(directory: Path, crash_at: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMSYNC_PASSPHRASE": PASSPHRASE, CRASH_ENV: crash_at}
    return subprocess.run(
        [sys.executable, "-m", "simulator.cli", "device", "sync", "--dir", str(directory)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_killed_after_the_server_committed_replays_as_duplicates(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    space, code = cloud.operator.add_user("ada")
    directory = tmp_path / "phone"
    agent = DeviceAgent.create(directory, PASSPHRASE, device_name="phone", cloud_url=cloud.url)
    agent.enroll(code)
    records = []
    for i, sentence in enumerate(SENTENCES):
        agent.say(sentence, f"c{i}")
        records.append(agent.remember(sentence, f"c{i}").record_id)
    queued = agent.pending_ops()
    agent.close()

    killed = _sync_in_a_process(directory, "push_answered")
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    # the server committed everything; the device never stored a receipt
    for record in records:
        assert cloud.operator.record_status(space, record).version == 1
    again = DeviceAgent.open(directory, PASSPHRASE)
    assert again.pending_ops() == queued  # nothing acknowledged was lost
    report = again.sync()
    assert report.duplicates == queued and report.refused == []  # replayed, not re-applied
    assert again.pending_ops() == 0
    views = {v.record_id: v for v in again.list_records()}
    for record in records:
        assert views[record].sync_state == "synced" and views[record].version == 1
        assert cloud.operator.record_status(space, record).version == 1  # applied once
    again.close()


def test_killed_while_a_pulled_page_was_not_yet_committed(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    space, code = cloud.operator.add_user("ada")
    phone = DeviceAgent.create(tmp_path / "phone", PASSPHRASE, device_name="phone",
                               cloud_url=cloud.url)  # fmt: skip
    phone.enroll(code)
    for i, sentence in enumerate(SENTENCES):
        phone.say(sentence, f"c{i}")
        phone.remember(sentence, f"c{i}")
    phone.sync()
    directory = tmp_path / "laptop"
    laptop = DeviceAgent.create(directory, PASSPHRASE, device_name="laptop", cloud_url=cloud.url)
    laptop.enroll(cloud.operator.new_enrollment_code(space))
    laptop.close()

    killed = _sync_in_a_process(directory, "pull_answered")
    assert killed.returncode == -signal.SIGKILL, killed.stderr

    again = DeviceAgent.open(directory, PASSPHRASE)
    assert again.list_records() == []  # the page was never half applied
    again.sync()
    assert sorted(v.text for v in again.list_records()) == sorted(SENTENCES)
    assert {v.record_id for v in again.list_records()} == {
        v.record_id for v in phone.list_records()
    }
    phone.close()
    again.close()


def test_an_unknown_crash_point_is_refused() -> None:
    env = {**os.environ, CRASH_ENV: "somewhere"}
    done = subprocess.run(
        [sys.executable, "-c", "from device import faults; faults.reached('push_answered')"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "expected one of" in done.stderr
