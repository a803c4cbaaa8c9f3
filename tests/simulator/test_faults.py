"""Every fault of the simulator's transport, against a real cloud over real HTTP.

The device's real sync code runs unchanged behind ``FaultInjectingTransport``; each test
injects one fault and checks what the server committed (through the operator handle)
and what the device stored. The transport's own rules are a Hypothesis property over an
in-memory server at the seam.
"""

from __future__ import annotations

import contextlib
import random
import signal
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cloud.config import CloudConfig
from cloud.errors import NotFound
from cloud.service import CloudService
from cloud.store.base import ChangeRow
from device.errors import Offline, Refused
from protocol.messages import RecordState
from protocol.model import LifecycleState
from protocol.operations import ReceiptStatus
from simulator.clock import FleetClock
from simulator.cloud_processes import CloudProcesses
from simulator.cloud_runner import RunningCloud
from simulator.errors import FaultSpecError
from simulator.fleet import DeviceHandle, Fleet
from simulator.transport import (
    ANSWER_LOST,
    NOT_DELIVERED,
    REPLAYED,
    EveryRequest,
    Fault,
    FaultInjectingTransport,
    FaultKind,
    RandomFaults,
)

PUSH = "/v1/push"
FORGOTTEN = LifecycleState.FORGOTTEN.value
CloudState = tuple[list[ChangeRow], dict[str, RecordState]]


def cloud_state(operator: CloudService, space_id: str) -> CloudState:
    """Everything the cloud committed in a space: its changes in server order and the
    state of every record they name."""
    with operator.store.session(space_id) as s:
        changes = s.changes_after(space_id, 0, 1_000_000)
    records = sorted({c.record_id for c in changes if c.record_id is not None})
    return changes, {r: operator.record_status(space_id, r) for r in records}


def remember(handle: DeviceHandle, text: str, conversation: str) -> tuple[str, str]:
    """The user types ``text`` and asks to remember it; the record id and its op id."""
    handle.agent.say(text, conversation)
    result = handle.agent.remember(text, conversation)
    return result.record_id, result.op_id


