"""Fleet-level faults against a real cloud: partitions and healing, skewed device clocks,
and devices that crash and reopen. Every device is a real agent with its own SQLCipher
file; the cloud is the FastAPI app under uvicorn on loopback.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloud.service import CloudService
from device.errors import Offline
from protocol.model import LifecycleState
from simulator.clock import FleetClock, SkewedClock
from simulator.cloud_runner import RunningCloud
from simulator.errors import FaultSpecError, FleetError
from simulator.fleet import DeviceHandle, Fleet
from simulator.transport import PARTITIONED, Fault, FaultKind
from tests.simulator.test_faults import cloud_state, in_cloud, remember

FORGOTTEN = LifecycleState.FORGOTTEN.value
CLOUD_EPOCH = datetime(2030, 6, 1, 12, 0, tzinfo=UTC)  # far from every device clock


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    with RunningCloud.sqlite(
        tmp_path / "cloud", clock=FleetClock(CLOUD_EPOCH, tick=timedelta(seconds=1))
    ) as running:
        yield running


def _converged(operator: CloudService, space_id: str, devices: list[DeviceHandle]) -> None:
    """Every device equals the cloud's view of every record the cloud holds."""
    _changes, records = cloud_state(operator, space_id)
    for handle in devices:
        assert handle.agent.pending_ops() == 0, handle
        views = {v.record_id: v for v in handle.agent.list_records()}
        for record_id, state in records.items():
            view = views.get(record_id)
            if state.lifecycle_state.value == FORGOTTEN:
                assert view is None or view.text is None, (handle, record_id)
                assert not handle.agent.data_keys_for(record_id), (handle, record_id)
            else:
                assert view is not None, (handle, record_id)
                assert (view.lifecycle, view.version) == (
                    state.lifecycle_state.value,
                    state.version,
                ), (handle, record_id)
    assert not [f for f in operator.pending(space_id).forgets if f.pending]


# --- partitions ------------------------------------------------------------------------


