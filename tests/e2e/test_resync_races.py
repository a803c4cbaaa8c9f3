"""Two sync races found from outside (issue 19), over real HTTP on both stores:

1. A push delivered twice around a resync: the device hears ``duplicate`` for its own
   new record, which the resync kept unseen. It must keep the record (the cloud has it
   active), not shred it: a duplicate only says the op was applied before.
2. A forget lands elsewhere between a sync's pull and its push, again and again: the
   push pulls and pushes again while each pull acknowledges something new, and a bound
   is named in the error if it is ever hit.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from device.errors import PushDidNotSettle
from device.sync import MAX_PULL_ROUNDS
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from simulator.transport import Fault, FaultKind
from tests.e2e.resync_helpers import cloud_view, remember, view

pytestmark = pytest.mark.e2e

PUSH = "/v1/push"


def _phone_behind_a_compacted_feed(
    cloud: RunningCloud, fleet: Fleet
) -> tuple[DeviceHandle, DeviceHandle, str]:
    """A phone that missed a correction and a forget, with the feed compacted past its
    cursor (so its next pull is answered ``resync_required``)."""
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    bike = remember(laptop, "My bike is a red Bianchi.", "b")
    gone = remember(laptop, "My locker code is hidden in the attic.", "g")
    laptop.agent.sync()
    phone.agent.sync()
    phone.go_offline()
    laptop.agent.say("My bike is a green Bianchi.", "b2")
    laptop.agent.correct(bike, "My bike is a green Bianchi.", "b2")
    laptop.agent.dont_use(bike)
    laptop.agent.use_again(bike)
    laptop.agent.forget_permanently(gone)
    laptop.agent.sync()
    report = cloud.operator.compact(ada.space_id)
    assert report.floor > 0 and report.kept_destructions == 1  # the phone owes it
    phone.go_online()
    return phone, laptop, gone


def test_a_push_doubled_around_a_resync_keeps_the_devices_own_record(
    any_cloud: RunningCloud, tmp_path: Path
) -> None:
    cloud = any_cloud
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        phone, laptop, gone = _phone_behind_a_compacted_feed(cloud, fleet)
        space = phone.user.space_id
        new = remember(phone, "My dentist moved to Elm Street.", "o1")
        # every push of this sync reaches the cloud twice; the phone hears the second
        # answer: 409 then (after the resync) ``duplicate`` for its own new ops
        phone.transport.inject(
            Fault(kind=FaultKind.DUPLICATE_SECOND, path=PUSH),
            Fault(kind=FaultKind.DUPLICATE_SECOND, path=PUSH),
        )
        synced = phone.agent.sync()
        assert synced.pull_required and synced.resynced
        assert synced.duplicates == synced.pushed > 0 and not synced.refused
        assert new not in synced.resync_removed and new not in synced.shredded
        assert gone in synced.shredded  # the forget it missed still reached it
        assert cloud.operator.record_status(space, new).lifecycle_state.value == "active"

        views = {v.record_id: v for v in phone.agent.list_records()}
        assert not views[new].is_skeleton and views[new].text == "My dentist moved to Elm Street."
        assert phone.agent.pending_ops() == 0
        phone.agent.sync()
        laptop.agent.sync()
        known = set(view(phone.agent)) | set(view(laptop.agent))
        assert view(phone.agent) == cloud_view(cloud, space, known) == view(laptop.agent)
        assert any(r.record_id == new for r in phone.agent.recall("dentist"))
    finally:
        fleet.close()


class _ForgetBeforePushes:
    """A fault plan that draws no fault, but before each of the next ``times`` pushes
    has the other device forget one more record and sync: the forget lands between
    the pushing device's pull and its push."""

    def __init__(self, other: DeviceHandle, records: list[str], times: int) -> None:
        self.other, self.records, self.left = other, list(records), times

    def draw(self, request: httpx.Request) -> None:
        if request.url.path == PUSH and self.left > 0 and self.records:
            self.left -= 1
            self.other.agent.forget_permanently(self.records.pop(0))
            self.other.agent.sync()


def _two_devices_with_records(fleet: Fleet, n: int) -> tuple[DeviceHandle, DeviceHandle, list[str]]:
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    records = [
        remember(laptop, f"My cousin number {i} lives in Tromso.", f"c{i}") for i in range(n)
    ]
    laptop.agent.sync()
    phone.agent.sync()
    return phone, laptop, records


def test_forgets_landing_between_pull_and_push_are_pulled_until_the_push_goes(
    any_cloud: RunningCloud, tmp_path: Path
) -> None:
    cloud = any_cloud
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        rounds = MAX_PULL_ROUNDS - 1
        phone, laptop, records = _two_devices_with_records(fleet, rounds)
        new = remember(phone, "My dentist moved to Elm Street.", "o1")
        phone.transport.plan = _ForgetBeforePushes(laptop, records, times=rounds)
        synced = phone.agent.sync()  # each push is answered 409 after a fresh forget
        assert synced.pull_required and not synced.refused
        assert sorted(synced.shredded) == sorted(records)
        assert len(synced.acked) == rounds
        assert phone.agent.pending_ops() == 0
        space = phone.user.space_id
        assert cloud.operator.record_status(space, new).lifecycle_state.value == "active"
        assert cloud.operator.pending(space).forgets == [] or all(
            not f.pending for f in cloud.operator.pending(space).forgets
        )
    finally:
        fleet.close()


def test_the_pull_rounds_bound_is_named_when_hit_and_nothing_is_lost(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        phone, laptop, records = _two_devices_with_records(fleet, MAX_PULL_ROUNDS + 2)
        new = remember(phone, "My dentist moved to Elm Street.", "o1")
        queued = phone.agent.pending_ops()
        phone.transport.plan = _ForgetBeforePushes(laptop, records, times=MAX_PULL_ROUNDS + 1)
        with pytest.raises(PushDidNotSettle, match=f"MAX_PULL_ROUNDS={MAX_PULL_ROUNDS}"):
            phone.agent.sync()
        assert phone.agent.pending_ops() == queued  # nothing sent, nothing lost
        phone.transport.plan = None
        synced = phone.agent.sync()  # the forgets stop: the next sync sends them
        assert phone.agent.pending_ops() == 0 and not synced.refused
        space = phone.user.space_id
        assert cloud.operator.record_status(space, new).lifecycle_state.value == "active"
    finally:
        fleet.close()
