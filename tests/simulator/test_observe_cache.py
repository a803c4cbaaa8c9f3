"""The reads between steps are remembered only while a device's database (or the
cloud's record store) is unchanged: every write of the device's own agent, every commit
of another process on the same files (a sync process of the same device) and every
commit to the cloud's store is seen at once, and each remembered read equals a fresh
one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.cloud_runner import RunningCloud
from simulator.cloud_view import CloudView, StepReads
from simulator.fleet import DeviceHandle, Fleet
from simulator.observe import (
    FORGOTTEN,
    held_now,
    holds_content,
    live_record_ids,
    pull_cursor,
    queued_ops,
)
from simulator.processes import sync_in_a_process
from simulator.stub_embedder import STUB

pytestmark = pytest.mark.e2e


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    with RunningCloud.sqlite(tmp_path / "cloud") as running:
        yield running


def _fresh(handle: DeviceHandle, record_id: str) -> tuple[bool, int, set[str], str | None]:
    """The same reads, made afresh through the agent."""
    from device import store

    live = {v.record_id for v in handle.agent.list_records() if v.lifecycle != FORGOTTEN}
    meta = store.get_meta(handle.agent._debug_db())
    return holds_content(handle, record_id), handle.agent.pending_ops(), live, meta.pull_cursor


def _remembered(handle: DeviceHandle, record_id: str) -> tuple[bool, int, set[str], str | None]:
    return (
        held_now(handle, record_id),
        queued_ops(handle),
        live_record_ids(handle),
        pull_cursor(handle),
    )


def test_remembered_reads_follow_the_agents_writes_and_another_processs_commits(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices", embedder=STUB)
    user = fleet.add_user("ada")
    phone, laptop = fleet.add_device(user, "phone"), fleet.add_device(user, "laptop")
    sentence = "My friend Kalomi lives in Lima."
    phone.agent.say(sentence, "c1")
    record = phone.agent.remember(sentence, "c1").record_id
    assert _remembered(phone, record) == _fresh(phone, record)
    assert queued_ops(phone) == phone.agent.pending_ops() > 0

    phone.agent.sync()  # the agent's own writes: the queue empties, the cursor moves
    assert _remembered(phone, record) == _fresh(phone, record)
    assert queued_ops(phone) == 0
    laptop.agent.sync()
    assert _remembered(laptop, record) == _fresh(laptop, record)
    assert held_now(laptop, record) and live_record_ids(laptop) == {record}

    phone.agent.forget_permanently(record)
    phone.agent.sync()
    assert not held_now(phone, record) and live_record_ids(phone) == set()
    assert held_now(laptop, record)  # the laptop has not heard yet

    # the laptop's agent stays open; another process of the same device syncs and shreds
    done = sync_in_a_process(laptop.directory, laptop.passphrase, None)
    assert done.returncode == 0, done.stderr
    assert _remembered(laptop, record) == _fresh(laptop, record)
    assert not held_now(laptop, record) and live_record_ids(laptop) == set()
    fleet.close()


def test_a_device_reopened_after_another_process_wrote_is_read_afresh(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices", embedder=STUB)
    phone = fleet.add_device(fleet.add_user("ada"), "phone")
    phone.agent.say("My friend Dovoxi plays the cello in Graz.", "c1")
    queued = queued_ops(phone)
    assert queued == phone.agent.pending_ops() > 0
    phone.close()
    done = sync_in_a_process(phone.directory, phone.passphrase, None)  # pushes the queue
    assert done.returncode == 0, done.stderr
    phone.reopen()
    assert queued_ops(phone) == phone.agent.pending_ops() == 0
    fleet.close()


def test_remembered_cloud_reads_follow_every_commit_to_the_store(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices", embedder=STUB)
    user = fleet.add_user("ada")
    phone, laptop = fleet.add_device(user, "phone"), fleet.add_device(user, "laptop")
    space = user.space_id
    reads, fresh = StepReads(cloud.operator), CloudView(cloud.operator)

    def same() -> None:
        assert reads.forgets(space) == fresh.forgets(space)
        assert reads.last_seqs([space]) == {space: _last_seq(cloud, space)}

    same()
    sentence = "My friend Kalomi lives in Lima."
    phone.agent.say(sentence, "c1")
    record = phone.agent.remember(sentence, "c1").record_id
    assert reads.lifecycles(space, [record]) == {}  # the cloud has not seen it
    phone.agent.sync()  # a commit by the cloud's server
    same()
    assert reads.lifecycles(space, [record]) == fresh.lifecycles(space, [record]) != {}
    laptop.agent.sync()
    phone.agent.forget_permanently(record)
    phone.agent.sync()
    same()
    assert reads.forgets(space)[1] == {record}
    assert reads.lifecycles(space, [record]) == {record: FORGOTTEN}
    assert laptop.agent.device_id in reads.forgets(space)[0][record]
    laptop.agent.sync()  # the laptop shreds and acknowledges
    same()
    assert reads.forgets(space)[0] == {}
    fleet.close()


def _last_seq(cloud: RunningCloud, space: str) -> int:
    with cloud.operator.store.session() as s:
        return s.last_seq(space)