def test_a_partitioned_group_works_offline_and_converges_after_heal(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices", clock=FleetClock(), rng=random.Random(1))
    ada = fleet.add_user("ada")
    phone, tablet, laptop = (fleet.add_device(ada, n) for n in ("phone", "tablet", "laptop"))
    shared, _ = remember(laptop, "My brother keeps a sailboat in Kiel.", "c0")
    for handle in (laptop, phone, tablet):
        handle.agent.sync()

    fleet.partition([phone, tablet])
    assert phone.partitioned and tablet.partitioned and not laptop.partitioned
    mine, _ = remember(phone, "My dentist moved to Harbour Street.", "c1")
    tablet.agent.dont_use(shared)
    for handle in (phone, tablet):
        with pytest.raises(Offline, match="partitioned"):
            handle.agent.sync()
    laptop.agent.forget_permanently(shared)
    laptop.agent.sync()
    # the cut-off devices still hold the keys, and the cloud says so
    (forget,) = cloud.operator.pending(ada.space_id).forgets
    assert {d.device_name for d in forget.pending} == {"phone", "tablet"}
    assert in_cloud(cloud.operator, ada.space_id, mine) is None
    assert phone.agent.data_keys_for(shared)

    fleet.heal()
    assert not phone.partitioned
    for _round in range(2):
        for handle in (phone, tablet, laptop):
            handle.agent.sync()
    _converged(cloud.operator, ada.space_id, [phone, tablet, laptop])
    assert cloud.operator.record_status(ada.space_id, shared).lifecycle_state.value == FORGOTTEN
    # the tablet's offline "don't use" of the forgotten record never brought it back
    assert next(v for v in tablet.agent.list_records() if v.record_id == shared).text is None
    assert {e.kind for e in phone.transport.log} == {PARTITIONED}
    fleet.close()


def test_partitions_refuse_unknown_processes_and_heal_one_group(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    with pytest.raises(FleetError, match=r"http://127\.0\.0\.1:1.*not a process of this cloud"):
        fleet.partition([phone], from_urls=["http://127.0.0.1:1"])
    assert not phone.partitioned
    fleet.partition([phone, laptop], from_urls=cloud.urls)
    fleet.heal([laptop])
    assert phone.partitioned and not laptop.partitioned
    with pytest.raises(FleetError, match="cloud_index 3 is out of range; the cloud has 1"):
        fleet.add_device(ada, "tablet", cloud_index=3)
    with pytest.raises(FleetError, match="already has a device named 'phone'"):
        fleet.add_device(ada, "phone")
    fleet.close()


# --- clock skew ------------------------------------------------------------------------


def test_skewed_clocks_converge_and_the_server_orders_by_arrival(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet_clock = FleetClock(tick=timedelta(seconds=1))
    fleet = Fleet(cloud, tmp_path / "devices", clock=fleet_clock, rng=random.Random(2))
    ada = fleet.add_user("ada")
    ahead = fleet.add_device(ada, "phone", clock_skew=timedelta(hours=7))
    behind = fleet.add_device(ada, "laptop", clock_skew=-timedelta(hours=7, minutes=30))
    assert ahead.clock() - behind.clock() > timedelta(hours=14)

    first, _ = remember(ahead, "My landlord lives on the top floor.", "c1")
    ahead.agent.sync()  # arrives first, though its clock says it was made hours later
    typed_at = behind.clock()
    second, _ = remember(behind, "My landlord waters the plants on Sundays.", "c2")
    third, _ = remember(behind, "My landlord plays the cello at night.", "c3")
    fourth, _ = remember(ahead, "My landlord owns a grey cat.", "c4")
    ahead.agent.sync()  # the ahead device's later record arrives before the behind one's
    behind.agent.sync()
    ahead.agent.sync()

    changes, records = cloud_state(cloud.operator, ada.space_id)
    arrival = [c.record_id for c in changes if c.kind == "record_version"]
    assert arrival == [first, fourth, second, third]  # server order is arrival order
    seqs = [c.seq for c in changes]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    for record_id in (first, second, third, fourth):
        # the cloud stamps versions with its own clock, never with a device's
        recorded = records[record_id].recorded_at
        assert recorded is not None and recorded >= CLOUD_EPOCH
    _converged(cloud.operator, ada.space_id, [ahead, behind])
    # when the user typed is the device's own claim, kept as it said (skew and all)
    episodes = [c.episode_id for c in changes if c.kind == "episode" and c.episode_id]
    with cloud.operator.store.session(ada.space_id) as s:
        rows = s.episodes(ada.space_id, episodes)
    typed = [rows[e].typed_at for e in episodes]  # in arrival order: first, fourth, second, third
    assert typed[0] > typed[1] - timedelta(hours=1) > typed[2]  # not the server's order
    assert typed_at < typed[2] <= behind.clock() < CLOUD_EPOCH
    assert fleet_clock.peek() - typed[2] > timedelta(hours=7)
    fleet.close()


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    skews=st.lists(st.integers(-72 * 60, 72 * 60), min_size=2, max_size=3),
    order=st.randoms(use_true_random=False),
)
def test_any_skew_converges_in_arrival_order(
    tmp_path_factory: pytest.TempPathFactory, skews: list[int], order: random.Random
) -> None:
    root = tmp_path_factory.mktemp("skew")
    with RunningCloud.sqlite(root / "cloud", clock=FleetClock(CLOUD_EPOCH)) as running:
        fleet = Fleet(running, root / "devices", clock=FleetClock(), rng=random.Random(3))
        ada = fleet.add_user("ada")
        devices = [
            fleet.add_device(ada, f"d{i}", clock_skew=timedelta(minutes=m))
            for i, m in enumerate(skews)
        ]
        pushed: list[str] = []
        for step in range(2 * len(devices)):
            handle = order.choice(devices)
            record, _ = remember(handle, f"My teammate number {step} bakes bread.", f"c{step}")
            handle.agent.sync()
            pushed.append(record)
        for handle in devices:
            handle.agent.sync()
        changes, _ = cloud_state(running.operator, ada.space_id)
        assert [c.record_id for c in changes if c.kind == "record_version"] == pushed
        _converged(running.operator, ada.space_id, devices)
        fleet.close()


def test_clocks_refuse_to_run_backwards_or_be_naive() -> None:
    clock = FleetClock()
    with pytest.raises(FaultSpecError, match="never runs backwards"):
        clock.advance(-timedelta(seconds=1))
    with pytest.raises(FaultSpecError, match="cannot set it to"):
        clock.set(clock.peek() - timedelta(days=1))
    with pytest.raises(FaultSpecError, match="naive"):
        FleetClock(datetime(2026, 1, 1))
    with pytest.raises(FaultSpecError, match="naive"):
        SkewedClock(lambda: datetime(2026, 1, 1), timedelta(hours=1))()
    skewed = SkewedClock(clock, -timedelta(hours=3))
    clock.advance(timedelta(minutes=5))
    assert clock.peek() - skewed() == timedelta(hours=3)


# --- crashes ---------------------------------------------------------------------------


def test_a_crash_before_sync_keeps_every_queued_op(cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = Fleet(cloud, tmp_path / "devices", clock=FleetClock(), rng=random.Random(4))
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    record, _ = remember(phone, "My godson starts school in May.", "c1")
    queued = phone.agent.pending_ops()
    phone.crash()
    assert phone.crashed
    with pytest.raises(FleetError, match="'phone' crashed; reopen"):
        phone.agent.sync()
    phone.reopen()
    with pytest.raises(FleetError, match="'phone' is running"):
        phone.reopen()
    assert phone.agent.pending_ops() == queued
    report = phone.agent.sync()
    assert report.applied == queued and report.duplicates == 0
    assert cloud.operator.record_status(ada.space_id, record).version == 1
    fleet.close()


def test_a_crash_after_the_server_committed_replays_as_duplicates(
    cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = Fleet(cloud, tmp_path / "devices", clock=FleetClock(), rng=random.Random(5))
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    record, _ = remember(phone, "My godson starts school in May.", "c1")
    queued = phone.agent.pending_ops()
    phone.transport.inject(Fault(kind=FaultKind.DROP_RESPONSE, path="/v1/push"))
    with pytest.raises(Offline):
        phone.agent.sync()
    committed = cloud_state(cloud.operator, ada.space_id)
    phone.crash()  # dies before it could retry
    phone.reopen()
    assert phone.agent.pending_ops() == queued
    report = phone.agent.sync()
    assert report.duplicates == queued and report.refused == []
    assert cloud_state(cloud.operator, ada.space_id) == committed
    laptop.agent.sync()
    assert committed[1][record].version == 1
    _converged(cloud.operator, ada.space_id, [phone, laptop])
    assert phone.crashes == 1
    fleet.close()
