"""End to end: protocol versions 1 and 2 between real devices (SQLCipher) and the real
cloud (uvicorn on loopback) over httpx, on SQLite and on PostgreSQL.

Every request and answer is recorded at the device's transport seam, so each test
proves which version went on the wire, not just that the outcome was right.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from cloud.config import CloudConfig
from device import store
from device.agent import DeviceAgent
from device.client import CloudClient
from device.errors import NeedsNewerProtocol, NoCommonProtocolVersion
from device.facts import current_content
from device.views import RecordView
from protocol.messages import PullRequest, PullResponse
from protocol.model import ContentType, EpistemicState, RecordContent
from protocol.operations import Infer, Initiator
from protocol.version import PROTOCOL_VERSION, VersionRange
from simulator.cloud_runner import RunningCloud

pytestmark = pytest.mark.e2e

TYPED = "I grew up in Duluth. My favorite number is not 1729. I drink tea every morning."
DULUTH = "I grew up in Duluth."
NUMBER = "My favorite number is not 1729."
TEA = "I drink tea every morning."


@dataclass
class Exchange:
    path: str
    sent: dict[str, Any]
    status: int
    answer: dict[str, Any]


@dataclass
class Recording(httpx.BaseTransport):
    """The real HTTP transport, keeping every request body and answer it carried."""

    inner: httpx.BaseTransport = field(default_factory=httpx.HTTPTransport)
    log: list[Exchange] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        sent = json.loads(request.read() or b"{}")
        response = self.inner.handle_request(request)
        body = response.read()
        self.log.append(Exchange(request.url.path, sent, response.status_code, json.loads(body)))
        return httpx.Response(
            response.status_code, headers=response.headers, content=body, request=request
        )

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        (tmp_path / "cloud").mkdir()
        return f"sqlite:///{tmp_path / 'cloud' / 'records.db'}"
    new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
    return new_database()


def _config(store_url: str, tmp_path: Path, versions: VersionRange) -> CloudConfig:
    return CloudConfig(
        store_url=store_url,
        key_store_path=tmp_path / "cloud-keys.db",
        supported_versions=versions,
    )


@pytest.fixture
def start_cloud(store_url: str, tmp_path: Path) -> Iterator[Callable[[VersionRange], RunningCloud]]:
    """Start a cloud accepting a given range; one started later replaces the one before,
    on the same stores and the same port (an upgrade of the cloud in place)."""
    running: list[RunningCloud] = []

    def start(versions: VersionRange) -> RunningCloud:
        cloud = RunningCloud(_config(store_url, tmp_path, versions))
        for earlier in running:
            cloud.port = earlier.port
            earlier.close()
        running.clear()
        running.append(cloud.start())
        return cloud

    yield start
    for cloud in running:
        cloud.close()


@dataclass
class Device:
    agent: DeviceAgent
    wire: Recording


@pytest.fixture
def devices(tmp_path: Path) -> Iterator[Callable[..., Device]]:
    made: list[Device] = []

    def make(
        cloud: RunningCloud, name: str, versions: VersionRange | None, code: str | None = None
    ) -> Device:
        wire = Recording()
        agent = DeviceAgent.create(
            tmp_path / "devices" / name,
            f"passphrase of {name}",
            device_name=name,
            cloud_url=cloud.url,
            transport=wire,
            protocol_versions=versions,
        )
        device = Device(agent, wire)
        made.append(device)
        if code is not None:
            agent.enroll(code)
        return device

    yield make
    for device in made:
        device.agent.close()


def _views(agent: DeviceAgent) -> dict[str, tuple[str, str | None]]:
    return {v.record_id: (v.lifecycle, v.text) for v in agent.list_records()}


def _by_text(agent: DeviceAgent, text: str) -> RecordView:
    return next(v for v in agent.list_records() if v.text == text)


def _record_versions(log: list[Exchange]) -> list[dict[str, Any]]:
    return [
        change
        for exchange in log
        if exchange.path == "/v1/pull" and exchange.status == 200
        for change in exchange.answer["changes"]
        if change["kind"] == "record_version"
    ]


def _assert_spoke_only(log: list[Exchange], version: int) -> None:
    assert log, "no request went out"
    for exchange in log:
        assert exchange.sent["protocol_version"] == version, exchange
        assert exchange.status == 200, exchange
        assert exchange.answer["protocol_version"] == version, exchange
        if version == 1:
            assert "wait" not in exchange.sent
    if version == 1:
        assert all("schema_version" not in c for c in _record_versions(log))


def _converged(cloud: RunningCloud, space_id: str, *agents: DeviceAgent) -> None:
    views = [_views(agent) for agent in agents]
    assert all(view == views[0] for view in views), views
    for record_id, (lifecycle, _text) in views[0].items():
        assert cloud.operator.record_status(space_id, record_id).lifecycle_state.value == lifecycle
    assert not any(agent.pending_ops() for agent in agents)


def test_health_reports_the_configured_range(
    start_cloud: Callable[[VersionRange], RunningCloud],
) -> None:
    for versions in [(1, 2), (1, 1), (2, 2)]:
        cloud = start_cloud(versions)
        body = httpx.get(f"{cloud.url}/v1/health").json()
        assert body["supported_versions"] == list(versions)


def test_a_cloud_range_this_code_does_not_speak_is_refused(tmp_path: Path) -> None:
    beyond = PROTOCOL_VERSION + 1
    with pytest.raises(ValueError, match=f"range 1 to {beyond} is not inside"):
        _config("sqlite:///x.db", tmp_path, (1, beyond))


def test_a_v1_device_against_the_v2_cloud_syncs_and_a_forget_propagates(
    start_cloud: Callable[[VersionRange], RunningCloud], devices: Callable[..., Device]
) -> None:
    cloud = start_cloud((1, 2))
    space_id, code = cloud.operator.add_user("ada")
    phone = devices(cloud, "phone", (1, 1), code)
    laptop = devices(cloud, "laptop", (1, 1), cloud.operator.new_enrollment_code(space_id))
    phone.agent.say(TYPED, "c1")
    record_id = phone.agent.remember(DULUTH, "c1").record_id
    phone.agent.sync()
    laptop.agent.sync()
    assert _views(laptop.agent)[record_id] == ("active", DULUTH)

    laptop.agent.forget_permanently(record_id)
    laptop.agent.sync()
    assert cloud.operator.pending(space_id).forgets[0].pending[0].device_name == "phone"
    phone.agent.sync()
    assert [f.pending for f in cloud.operator.pending(space_id).forgets] == [[]]
    assert _views(phone.agent)[record_id] == ("permanently_forgotten", None)
    assert phone.agent.data_keys_for(record_id) == []
    _converged(cloud, space_id, phone.agent, laptop.agent)

    for device in (phone, laptop):
        _assert_spoke_only(device.wire.log, 1)
        assert device.agent.protocol_version == 1 and not device.agent.live_pull
    assert _record_versions(laptop.wire.log), "the laptop pulled the record's content"
    assert any(
        change["kind"] == "key_destruction"
        for exchange in phone.wire.log
        if exchange.path == "/v1/pull"
        for change in exchange.answer["changes"]
    )


def test_a_v2_device_against_a_v1_range_cloud_negotiates_down_once_and_works(
    start_cloud: Callable[[VersionRange], RunningCloud], devices: Callable[..., Device]
) -> None:
    cloud = start_cloud((1, 1))
    space_id, code = cloud.operator.add_user("ada")
    phone = devices(cloud, "phone", None, code)
    assert phone.agent.protocol_versions == (1, PROTOCOL_VERSION)
    phone.agent.say(TYPED, "c1")
    record_id = phone.agent.remember(NUMBER, "c1").record_id
    phone.agent.sync()
    phone.agent.sync()

    refused, *rest = phone.wire.log
    assert refused.path == "/v1/enroll" and refused.sent["protocol_version"] == PROTOCOL_VERSION
    assert refused.status == 400 and refused.answer["code"] == "unsupported_protocol_version"
    assert refused.answer["supported_versions"] == [1, 1]
    assert rest[0].path == "/v1/enroll"  # the same request, retried once in version 1
    _assert_spoke_only(rest, 1)  # and version 1 is kept for the client's life
    assert phone.agent.protocol_version == 1 and not phone.agent.live_pull

    laptop = devices(cloud, "laptop", None, cloud.operator.new_enrollment_code(space_id))
    laptop.agent.sync()
    assert _views(laptop.agent)[record_id] == ("active", NUMBER)
    _converged(cloud, space_id, phone.agent, laptop.agent)


def test_a_device_whose_range_does_not_overlap_is_refused_and_nothing_changes(
    start_cloud: Callable[[VersionRange], RunningCloud], devices: Callable[..., Device]
) -> None:
    # An old device (version 1 only) enrolls and syncs while the cloud still speaks 1 ...
    cloud = start_cloud((1, 2))
    space_id, code = cloud.operator.add_user("ada")
    old = devices(cloud, "old phone", (1, 1), code)
    old.agent.say(TYPED, "c1")
    old.agent.remember(DULUTH, "c1")
    old.agent.sync()
    queued = old.agent.remember(TEA, "c1").record_id  # written offline, still queued

    # ... then the cloud is upgraded to speak version 2 only, on the same stores.
    cloud = start_cloud((2, 2))
    assert httpx.get(f"{cloud.url}/v1/health").json()["supported_versions"] == [2, 2]
    with cloud.operator.store.session(space_id) as s:
        seq_before, devices_before = s.last_seq(space_id), len(s.devices(space_id))
    views_before, queue_before = _views(old.agent), old.agent.pending_ops()
    db_before = _db_state(old.agent)
    old.wire.log.clear()

    with pytest.raises(NoCommonProtocolVersion) as info:
        old.agent.sync()
    message = str(info.value)
    assert "accepts protocol versions 2 to 2" in message
    assert "this device speaks 1 to 1" in message and cloud.url in message
    assert info.value.cloud == (2, 2) and info.value.mine == (1, 1)
    assert [e.sent["protocol_version"] for e in old.wire.log] == [1]  # no retry: no overlap

    assert (_views(old.agent), old.agent.pending_ops()) == (views_before, queue_before)
    assert _db_state(old.agent) == db_before
    with cloud.operator.store.session(space_id) as s:
        assert (s.last_seq(space_id), len(s.devices(space_id))) == (seq_before, devices_before)
        assert s.records(space_id, [queued]) == {}

    # A new device refused at enrollment is not enrolled anywhere.
    fresh = devices(cloud, "fresh", (1, 1))
    with pytest.raises(NoCommonProtocolVersion, match="accepts protocol versions 2 to 2"):
        fresh.agent.enroll(cloud.operator.new_enrollment_code(space_id))
    assert fresh.agent.device_id is None
    with cloud.operator.store.session(space_id) as s:
        assert len(s.devices(space_id)) == devices_before

    # The same user's version-2 device still works against that cloud, in version 2.
    current = devices(cloud, "laptop", (1, 2), cloud.operator.new_enrollment_code(space_id))
    current.agent.sync()
    _assert_spoke_only(current.wire.log, 2)
    assert current.agent.live_pull
    assert DULUTH in {text for _state, text in _views(current.agent).values()}


def _db_state(agent: DeviceAgent) -> list[Any]:
    """Every row of every table of the device database (decrypted), for comparison."""
    db = agent._debug_db()
    tables = [
        row[0]
        for row in db.conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            " AND sql NOT LIKE 'CREATE VIRTUAL%' ORDER BY name"
        )
    ]
    return [
        (t, sorted(repr(tuple(r)) for r in db.conn.execute(f'SELECT * FROM "{t}"'))) for t in tables
    ]


def test_a_mixed_fleet_of_one_user_converges(
    start_cloud: Callable[[VersionRange], RunningCloud], devices: Callable[..., Device]
) -> None:
    cloud = start_cloud((1, PROTOCOL_VERSION))
    space_id, code = cloud.operator.add_user("ada")
    old = devices(cloud, "old phone", (1, 1), code)
    new = devices(cloud, "new laptop", (1, 2), cloud.operator.new_enrollment_code(space_id))
    newest = devices(cloud, "newest tablet", None, cloud.operator.new_enrollment_code(space_id))
    fleet = (old, new, newest)

    old.agent.say(TYPED, "c1")
    duluth = old.agent.remember(DULUTH, "c1").record_id
    new.agent.say(TYPED, "c2")
    number = new.agent.remember(NUMBER, "c2").record_id
    for _round in range(2):
        for device in fleet:
            device.agent.sync()
    assert {duluth, number} <= set(_views(old.agent)) & set(_views(new.agent))
    _converged(cloud, space_id, *(d.agent for d in fleet))

    new.agent.say("I grew up in Duluth, Minnesota.", "c2")
    new.agent.correct(duluth, "I grew up in Duluth, Minnesota.", "c2")
    old.agent.forget_permanently(number)
    for _round in range(2):
        for device in (new, old, newest):
            device.agent.sync()
    _converged(cloud, space_id, *(d.agent for d in fleet))
    assert _views(new.agent)[number] == ("permanently_forgotten", None)

    _assert_spoke_only(old.wire.log, 1)
    _assert_spoke_only(new.wire.log, 2)
    _assert_spoke_only(newest.wire.log, PROTOCOL_VERSION)
    assert all(c["schema_version"] == 1 for c in _record_versions(new.wire.log))
    assert _record_versions(new.wire.log) and _record_versions(old.wire.log)
    # only the newest device has a subset: its enters came as `subset` changes
    subset_kinds = [
        change["kind"]
        for device in fleet
        for exchange in device.wire.log
        if exchange.path == "/v1/pull"
        for change in exchange.answer["changes"]
        if change["kind"] == "subset"
    ]
    assert subset_kinds and all(
        change["kind"] != "subset"
        for device in (old, new)
        for exchange in device.wire.log
        if exchange.path == "/v1/pull"
        for change in exchange.answer["changes"]
    )


def test_the_cloud_refuses_a_version_1_pull_carrying_wait_and_answers_each_version_in_kind(
    start_cloud: Callable[[VersionRange], RunningCloud], devices: Callable[..., Device]
) -> None:
    cloud = start_cloud((1, 2))
    _space_id, code = cloud.operator.add_user("ada")
    phone = devices(cloud, "phone", None, code)
    phone.agent.say(TYPED, "c1")
    phone.agent.remember(DULUTH, "c1")
    phone.agent.sync()
    credential = _credential(phone.agent)
    with httpx.Client(base_url=cloud.url, headers={"authorization": f"Bearer {credential}"}) as c:
        refused = c.post("/v1/pull", json={"protocol_version": 1, "wait": 5})
        assert refused.status_code == 400
        assert refused.json()["code"] == "malformed_request"
        assert refused.json()["protocol_version"] == 1
        assert (
            "'wait' needs protocol version 2; this message speaks version 1"
            in (refused.json()["message"])
        )
        bad_wait = c.post("/v1/pull", json={"protocol_version": 2, "wait": 99})
        assert bad_wait.status_code == 400 and "wait" in bad_wait.json()["message"]

        v1 = c.post("/v1/pull", json={"protocol_version": 1}).json()
        v2 = c.post("/v1/pull", json={"protocol_version": 2, "wait": 0.5}).json()  # hook: at once
        assert (v1["protocol_version"], v2["protocol_version"]) == (1, 2)
        v1_versions = [ch for ch in v1["changes"] if ch["kind"] == "record_version"]
        v2_versions = [ch for ch in v2["changes"] if ch["kind"] == "record_version"]
        assert v1_versions and all("schema_version" not in ch for ch in v1_versions)
        # the same changes; only the sealed key differs (a fresh sealed box per answer)
        assert [{**ch, "schema_version": 1, "sealed_key": "-"} for ch in v1_versions] == [
            {**ch, "sealed_key": "-"} for ch in v2_versions
        ]

        # GET routes carry no version: they answer in the lowest of the cloud's range
        assert c.get("/v1/forgets/pending").json()["protocol_version"] == 1


def test_a_device_never_sends_a_version_2_field_in_version_1(
    start_cloud: Callable[[VersionRange], RunningCloud], devices: Callable[..., Device]
) -> None:
    cloud = start_cloud((1, 1))
    _space_id, code = cloud.operator.add_user("ada")
    phone = devices(cloud, "phone", None, code)  # negotiated down to 1 while enrolling
    client = CloudClient(cloud.url, transport=phone.wire, protocol_versions=(1, 2))
    client.credential = (
        phone.agent._debug_db().conn.execute("SELECT credential FROM meta").fetchone()[0]
    )
    try:
        assert client.protocol_version == 2 and client.live_pull
        client.post("/v1/pull", PullRequest(), PullResponse)  # refused in 2, retried in 1
        assert client.protocol_version == 1 and not client.live_pull
        sent = len(phone.wire.log)
        with pytest.raises(NeedsNewerProtocol, match="'wait' needs protocol version 2"):
            client.post("/v1/pull", PullRequest(wait=5), PullResponse)
        assert len(phone.wire.log) == sent  # nothing went out
    finally:
        client.close()


def _credential(agent: DeviceAgent) -> str:
    credential = store.get_meta(agent._debug_db()).credential
    assert credential is not None
    return credential


def test_a_newer_writers_content_type_reaches_a_version_1_device_as_its_core_type(
    start_cloud: Callable[[VersionRange], RunningCloud], devices: Callable[..., Device]
) -> None:
    """A writer of a later record schema sends a type of its own with its core; the cloud
    reads it as the core type and seals schema-1 content, which a v1 device opens."""
    cloud = start_cloud((1, 2))
    space_id, code = cloud.operator.add_user("ada")
    phone = devices(cloud, "phone", None, code)
    episode = phone.agent.say("I take insulin every morning.", "c1")
    phone.agent.sync()
    op = Infer(
        op_id="op_0000000000000042",
        made_at=datetime(2026, 9, 21, tzinfo=UTC),
        initiated_by=Initiator.ASSISTANT,
        record_id="rec_aaaaaaaaaaaaaaaa",
        content=RecordContent(
            text="Takes insulin every morning",
            epistemic_state=EpistemicState.INFERRED,
            source_episode_ids=[episode],
        ),
    ).model_dump(mode="json")
    op["content"].update(
        schema_version=2,
        content_type="medication",
        custom_type={"name": "medication", "core": "constraint"},
    )
    nameless = {**op, "op_id": "op_0000000000000043", "record_id": "rec_bbbbbbbbbbbbbbbb"}
    nameless["content"] = {**op["content"], "custom_type": None}
    headers = {"authorization": f"Bearer {_credential(phone.agent)}"}
    with httpx.Client(base_url=cloud.url, headers=headers) as writer:
        pushed = writer.post("/v1/push", json={"protocol_version": 2, "ops": [op, nameless]})
    applied, refused = pushed.json()["receipts"]
    assert applied["status"] == "applied", applied
    assert refused["status"] == "refused"
    assert "content type 'medication' is not one of the eight core types" in refused["reason"]
    assert "names no core type" in refused["reason"]

    old = devices(cloud, "old laptop", (1, 1), cloud.operator.new_enrollment_code(space_id))
    old.agent.sync()
    _assert_spoke_only(old.wire.log, 1)
    db = old.agent._debug_db()
    content = current_content(db, store.record_row(db, "rec_aaaaaaaaaaaaaaaa"))
    assert content is not None and content.content_type is ContentType.CONSTRAINT
    assert content.custom_type is not None and content.custom_type.name == "medication"
    assert content.schema_version == 1
    assert store.record_row(db, "rec_bbbbbbbbbbbbbbbb") is None
