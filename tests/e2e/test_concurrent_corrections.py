"""Two devices correct one record while offline: both corrections are kept, the later
one is flagged, and every device ends with the cloud's history, version for version.

Real uvicorn, real SQLCipher devices. The cloud numbers versions in its own order; a
device's own unconfirmed version moves to the cloud's number (``device.provisional``)
whichever comes first, the receipt or the other device's pulled version.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from device.sync import SyncSession
from protocol.operations import ReceiptStatus
from simulator.cloud_runner import RunningCloud
from simulator.cloud_view import CloudView
from simulator.fleet import DeviceHandle, Fleet

pytestmark = pytest.mark.e2e

FIRST = "My sister Odile lives in Lyon."
ON_PHONE = "My sister Odile lives in Nantes."
ON_LAPTOP = "My sister Odile lives in Brest."
AGAIN_ON_LAPTOP = "My sister Odile lives in Rennes."


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        fleet = Fleet(cloud, tmp_path / "devices")
        try:
            yield fleet
        finally:
            fleet.close()


def _say_and(handle: DeviceHandle, text: str, conversation: str) -> None:
    handle.agent.say(text, conversation)


def _start(fleet: Fleet) -> tuple[DeviceHandle, DeviceHandle, str]:
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    _say_and(phone, FIRST, "c0")
    record = phone.agent.remember(FIRST, "c0").record_id
    phone.agent.sync()
    laptop.agent.sync()
    phone.go_offline()
    laptop.go_offline()
    return phone, laptop, record


def _correct(handle: DeviceHandle, record: str, text: str, conversation: str) -> str:
    _say_and(handle, text, conversation)
    return handle.agent.correct(record, text, conversation).op_id


def _history(handle: DeviceHandle, record: str) -> list[tuple[int, str | None]]:
    return [(v.version, v.text) for v in handle.agent.record_history(record)]


def _current(handle: DeviceHandle, record: str) -> str | None:
    (text,) = [v.text for v in handle.agent.record_history(record) if v.current]
    return text


def _cloud_history(fleet: Fleet, space: str, record: str) -> list[tuple[int, str | None]]:
    return CloudView(fleet.cloud.operator).version_texts(space, record)


def test_the_later_correction_is_kept_flagged_and_histories_agree(fleet: Fleet) -> None:
    phone, laptop, record = _start(fleet)
    _correct(phone, record, ON_PHONE, "c1")
    laptops = _correct(laptop, record, ON_LAPTOP, "c2")
    phone.go_online()
    assert not phone.agent.sync().conflicts  # first to arrive: nothing raced it
    laptop.go_online()
    report = laptop.agent.sync()  # pushes first: its v2 becomes the cloud's v3
    assert [op for op, _ in report.conflicts] == [laptops]
    assert "v2" in report.conflicts[0][1] and "both are kept" in report.conflicts[0][1]
    receipt = laptop.agent.receipt(laptops)
    assert receipt is not None and receipt.status is ReceiptStatus.CONFLICT
    phone.agent.sync()
    cloud = _cloud_history(fleet, phone.user.space_id, record)
    assert cloud == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP)]
    assert _history(phone, record) == cloud
    assert _history(laptop, record) == cloud
    for handle in (phone, laptop):
        assert _current(handle, record) == ON_LAPTOP


def test_the_other_devices_version_pulled_first_takes_the_number(fleet: Fleet) -> None:
    """The laptop pulls the phone's v2 before it pushes its own v2 (as after
    ``pull_required`` or in live sync): its words move to v3 and stay queued."""
    phone, laptop, record = _start(fleet)
    _correct(phone, record, ON_PHONE, "c1")
    laptops = _correct(laptop, record, ON_LAPTOP, "c2")
    phone.go_online()
    phone.agent.sync()
    laptop.go_online()
    session = SyncSession(
        laptop.agent._debug_db(), laptop.agent._cloud(), laptop.agent._now, laptop.agent._random
    )
    session.pull()
    assert _history(laptop, record) == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP)]
    # its own words are kept at v3 and still queued; until the cloud has them, the
    # cloud's word on the record's state (current: v2) stands, as for any pulled state
    assert laptop.agent.pending_ops() >= 1
    session.push()
    assert [op for op, _ in session.report.conflicts] == [laptops]
    laptop.agent.sync()
    phone.agent.sync()
    cloud = _cloud_history(fleet, phone.user.space_id, record)
    assert cloud == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP)]
    assert _history(laptop, record) == cloud == _history(phone, record)


def test_a_correction_after_its_own_version_moved_aside_takes_a_free_number(
    fleet: Fleet,
) -> None:
    """The laptop's queued v2 moved to v3 when it pulled the phone's v2 (current: v2).
    Correcting again numbers the new words above every version held (v4), not
    current + 1, which the moved-aside words hold (found by the simulator, seed 147:
    ``UNIQUE constraint failed: record_versions.record_id, record_versions.version``)."""
    phone, laptop, record = _start(fleet)
    _correct(phone, record, ON_PHONE, "c1")
    laptops = _correct(laptop, record, ON_LAPTOP, "c2")
    phone.go_online()
    phone.agent.sync()
    laptop.go_online()
    session = SyncSession(
        laptop.agent._debug_db(), laptop.agent._cloud(), laptop.agent._now, laptop.agent._random
    )
    session.pull()
    assert _history(laptop, record) == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP)]
    laptop.go_offline()
    again = _correct(laptop, record, AGAIN_ON_LAPTOP, "c3")
    history = _history(laptop, record)
    assert history == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP), (4, AGAIN_ON_LAPTOP)]
    assert _current(laptop, record) == AGAIN_ON_LAPTOP
    laptop.go_online()
    report = laptop.agent.sync()
    assert not report.refused, report.refused
    assert laptops in [op for op, _ in report.conflicts]  # it never saw the phone's v2
    assert laptop.agent.receipt(again) is not None
    phone.agent.sync()
    cloud = _cloud_history(fleet, phone.user.space_id, record)
    assert cloud == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP), (4, AGAIN_ON_LAPTOP)]
    assert _history(laptop, record) == cloud == _history(phone, record)
    assert _current(laptop, record) == _current(phone, record) == AGAIN_ON_LAPTOP


def test_two_corrections_on_one_device_against_one_on_another(fleet: Fleet) -> None:
    phone, laptop, record = _start(fleet)
    _correct(phone, record, ON_PHONE, "c1")
    _correct(laptop, record, ON_LAPTOP, "c2")
    _correct(laptop, record, AGAIN_ON_LAPTOP, "c3")
    phone.go_online()
    phone.agent.sync()
    laptop.go_online()
    report = laptop.agent.sync()
    assert len(report.conflicts) == 2  # neither laptop correction saw the phone's
    phone.agent.sync()
    cloud = _cloud_history(fleet, phone.user.space_id, record)
    assert cloud == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP), (4, AGAIN_ON_LAPTOP)]
    assert _history(laptop, record) == cloud == _history(phone, record)


def test_a_correction_after_hearing_of_the_other_is_no_conflict(fleet: Fleet) -> None:
    phone, laptop, record = _start(fleet)
    _correct(phone, record, ON_PHONE, "c1")
    phone.go_online()
    phone.agent.sync()
    laptop.go_online()
    laptop.agent.sync()  # the laptop now holds v2
    _correct(laptop, record, ON_LAPTOP, "c2")
    assert not laptop.agent.sync().conflicts
    phone.agent.sync()
    assert _history(phone, record) == _history(laptop, record)


def test_a_version_1_device_sends_no_base_and_still_converges(tmp_path: Path) -> None:
    """Protocol 1 has no ``base_version``: the race is not flagged, but the device's
    own version still moves to the cloud's number, so histories agree."""
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        fleet = Fleet(cloud, tmp_path / "devices")
        try:
            phone, laptop, record = _start(fleet)
            laptop.agent._protocol_versions = (1, 1)  # an old device
            laptop.agent._client = None
            _correct(phone, record, ON_PHONE, "c1")
            _correct(laptop, record, ON_LAPTOP, "c2")
            phone.go_online()
            phone.agent.sync()
            laptop.go_online()
            report = laptop.agent.sync()
            assert laptop.agent.protocol_version == 1
            assert not report.conflicts
            phone.agent.sync()
            view = _cloud_history(fleet, phone.user.space_id, record)
            assert view == [(1, FIRST), (2, ON_PHONE), (3, ON_LAPTOP)]
            assert _history(laptop, record) == view == _history(phone, record)
        finally:
            fleet.close()


