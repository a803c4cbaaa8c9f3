"""Live sync end to end: real uvicorn on loopback, real SQLCipher devices over httpx.

Three online devices of one user in live mode; a forget on one reaches the other two,
whose keys and words are shredded without anyone calling ``sync``. On PostgreSQL two
cloud services serve one database and the devices are split between them, so the
wake-up must cross processes through LISTEN/NOTIFY.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cloud.config import CloudConfig
from device.agent import DeviceAgent
from device.live import LiveEvent, LiveEventKind, LiveSync
from protocol.model import LifecycleState
from protocol.subset import SubsetBudget, SubsetPolicy
from simulator.cloud_runner import RunningCloud
from simulator.forensics import scan_device_database
from simulator.transport import SwitchableTransport

pytestmark = pytest.mark.e2e

DEADLINE = 10.0  # seconds: generous; the one-second figure is measured by the bench
WAIT = 20.0  # the live pull's wait: longer than the idle stretch below
IDLE = 1.5  # seconds of quiet in which a polling loop would show many requests
EACH = 25  # records each of two users writes while both devices are live
SECRET = "My locker code at the gym is 4711."
KEPT = "I drink tea every morning."


@dataclass
class LiveDevice:
    name: str
    agent: DeviceAgent
    transport: SwitchableTransport
    passphrase: str
    cloud: RunningCloud
    events: list[LiveEvent] = field(default_factory=list)
    live: LiveSync | None = None

    def shredded(self, record_id: str) -> bool:
        return any(e.report is not None and record_id in e.report.shredded for e in self.events)


class Watch:
    """Device events land here; the test waits on the condition, never sleeps."""

    def __init__(self) -> None:
        self.cond = threading.Condition()

    def listener(self, device: LiveDevice) -> Callable[[LiveEvent], None]:
        def on_event(event: LiveEvent) -> None:
            with self.cond:
                device.events.append(event)
                self.cond.notify_all()

        return on_event

    def until(self, predicate: Callable[[], bool], what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(predicate, DEADLINE), f"not within {DEADLINE} s: {what}"


def _parked(clouds: list[RunningCloud]) -> int:
    """Live pulls waiting in the clouds' app processes (the app's own service)."""
    total = 0
    for cloud in clouds:
        assert cloud._server is not None
        app: Any = cloud._server.config.app
        total += app.state.service.live.waiting
    return total


def _holds(device: LiveDevice, record_id: str) -> bool:
    return any(
        v.record_id == record_id and v.lifecycle == LifecycleState.ACTIVE.value
        for v in device.agent.what_do_you_know()
    )


@pytest.fixture
def make_devices(tmp_path: Path) -> Iterator[Callable[[list[RunningCloud]], list[LiveDevice]]]:
    """Phone, laptop and tablet of one user, enrolled on the given clouds in turn."""
    made: list[LiveDevice] = []

    def make(clouds: list[RunningCloud]) -> list[LiveDevice]:
        space_id, code = clouds[0].operator.add_user("ada")
        for index, name in enumerate(("phone", "laptop", "tablet")):
            cloud = clouds[index % len(clouds)]
            transport = SwitchableTransport()
            secret = f"passphrase of ada's {name}"
            agent = DeviceAgent.create(
                tmp_path / name, secret, device_name=name, cloud_url=cloud.url, transport=transport
            )
            agent.enroll(code if index == 0 else clouds[0].operator.new_enrollment_code(space_id))
            made.append(LiveDevice(name, agent, transport, secret, cloud))
        return made

    yield make
    for device in made:
        device.agent.close()


def _forget_reaches_every_live_device(devices: list[LiveDevice]) -> None:
    phone, laptop, tablet = devices
    others = [laptop, tablet]
    watch = Watch()
    phone.agent.say(f"{SECRET} {KEPT}", "gym")
    record = phone.agent.remember(SECRET, "gym").record_id
    kept = phone.agent.remember(KEPT, "gym").record_id
    assert record is not None and kept is not None
    with ExitStack() as stack:
        for device in devices:
            device.live = stack.enter_context(
                device.agent.live(wait=WAIT, on_event=watch.listener(device))
            )
        # the phone's first live sync pushes the records; the others hear of them live
        watch.until(lambda: all(_holds(d, record) for d in others), "the records reach all")
        keys = {d.name: d.agent.data_keys_for(record) for d in others}
        assert all(keys.values())
        for device in others:  # positive control: the scanner sees what it must later miss
            needles = {
                "text": SECRET.encode(),
                **{f"key{i}": k for i, k in enumerate(keys[device.name])},
            }
            assert not scan_device_database(device.agent.db_path, device.passphrase, needles).clean

        phone.agent.forget_permanently(record)  # no one calls sync from here on

        watch.until(lambda: all(d.shredded(record) for d in others), "the forget reaches all")
        for device in others:
            assert device.agent.data_keys_for(record) == []
            view = next(v for v in device.agent.what_do_you_know() if v.record_id == record)
            assert view.lifecycle == LifecycleState.FORGOTTEN.value and view.text is None
            assert _holds(device, kept)
            assert all(hit.record_id != record for hit in device.agent.recall("locker code"))
            needles = {
                "text": SECRET.encode(),
                **{f"key{i}": k for i, k in enumerate(keys[device.name])},
            }
            scan = scan_device_database(device.agent.db_path, device.passphrase, needles)
            assert scan.clean and scan.pages > 0 and scan.unreadable_pages == 0, scan.hits
        # every device acknowledged: nothing is pending in the cloud
        watch.until(
            lambda: (
                phone.cloud.operator.pending(phone.agent.space_id or "").forgets[0].pending == []
            ),
            "every device acknowledges the key destruction",
        )

        # not a polling loop: parked in live pulls, the devices make no requests at all
        clouds = list({id(d.cloud): d.cloud for d in devices}.values())
        watch.until(lambda: _parked(clouds) == len(devices), "every device parked in a pull")
        before = [d.transport.requests for d in devices]
        quiet = threading.Event()
        quiet.wait(IDLE)  # an interval of silence is what is measured here
        after = [d.transport.requests for d in devices]
        assert [b - a for a, b in zip(before, after, strict=True)] == [0, 0, 0]

    # leaving the block stopped every live loop, each ending its own live pull at once
    for device in devices:
        assert device.live is not None and not device.live.alive
        assert device.events[-1].kind is LiveEventKind.STOPPED


def test_a_forget_reaches_every_live_device_on_sqlite(
    tmp_path: Path, make_devices: Callable[[list[RunningCloud]], list[LiveDevice]]
) -> None:
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        _forget_reaches_every_live_device(make_devices([cloud]))


@pytest.mark.postgres
def test_a_forget_crosses_cloud_processes_on_postgresql(
    postgres_database: Callable[[], str],
    tmp_path: Path,
    make_devices: Callable[[list[RunningCloud]], list[LiveDevice]],
) -> None:
    config = CloudConfig(store_url=postgres_database(), key_store_path=tmp_path / "keys.db")
    with RunningCloud(config) as one, RunningCloud(config) as two:
        devices = make_devices([one, two])
        assert [d.cloud for d in devices] == [one, two, one]  # the laptop is on the other
        _forget_reaches_every_live_device(devices)


def test_a_pin_in_live_mode_brings_the_record_at_once(
    tmp_path: Path, make_devices: Callable[[list[RunningCloud]], list[LiveDevice]]
) -> None:
    """A pin changes the subset, not the feed, so no live pull wakes for it: the agent
    syncs at once itself, instead of leaving the record until the wait passes."""
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        phone, laptop, _tablet = make_devices([cloud])
        laptop.agent.set_subset_policy(SubsetPolicy(budget=SubsetBudget(max_records=1)))
        phone.agent.say(f"{SECRET} {KEPT}", "gym")
        made = [phone.agent.remember(text, "gym").record_id for text in (SECRET, KEPT)]
        phone.agent.sync()
        laptop.agent.sync()
        missing = [r for r in made if r is not None and not laptop.agent.holds(r)]
        assert len(missing) == 1  # the budget leaves one out
        watch = Watch()
        with laptop.agent.live(wait=WAIT, on_event=watch.listener(laptop)):
            watch.until(lambda: _parked([cloud]) == 1, "the laptop parked in a live pull")
            laptop.agent.set_subset_policy(SubsetPolicy(budget=SubsetBudget(max_records=2)))
            watch.until(lambda: laptop.agent.holds(missing[0]), "the record enters at once")
            laptop.agent.set_subset_policy(SubsetPolicy(budget=SubsetBudget(max_records=1)))
            laptop.agent.pin(missing[0])
            watch.until(
                lambda: laptop.agent.holds(missing[0]) and len(laptop.agent.held_records()) == 1,
                "the pin keeps it and the other leaves at once",
            )


def test_a_device_that_was_offline_catches_up_when_it_comes_back(
    tmp_path: Path, make_devices: Callable[[list[RunningCloud]], list[LiveDevice]]
) -> None:
    """Offline is backed off (through the injected sleeper), then a full sync runs."""
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        phone, laptop, _tablet = make_devices([cloud])
        watch = Watch()
        phone.agent.say(SECRET, "gym")
        record = phone.agent.remember(SECRET, "gym").record_id
        assert record is not None
        phone.agent.sync()
        laptop.agent.sync()
        pauses: list[float] = []
        back = threading.Event()

        def sleeper(seconds: float, stop: threading.Event) -> None:
            pauses.append(seconds)
            laptop.transport.online = True  # the network returns during the back-off
            back.set()

        laptop.transport.online = False
        with laptop.agent.live(wait=WAIT, on_event=watch.listener(laptop), sleeper=sleeper):
            watch.until(lambda: back.is_set(), "the laptop backs off")
            phone.agent.forget_permanently(record)
            phone.agent.sync()
            watch.until(lambda: laptop.shredded(record), "the laptop catches up")
        kinds = [e.kind for e in laptop.events]
        assert kinds[0] is LiveEventKind.OFFLINE and pauses[0] == 0.5
        assert laptop.agent.data_keys_for(record) == []


def test_the_users_own_calls_and_the_live_loop_share_the_database_safely(
    tmp_path: Path, make_devices: Callable[[list[RunningCloud]], list[LiveDevice]]
) -> None:
    """Both users write while the live threads push and pull on the same SQLCipher
    connections (the laptop applies the phone's records while its user writes): every
    op arrives everywhere and no step fails."""
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        phone, laptop, _tablet = make_devices([cloud])
        watch = Watch()
        made: dict[str, list[str | None]] = {"phone": [], "laptop": []}
        errors: list[BaseException] = []

        def write(device: LiveDevice) -> None:
            try:
                _write(device)
            except BaseException as exc:
                errors.append(exc)
                raise

        def _write(device: LiveDevice) -> None:
            for n in range(EACH):
                sentence = f"The {device.name} keeps bicycle number {n} in the shed."
                device.agent.say(sentence, f"c{n}")
                made[device.name].append(device.agent.remember(sentence, f"c{n}").record_id)
                device.agent.what_do_you_know()

        with (
            phone.agent.live(wait=WAIT, on_event=watch.listener(phone)),
            laptop.agent.live(wait=WAIT, on_event=watch.listener(laptop)),
        ):
            other = threading.Thread(target=write, args=(phone,))
            other.start()
            write(laptop)
            other.join()
            assert not errors, errors
            every = [r for records in made.values() for r in records if r is not None]
            assert len(every) == 2 * EACH
            for device in (phone, laptop):

                def settled(d: LiveDevice = device) -> bool:
                    return d.agent.pending_ops() == 0 and all(_holds(d, r) for r in every)

                watch.until(settled, "every record arrives and every queue empties")
        for device in (phone, laptop):
            failed = [e for e in device.events if e.kind is LiveEventKind.REFUSED]
            assert not failed, failed


def test_the_live_command_prints_what_it_applies(
    tmp_path: Path,
    make_devices: Callable[[list[RunningCloud]], list[LiveDevice]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from device.cli import main

    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        phone, laptop, _tablet = make_devices([cloud])
        phone.agent.say(SECRET, "gym")
        record = phone.agent.remember(SECRET, "gym").record_id
        phone.agent.sync()
        laptop.agent.close()  # the command opens the laptop's database itself
        monkeypatch.setenv("MEMSYNC_PASSPHRASE", laptop.passphrase)
        directory = str(laptop.agent.directory)
        assert main(["device", "live", "--dir", directory, "--seconds", "1", "--wait", "5"]) == 0
        out = capsys.readouterr().out
        assert "synced: applied" in out and "stopped: live sync stopped" in out
        assert main(["device", "live", "--dir", directory, "--seconds", "1", "--wait", "30"]) == 2
        assert "at most 25 seconds" in capsys.readouterr().err
        reopened = DeviceAgent.open(laptop.agent.directory, laptop.passphrase)
        try:
            assert any(v.record_id == record for v in reopened.what_do_you_know())
        finally:
            reopened.close()


def test_the_live_pull_route(tmp_path: Path) -> None:
    """Over HTTP: a quiet space answers an empty page at the same cursor when the wait
    ends; bad input is refused before any waiting, naming the field or the cursor."""
    import httpx
    from nacl.public import PrivateKey

    from protocol.messages import EnrollRequest

    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        _space, code = cloud.operator.add_user("ada")
        enrolled = cloud.operator.enroll(
            EnrollRequest(
                code=code, device_name="probe", public_key=bytes(PrivateKey.generate().public_key)
            )
        )
        headers = {"authorization": f"Bearer {enrolled.credential}"}
        with httpx.Client(base_url=cloud.url, headers=headers, timeout=DEADLINE) as http:
            first = http.post("/v1/pull", json={"protocol_version": 2}).json()
            quiet = http.post(
                "/v1/pull", json={"protocol_version": 2, "cursor": first["cursor"], "wait": 0.2}
            )
            assert quiet.status_code == 200
            assert quiet.json() == {
                "protocol_version": 2,
                "changes": [],
                "cursor": first["cursor"],
                "has_more": False,
            }
            old = http.post(
                "/v1/pull", json={"protocol_version": 1, "cursor": first["cursor"], "wait": 0.2}
            )
            assert old.status_code == 400  # live pull is protocol 2
            assert "protocol version 2" in old.json()["message"]
            too_long = http.post("/v1/pull", json={"protocol_version": 2, "wait": 60})
            assert too_long.status_code == 400
            assert too_long.json()["code"] == "malformed_request"
            assert "wait" in too_long.json()["message"]
            bad_cursor = http.post(
                "/v1/pull", json={"protocol_version": 2, "cursor": "not-ours", "wait": 20}
            )
            assert bad_cursor.status_code == 400
            assert bad_cursor.json()["code"] == "malformed_cursor"