def in_cloud(operator: CloudService, space_id: str, record_id: str) -> RecordState | None:
    try:
        return operator.record_status(space_id, record_id)
    except NotFound:
        return None


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_cloud(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningCloud]:
    """A real cloud under uvicorn on loopback, on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        cloud = RunningCloud.sqlite(tmp_path / "cloud")
    else:
        new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
        cloud = RunningCloud(
            CloudConfig(store_url=new_database(), key_store_path=tmp_path / "keys.db")
        )
    with cloud:
        yield cloud


@pytest.fixture
def sqlite_cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    with RunningCloud.sqlite(tmp_path / "cloud") as cloud:
        yield cloud


def _fleet(cloud: RunningCloud | CloudProcesses, root: Path, seed: int = 7) -> Fleet:
    return Fleet(cloud, root, clock=FleetClock(tick=timedelta(seconds=1)), rng=random.Random(seed))


# --- the transport's rules, at the seam -------------------------------------------------

EXPECTED_DELIVERIES = {
    FaultKind.DROP_REQUEST: 0,
    FaultKind.CONNECT_TIMEOUT: 0,
    FaultKind.DROP_RESPONSE: 1,
    FaultKind.DISCONNECT: 1,
    FaultKind.READ_TIMEOUT: 1,
    FaultKind.DUPLICATE: 2,
    FaultKind.DUPLICATE_SECOND: 2,
    FaultKind.REPLAY_LATER: 1,
    FaultKind.SERVER_RESTART: 1,
    FaultKind.INTERLEAVE: 1,
}


@settings(max_examples=60, deadline=None)
@given(
    script=st.lists(st.sampled_from([*FaultKind, None]), max_size=12),
    hold_for=st.integers(1, 3),
)
def test_every_fault_delivers_and_answers_as_it_says(
    script: list[FaultKind | None], hold_for: int
) -> None:
    """Request ``n`` goes to /faulty with the n-th fault, or to /clean when it has none."""
    served: list[str] = []
    restarts: list[int] = []

    def server(request: httpx.Request) -> httpx.Response:
        served.append(request.content.decode())
        return httpx.Response(200, json={"n": len(served)})

    transport = FaultInjectingTransport(httpx.MockTransport(server))
    transport.inject(
        *(
            Fault(kind=k, path="/faulty", hold_for=hold_for, action=lambda: restarts.append(1))
            for k in script
            if k is not None
        )
    )
    with httpx.Client(transport=transport, base_url="http://cloud.test") as client:
        for n, kind in enumerate(script):
            try:
                answer = client.post("/clean" if kind is None else "/faulty", content=f"r{n}")
            except httpx.TransportError:
                assert kind in NOT_DELIVERED | ANSWER_LOST, (n, kind)
            else:
                assert kind not in NOT_DELIVERED | ANSWER_LOST, (n, kind)
                assert answer.status_code == 200
    assert transport.scripted == 0
    transport.deliver_held()
    assert transport.held == 0
    for n, kind in enumerate(script):  # each request reached the server as often as it says
        copies = 1 if kind is None else EXPECTED_DELIVERIES[kind]
        copies += 1 if kind is FaultKind.REPLAY_LATER else 0  # its stale copy, later
        assert served.count(f"r{n}") == copies, (n, kind)
    assert len(served) == transport.requests
    replays = [e.request_no for e in transport.log if e.kind == REPLAYED]
    assert sorted(replays) == [n + 1 for n, k in enumerate(script) if k is FaultKind.REPLAY_LATER]
    faults = [e.kind for e in transport.log if e.kind != REPLAYED]
    assert faults == [k.value for k in script if k is not None]
    actions = script.count(FaultKind.SERVER_RESTART) + script.count(FaultKind.INTERLEAVE)
    assert len(restarts) == actions


@pytest.mark.parametrize(
    ("kind", "heard"), [(FaultKind.DUPLICATE, 1), (FaultKind.DUPLICATE_SECOND, 2)]
)
def test_a_doubled_delivery_answers_the_copy_it_says(kind: FaultKind, heard: int) -> None:
    served: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        served.append(request.content.decode())
        return httpx.Response(200, json={"copy": len(served)})

    transport = FaultInjectingTransport(httpx.MockTransport(server))
    transport.inject(Fault(kind=kind))
    with httpx.Client(transport=transport, base_url="http://cloud.test") as client:
        assert client.post("/x", content="once").json() == {"copy": heard}
    assert served == ["once", "once"]


def test_an_interleaved_action_runs_just_before_delivery() -> None:
    happened: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        happened.append(f"served {request.content.decode()}")
        return httpx.Response(200)

    transport = FaultInjectingTransport(httpx.MockTransport(server))
    transport.inject(
        Fault(kind=FaultKind.INTERLEAVE, path="/b", action=lambda: happened.append("elsewhere"))
    )
    with httpx.Client(transport=transport, base_url="http://cloud.test") as client:
        client.post("/a", content="a")
        client.post("/b", content="b")
        client.post("/b", content="b again")
    assert happened == ["served a", "elsewhere", "served b", "served b again"]
    assert [(e.kind, e.path) for e in transport.log] == [("interleave", "/b")]


def test_a_stale_copy_arrives_after_the_newer_requests() -> None:
    served: list[str] = []

    def server(request: httpx.Request) -> httpx.Response:
        served.append(request.content.decode())
        return httpx.Response(200, json={})

    transport = FaultInjectingTransport(httpx.MockTransport(server))
    transport.inject(Fault(kind=FaultKind.REPLAY_LATER, hold_for=2))
    with httpx.Client(transport=transport, base_url="http://cloud.test") as client:
        for body in ("old", "newer", "newest", "last"):
            client.post("/x", content=body)
    assert served == ["old", "newer", "newest", "old", "last"]
    assert [(e.kind, e.request_no) for e in transport.log] == [
        ("replay_later", 1),
        ("replayed", 1),
    ]


def test_offline_and_partitioned_requests_never_leave_and_are_logged() -> None:
    served: list[str] = []
    transport = FaultInjectingTransport(
        httpx.MockTransport(lambda r: served.append(str(r.url)) or httpx.Response(200))
    )
    with httpx.Client(transport=transport) as client:
        transport.online = False
        with pytest.raises(httpx.ConnectError, match="offline"):
            client.get("http://a.test:1/x")
        transport.online = True
        transport.cut_off.add("a.test:1")
        with pytest.raises(httpx.ConnectError, match=r"partitioned from a\.test:1"):
            client.get("http://a.test:1/x")
        client.get("http://b.test:2/x")  # another process is still reachable
        transport.routes["a.test:1"] = "b.test:2"  # fail-over: a's requests go to b
        client.get("http://a.test:1/y")
    assert served == ["http://b.test:2/x", "http://b.test:2/y"]
    assert [e.kind for e in transport.log] == ["offline", "partitioned"]


def test_a_seeded_plan_replays_the_same_faults() -> None:
    def run(seed: int) -> list[tuple[int, str]]:
        transport = FaultInjectingTransport(
            httpx.MockTransport(lambda r: httpx.Response(200)),
            plan=RandomFaults(random.Random(seed), rate=0.5, paths=["/v1/push"]),
        )
        with httpx.Client(transport=transport, base_url="http://cloud.test") as client:
            for n in range(40):
                with contextlib.suppress(httpx.TransportError):
                    client.post("/v1/push" if n % 2 else "/v1/pull", content=str(n))
        return [(e.request_no, e.kind) for e in transport.log]

    assert run(3) == run(3)
    assert run(3) != run(4)
    assert all(n % 2 == 0 for n, _kind in run(3))  # request_no is 1-based: pushes are even


@pytest.mark.parametrize(
    ("make", "says"),
    [
        (lambda: Fault(kind=FaultKind.DROP_REQUEST, path="v1/push"), "'v1/push' must start"),
        (lambda: Fault(kind=FaultKind.REPLAY_LATER, hold_for=0), "hold_for 0"),
        (lambda: Fault(kind=FaultKind.SERVER_RESTART), "server_restart needs an action"),
        (lambda: Fault(kind=FaultKind.INTERLEAVE), "interleave needs the action"),
        (lambda: Fault(kind="explode"), "fault kind 'explode' is unknown"),  # type: ignore[arg-type]
        (lambda: RandomFaults(random.Random(1), rate=1.5), "fault rate 1.5"),
        (
            lambda: RandomFaults(
                random.Random(1), rate=0.5, weights={FaultKind.SERVER_RESTART: 1.0}
            ),
            "server_restart is not drawn at random",
        ),
        (
            lambda: RandomFaults(random.Random(1), rate=0.5, weights={FaultKind.DUPLICATE: -1}),
            "non-negative",
        ),
    ],
)
def test_a_badly_described_fault_is_refused_with_the_reason(
    make: Callable[[], object], says: str
) -> None:
    with pytest.raises(FaultSpecError, match=says):
        make()


# --- each fault against a real cloud ----------------------------------------------------


def test_a_dropped_request_never_reaches_the_server(
    sqlite_cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = _fleet(sqlite_cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    record, _ops = remember(phone, "My sister lives in Lisbon.", "c1")
    queued = phone.agent.pending_ops()
    before = cloud_state(sqlite_cloud.operator, ada.space_id)
    for kind in NOT_DELIVERED:
        phone.transport.inject(Fault(kind=kind, path=PUSH))
        with pytest.raises(Offline):
            phone.agent.sync()
        assert cloud_state(sqlite_cloud.operator, ada.space_id) == before
        assert in_cloud(sqlite_cloud.operator, ada.space_id, record) is None
        assert phone.agent.pending_ops() == queued
    report = phone.agent.sync()
    assert report.applied == queued and report.duplicates == 0
    assert [e.kind for e in phone.transport.log] == [k.value for k in NOT_DELIVERED]
    fleet.close()


@pytest.mark.parametrize("kind", sorted(ANSWER_LOST - {FaultKind.SERVER_RESTART}))
def test_a_lost_answer_then_a_retry_has_one_effect_and_a_duplicate_receipt(
    any_cloud: RunningCloud, tmp_path: Path, kind: FaultKind
) -> None:
    fleet = _fleet(any_cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    record, _ops = remember(phone, "My sister lives in Lisbon.", "c1")
    dont_use = phone.agent.dont_use(record).op_id
    queued = phone.agent.pending_ops()
    phone.transport.inject(Fault(kind=kind, path=PUSH))
    with pytest.raises(Offline):
        phone.agent.sync()
    committed = cloud_state(any_cloud.operator, ada.space_id)
    state = committed[1][record]
    assert state.version == 1 and state.lifecycle_state.value == "not_in_use"  # it committed
    assert phone.agent.pending_ops() == queued  # the device never heard it

    report = phone.agent.sync()
    # a duplicate counts as what it first was (applied), and as a duplicate
    assert report.duplicates == queued == report.applied and report.refused == []
    assert phone.agent.pending_ops() == 0
    receipt = phone.agent.receipt(dont_use)
    assert receipt is not None and receipt.status is ReceiptStatus.DUPLICATE
    assert receipt.original_status is ReceiptStatus.APPLIED
    assert cloud_state(any_cloud.operator, ada.space_id) == committed  # nothing twice
    (line,) = phone.transport.log
    assert (line.kind, line.path, line.deliveries) == (kind.value, PUSH, 1)
    fleet.close()


def test_a_duplicated_delivery_applies_once(sqlite_cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = _fleet(sqlite_cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    record, op = remember(phone, "My sister lives in Lisbon.", "c1")
    queued = phone.agent.pending_ops()
    phone.transport.inject(Fault(kind=FaultKind.DUPLICATE, path=PUSH))
    phone.transport.inject(Fault(kind=FaultKind.DUPLICATE, path="/v1/pull"))
    served_before = phone.transport.requests
    report = phone.agent.sync()
    assert report.applied == queued and report.duplicates == 0  # it saw the first answer
    push, pull = phone.transport.log
    assert push.deliveries == pull.deliveries == 2
    assert phone.transport.requests - served_before == 4
    changes, records = cloud_state(sqlite_cloud.operator, ada.space_id)
    assert records[record].version == 1
    versions = [c for c in changes if c.kind == "record_version" and c.record_id == record]
    assert len(versions) == 1  # the second copy was answered duplicate, and changed nothing
    receipt = phone.agent.receipt(op)
    assert receipt is not None and receipt.status is ReceiptStatus.APPLIED
    fleet.close()


def test_a_stale_replay_changes_nothing(sqlite_cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = _fleet(sqlite_cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone, laptop = fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    kept, _ = remember(phone, "My sister lives in Lisbon.", "c1")
    gone, _ = remember(phone, "My old locker code is at the gym.", "c2")
    # the push creating both records is held, to arrive again after everything below
    phone.transport.inject(Fault(kind=FaultKind.REPLAY_LATER, path=PUSH, hold_for=10_000))
    phone.agent.sync()
    laptop.agent.sync()
    laptop.agent.dont_use(kept)
    laptop.agent.forget_permanently(gone)
    laptop.agent.sync()
    phone.agent.sync()
    assert phone.transport.held == 1
    before = cloud_state(sqlite_cloud.operator, ada.space_id)
    pending_before = sqlite_cloud.operator.pending(ada.space_id)

    (replay,) = phone.transport.deliver_held()
    assert replay.kind == REPLAYED and replay.path == PUSH
    assert replay.outcome == "200" and '"duplicate"' in replay.detail
    assert cloud_state(sqlite_cloud.operator, ada.space_id) == before
    assert sqlite_cloud.operator.pending(ada.space_id) == pending_before
    assert before[1][kept].lifecycle_state.value == "not_in_use"
    assert before[1][gone].lifecycle_state.value == FORGOTTEN
    for handle in (phone, laptop):
        handle.agent.sync()
        views = {v.record_id: v for v in handle.agent.list_records()}
        assert views[kept].lifecycle == "not_in_use"
        assert views[gone].text is None and not handle.agent.data_keys_for(gone)
    fleet.close()


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_cloud_restarted_mid_batch_answers_duplicate_afterwards(
    request: pytest.FixtureRequest, tmp_path: Path, store: str
) -> None:
    if store == "sqlite":
        config = CloudConfig(
            store_url=f"sqlite:///{tmp_path / 'records.db'}", key_store_path=tmp_path / "k.db"
        )
    else:
        config = CloudConfig(
            store_url=request.getfixturevalue("postgres_database")(),
            key_store_path=tmp_path / "k.db",
        )
    with RunningCloud(config) as cloud:
        fleet = _fleet(cloud, tmp_path / "devices")
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone")
        records = [remember(phone, f"My cousin {i} studies law.", f"c{i}")[0] for i in range(3)]
        queued = phone.agent.pending_ops()
        port = cloud.port
        phone.transport.inject(
            Fault(kind=FaultKind.SERVER_RESTART, path=PUSH, action=cloud.restart)
        )
        with pytest.raises(Offline, match="RemoteProtocolError"):
            phone.agent.sync()
        assert cloud.restarts == 1 and cloud.port == port
        committed = cloud_state(cloud.operator, ada.space_id)
        assert all(committed[1][r].version == 1 for r in records)

        report = phone.agent.sync()  # the new server process answers from the receipts
        assert report.duplicates == queued and report.refused == []
        assert cloud_state(cloud.operator, ada.space_id) == committed
        fleet.close()


def test_a_subprocess_cloud_sigkilled_mid_batch_and_before_a_request(tmp_path: Path) -> None:
    with CloudProcesses.sqlite(tmp_path / "cloud", 1) as clouds:
        fleet = _fleet(clouds, tmp_path / "devices")
        ada = fleet.add_user("ada")
        phone = fleet.add_device(ada, "phone")
        process = clouds[0]
        first_pid = process.pid
        killed: list[int | None] = []

        def kill_and_restart() -> None:
            process.kill()
            killed.append(process.returncode)
            process.start()

        record, _ = remember(phone, "My cousin studies law in Porto.", "c1")
        queued = phone.agent.pending_ops()
        phone.transport.inject(
            Fault(kind=FaultKind.SERVER_RESTART, path=PUSH, action=kill_and_restart)
        )
        with pytest.raises(Offline):
            phone.agent.sync()
        assert killed == [-signal.SIGKILL] and process.pid != first_pid
        committed = cloud_state(clouds.operator, ada.space_id)
        assert committed[1][record].version == 1
        report = phone.agent.sync()
        assert report.duplicates == queued and report.refused == []
        assert cloud_state(clouds.operator, ada.space_id) == committed

        # a server that is really gone: the request meets a closed port, not a simulation
        other, _ = remember(phone, "My aunt paints boats in Faro.", "c2")
        queued = phone.agent.pending_ops()
        process.kill()
        with pytest.raises(Offline, match="ConnectError"):
            phone.agent.sync()
        assert in_cloud(clouds.operator, ada.space_id, other) is None
        process.start()
        report = phone.agent.sync()
        assert report.applied == queued and report.duplicates == 0
        assert in_cloud(clouds.operator, ada.space_id, other) is not None
        assert phone.transport.faults(FaultKind.SERVER_RESTART) and len(phone.transport.log) == 1
        fleet.close()


def test_a_random_fault_run_converges_once_the_network_is_clean(
    sqlite_cloud: RunningCloud, tmp_path: Path
) -> None:
    fleet = _fleet(sqlite_cloud, tmp_path / "devices", seed=11)
    ada = fleet.add_user("ada")
    rng = random.Random(2026)
    devices = [
        fleet.add_device(ada, name, plan=RandomFaults(random.Random(rng.random()), rate=0.5))
        for name in ("phone", "laptop", "tablet")
    ]
    made: dict[str, DeviceHandle] = {}
    for step in range(12):
        handle = devices[step % 3]
        record, _ = remember(handle, f"My colleague number {step} runs marathons.", f"c{step}")
        made[record] = handle
        if step % 4 == 3:
            own = sorted(r for r, maker in made.items() if maker is handle)
            with contextlib.suppress(Refused):  # already forgotten
                handle.agent.forget_permanently(rng.choice(own))
        with contextlib.suppress(Offline):
            handle.agent.sync()
    seen = {e.kind for d in devices for e in d.transport.log}
    assert len(seen) >= 4, seen  # the run really was under fire, of several kinds
    for handle in devices:
        handle.transport.plan = None
        handle.transport.deliver_held()
    for _round in range(2):
        for handle in devices:
            handle.agent.sync()
    _changes, records = cloud_state(sqlite_cloud.operator, ada.space_id)
    for handle in devices:
        assert handle.agent.pending_ops() == 0
        views = {v.record_id: v for v in handle.agent.list_records()}
        for record_id, state in records.items():
            view = views.get(record_id)
            if state.lifecycle_state.value == FORGOTTEN:
                assert view is None or (view.text is None and view.lifecycle == FORGOTTEN)
            else:
                assert view is not None and view.version == state.version == 1
                assert view.lifecycle == state.lifecycle_state.value
    assert not [f for f in sqlite_cloud.operator.pending(ada.space_id).forgets if f.pending]
    fleet.close()


def test_every_request_plan_holds_until_removed() -> None:
    transport = FaultInjectingTransport(
        httpx.MockTransport(lambda r: httpx.Response(200)),
        plan=EveryRequest(FaultKind.DROP_REQUEST, path="/v1/push"),
    )
    with httpx.Client(transport=transport, base_url="http://cloud.test") as client:
        for _ in range(3):
            with pytest.raises(httpx.ConnectError):
                client.post("/v1/push")
        assert client.post("/v1/pull").status_code == 200
        transport.plan = None
        assert client.post("/v1/push").status_code == 200
    assert transport.requests == 2 and len(transport.faults(FaultKind.DROP_REQUEST)) == 3