def test_a_version_2_device_corrects_through_a_version_1_cloud(tmp_path: Path) -> None:
    """The push's ops are built for the version negotiated: a v2 device stepping down
    to a v1-only cloud sends no ``base_version`` (which that cloud refuses, per op)."""
    from cloud.config import CloudConfig

    config = CloudConfig(
        store_url=f"sqlite:///{tmp_path / 'records.db'}",
        key_store_path=tmp_path / "keys.db",
        supported_versions=(1, 1),
    )
    with RunningCloud(config) as cloud:
        fleet = Fleet(cloud, tmp_path / "devices")
        try:
            phone, _laptop, record = _start(fleet)
            assert phone.agent.protocol_version == 1  # stepped down while enrolling
            phone.go_online()
            sent: list[bytes] = []
            inner = phone.transport.inner
            original = inner.handle_request

            def spy(request):  # type: ignore[no-untyped-def]
                sent.append(request.content)
                return original(request)

            inner.handle_request = spy  # type: ignore[method-assign]
            op = _correct(phone, record, ON_PHONE, "c1")
            report = phone.agent.sync()
            assert not report.refused, report.refused
            receipt = phone.agent.receipt(op)
            assert receipt is not None and receipt.status is ReceiptStatus.APPLIED
            assert not any(b"base_version" in body for body in sent)
        finally:
            fleet.close()


def test_a_version_1_push_carrying_base_version_is_refused_for_that_op_alone(
    tmp_path: Path,
) -> None:
    import httpx

    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        fleet = Fleet(cloud, tmp_path / "devices")
        try:
            phone, _laptop, record = _start(fleet)
            credential = phone.agent._cloud().credential
            op = {
                "kind": "correct",
                "op_id": "op_" + "a" * 26,
                "made_at": "2026-11-30T00:00:00Z",
                "initiated_by": "user",
                "record_id": record,
                "text": FIRST,
                "conversation_id": "c0",
                "source_episode_ids": ["ep_" + "b" * 26],
                "base_version": 1,
            }
            answer = httpx.post(
                f"{cloud.url}/v1/push",
                json={"protocol_version": 1, "ops": [op]},
                headers={"authorization": f"Bearer {credential}"},
            )
            assert answer.status_code == 200
            (receipt,) = answer.json()["receipts"]
            assert receipt["status"] == "refused" and receipt["code"] == "malformed"
            assert "'base_version' needs protocol version 2" in receipt["reason"]
        finally:
            fleet.close()
