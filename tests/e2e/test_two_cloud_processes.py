"""Two real ``memsync cloud serve`` processes on ONE PostgreSQL database, devices spread
across both, pass the same invariants as one process: the service holds no state of
its own.

Each cloud is a subprocess on its own loopback port; devices are real agents with their
own SQLCipher files, enrolled round robin at the two processes. Pushes run at the same
time from threads; a forget made through one process reaches the devices attached to
the other; one process is SIGKILLed mid-batch while the other keeps serving; a device
cut off from its process fails over to the other.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from device.errors import Offline
from device.views import SyncReport
from protocol.model import LifecycleState
from simulator.clock import FleetClock
from simulator.cloud_processes import CloudProcesses
from simulator.fleet import DeviceHandle, Fleet
from simulator.transport import Fault, FaultKind
from tests.simulator.test_faults import cloud_state, remember

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

FORGOTTEN = LifecycleState.FORGOTTEN.value


@pytest.fixture
def clouds(postgres_database: Callable[[], str], tmp_path: Path) -> Iterator[CloudProcesses]:
    with CloudProcesses.postgres(postgres_database(), tmp_path / "cloud", 2) as running:
        yield running


def _sync_together(devices: list[DeviceHandle]) -> list[SyncReport]:
    """Every device syncs at the same moment, each from its own thread."""
    start = threading.Barrier(len(devices))

    def sync(handle: DeviceHandle) -> SyncReport:
        start.wait(timeout=60)
        return handle.agent.sync()

    with ThreadPoolExecutor(max_workers=len(devices)) as pool:
        return list(pool.map(sync, devices))


def _assert_converged(clouds: CloudProcesses, space_id: str, devices: list[DeviceHandle]) -> None:
    changes, records = cloud_state(clouds.operator, space_id)
    seqs = [c.seq for c in changes]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # one server order
    for handle in devices:
        assert handle.agent.pending_ops() == 0, handle
        views = {v.record_id: v for v in handle.agent.list_records()}
        for record_id, state in records.items():
            view = views.get(record_id)
            if state.lifecycle_state.value == FORGOTTEN:
                assert view is None or view.text is None, (handle, record_id)
                assert not handle.agent.data_keys_for(record_id), (handle, record_id)
            else:
                assert view is not None and view.version == state.version == 1, (
                    handle,
                    record_id,
                )
                assert view.lifecycle == state.lifecycle_state.value


def test_devices_on_two_processes_converge_after_concurrent_pushes_and_a_forget(
    clouds: CloudProcesses, tmp_path: Path
) -> None:
    fleet = Fleet(
        clouds, tmp_path / "devices", clock=FleetClock(tick=timedelta(seconds=1)),
        rng=random.Random(6),
    )  # fmt: skip
    ada = fleet.add_user("ada")
    devices = [fleet.add_device(ada, n) for n in ("phone", "laptop", "tablet", "watch")]
    phone, laptop, tablet, watch = devices
    assert [d.home_url for d in devices] == clouds.urls * 2  # round robin over both
    bob = fleet.add_user("bob")
    bobs = [fleet.add_device(bob, n) for n in ("phone", "laptop")]

    made: dict[str, DeviceHandle] = {}
    for i in range(3):
        for handle in devices + bobs:
            record, _ = remember(handle, f"My {handle.name} note {i} is about rowing.", f"c{i}")
            made[record] = handle
    reports = _sync_together(devices + bobs)
    assert all(r.refused == [] for r in reports)
    _sync_together(devices + bobs)  # everyone pulls what the others pushed meanwhile
    _assert_converged(clouds, ada.space_id, devices)
    _assert_converged(clouds, bob.space_id, bobs)
    assert len({v.record_id for v in watch.agent.list_records()}) == 12  # ada's only

    # forgotten through process 0, by a device that did not make the record
    target = next(r for r, maker in made.items() if maker is laptop)
    keys_on_watch = watch.agent.data_keys_for(target)
    assert keys_on_watch
    phone.agent.forget_permanently(target)
    phone.agent.sync()
    (forget,) = clouds.operator.pending(ada.space_id).forgets
    assert {d.device_name for d in forget.pending} == {"laptop", "tablet", "watch"}

    _sync_together([laptop, watch])  # both attached to process 1
    assert not laptop.agent.data_keys_for(target) and not watch.agent.data_keys_for(target)
    assert not set(keys_on_watch) & set(watch.agent.data_keys_for(target))
    (forget,) = clouds.operator.pending(ada.space_id).forgets
    assert {d.device_name for d in forget.pending} == {"tablet"}
    tablet.agent.sync()
    assert not [f for f in clouds.operator.pending(ada.space_id).forgets if f.pending]
    _assert_converged(clouds, ada.space_id, devices)
    _assert_converged(clouds, bob.space_id, bobs)
    assert not clouds.operator.pending(bob.space_id).forgets  # bob's space untouched
    fleet.close()


def test_one_process_killed_mid_batch_while_the_other_serves_and_fail_over(
    clouds: CloudProcesses, tmp_path: Path
) -> None:
    fleet = Fleet(clouds, tmp_path / "devices", clock=FleetClock(), rng=random.Random(8))
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    assert (phone.home_url, laptop.home_url) == tuple(clouds.urls)
    second = clouds[1]
    killed: list[int | None] = []

    def kill_and_restart() -> None:
        second.kill()
        killed.append(second.returncode)
        # while process 1 is down, process 0 keeps serving the other device
        remember(phone, "My uncle repairs clocks in Bern.", "c9")
        phone.agent.sync()
        second.start()

    record, _ = remember(laptop, "My niece plays the oboe.", "c1")
    queued = laptop.agent.pending_ops()
    laptop.transport.inject(
        Fault(kind=FaultKind.SERVER_RESTART, path="/v1/push", action=kill_and_restart)
    )
    with pytest.raises(Offline):
        laptop.agent.sync()
    assert killed and killed[0] is not None and killed[0] < 0  # SIGKILL
    committed = cloud_state(clouds.operator, ada.space_id)
    assert committed[1][record].version == 1
    report = laptop.agent.sync()
    assert report.duplicates == queued and report.refused == []
    assert cloud_state(clouds.operator, ada.space_id)[0][: len(committed[0])] == committed[0]

    # the laptop is cut off from process 1 only: it fails over to process 0
    fleet.partition([laptop], from_urls=[second.url])
    remember(laptop, "My niece practises on Thursdays.", "c2")
    with pytest.raises(Offline, match="partitioned"):
        laptop.agent.sync()
    laptop.fail_over(clouds[0].url)
    assert not laptop.partitioned
    laptop.agent.sync()
    phone.agent.sync()
    fleet.heal()
    laptop.go_home()
    laptop.agent.sync()
    _assert_converged(clouds, ada.space_id, [phone, laptop])
    fleet.close()
