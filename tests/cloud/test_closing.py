"""The service's closing (``cloud.closing``, ``CloudService.announce_closing`` ...), with
the injected clock moved through every phase: closing (everything works, every answer
carries ``Memsync-Closing``), export only (writes answer 503 and change nothing; pulls
and wipe confirmations work), closed (every account ended, keys destroyed, 410)."""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from nacl.public import PrivateKey

from cloud import closing
from cloud.account_end import EndReason
from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.errors import AccountEnded, ClosingRefused, ServiceClosed
from cloud.service import CloudService
from cloud.store.base import ServiceStateRow
from protocol.messages import CLOSING_HEADER, PullRequest, ServiceMode, parse_closing_header
from tests.cloud.conftest import START, FakeClock, Ops, applied, new_user, push

CLOSES = START + timedelta(days=90)
EXPORT_UNTIL = CLOSES + timedelta(days=30)

# --- the mode is a pure function of the state and the clock ---------------------------

moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)


@given(closes_at=moments, window=st.timedeltas(timedelta(0), timedelta(days=400)), now=moments)
def test_the_mode_follows_the_clock_through_the_dates(
    closes_at: datetime, window: timedelta, now: datetime
) -> None:
    state = ServiceStateRow("eu", closes_at - timedelta(days=1), closes_at, closes_at + window)
    mode = closing.mode_at(state, now)
    if now < closes_at:
        assert mode is ServiceMode.CLOSING
    elif now < closes_at + window:
        assert mode is ServiceMode.EXPORT_ONLY
    else:
        assert mode is ServiceMode.CLOSED
    later = closing.mode_at(state, now + timedelta(seconds=1))
    order = list(ServiceMode)
    assert order.index(later) >= order.index(mode)  # a closing never goes back by itself
    assert closing.mode_at(None, now) is ServiceMode.OPEN
    assert closing.mode_at(ServiceStateRow("eu"), now) is ServiceMode.OPEN
    # what the gate keeps open while export only: export, pulls, wipes; never a write
    assert closing.gate(mode, "/v1/export") and closing.gate(mode, "/v1/pull")
    assert closing.gate(mode, "/v1/wiped")
    assert closing.gate(mode, "/v1/push") is (mode is not ServiceMode.EXPORT_ONLY)


# --- announcing and cancelling --------------------------------------------------------


def test_an_announcement_in_the_past_or_out_of_order_is_refused_and_nothing_stored(
    service: CloudService, clock: FakeClock
) -> None:
    with pytest.raises(ClosingRefused, match=r"closes_at .* is not in the future"):
        service.announce_closing(clock.now)
    with pytest.raises(ClosingRefused, match=r"closes_at .* is not in the future"):
        service.announce_closing(clock.now - timedelta(days=1))
    with pytest.raises(ClosingRefused, match=r"export_until .* is before closes_at"):
        service.announce_closing(CLOSES, CLOSES - timedelta(seconds=1))
    with pytest.raises(ClosingRefused, match="no time zone"):
        service.announce_closing(CLOSES.replace(tzinfo=None))
    with pytest.raises(ClosingRefused, match="nothing to cancel"):
        service.cancel_closing()
    with service.store.session() as s:
        assert s.service_state() is None
    assert service.service_status().mode is ServiceMode.OPEN

    status = service.announce_closing(CLOSES)  # export_until defaults to closes_at
    assert (status.mode, status.closes_at, status.export_until) == (
        ServiceMode.CLOSING,
        CLOSES,
        CLOSES,
    )
    assert status.announced_at == clock.now and status.region == "default"
    assert service.cancel_closing().mode is ServiceMode.OPEN
    service.announce_closing(CLOSES, EXPORT_UNTIL)
    clock.now = CLOSES
    with pytest.raises(ClosingRefused, match="only before it closes"):
        service.cancel_closing()


def test_other_processes_see_a_closing_within_the_refresh(
    config: CloudConfig, service: CloudService, clock: FakeClock
) -> None:
    other = CloudService(config)  # another process on the same store
    try:
        service.announce_closing(CLOSES, EXPORT_UNTIL)
        assert service.service_status().mode is ServiceMode.CLOSING  # at once where written
        assert other.service_status().mode is ServiceMode.OPEN  # its cached copy
        clock.advance(closing.REFRESH)
        assert other.service_status().mode is ServiceMode.CLOSING
        service.cancel_closing()
        clock.advance(closing.REFRESH)
        assert other.service_status().mode is ServiceMode.OPEN
    finally:
        other.close()


def test_export_only_refuses_writes_and_closed_ends_every_account(
    service: CloudService, config: CloudConfig, ops: Ops, clock: FakeClock
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    (bob,) = new_user(service, "bob", "phone")
    applied(push(service, phone, ops.episode("ep_aaaaaaaa01", "I like tea.")))
    service.announce_closing(CLOSES, EXPORT_UNTIL)
    clock.now = CLOSES - timedelta(seconds=1)
    applied(push(service, phone, ops.episode("ep_aaaaaaaa02", "I like coffee.")))

    clock.now = CLOSES
    seq = service.last_seq(phone.space_id)
    with pytest.raises(ServiceClosed, match=r"closed at .* export stays open until"):
        push(service, phone, ops.episode("ep_aaaaaaaa03", "I like cocoa."))
    with pytest.raises(ServiceClosed):
        service.add_user("carol")
    assert service.last_seq(phone.space_id) == seq  # nothing changed
    assert service.pull(laptop.space_id, laptop.device_id, PullRequest()).changes
    assert service.account_status(phone.space_id) is None  # not ended before export_until
    assert service.enforce_closing() == []

    clock.now = EXPORT_UNTIL
    ends = service.enforce_closing()
    assert sorted(e.space_id for e in ends) == sorted({phone.space_id, bob.space_id})
    assert {e.reason for e in ends} == {EndReason.SERVICE_SHUTDOWN}
    assert all(e.keys_destroyed_at == clock.now for e in ends)
    assert service.enforce_closing() == []  # idempotent
    with sqlite3.connect(config.key_store_path) as conn:
        assert conn.execute("SELECT count(*) FROM space_keys").fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM data_keys").fetchone()[0] == 0
    for device in (phone, laptop, bob):
        with pytest.raises(AccountEnded, match="service shut down for region 'default'"):
            service.authenticate(device.credential)
    assert service.service_status().mode is ServiceMode.CLOSED


def test_a_device_the_closing_has_not_reached_is_ended_when_it_authenticates(
    service: CloudService, clock: FakeClock
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    service.announce_closing(CLOSES)
    clock.now = CLOSES + timedelta(minutes=1)  # no enforcement ran yet
    assert service.account_status(phone.space_id) is None
    with pytest.raises(AccountEnded, match="service shut down"):
        service.authenticate(phone.credential)
    status = service.account_status(phone.space_id)
    assert status is not None and status.reason is EndReason.SERVICE_SHUTDOWN


def test_a_process_starting_after_the_date_ends_every_account(
    config: CloudConfig, service: CloudService, clock: FakeClock
) -> None:
    alice, _ = new_user(service, "alice", "phone", "laptop")
    service.announce_closing(CLOSES, EXPORT_UNTIL)
    clock.now = EXPORT_UNTIL + timedelta(days=1)
    restarted = CloudService(config)
    try:
        status = restarted.account_status(alice.space_id)
        assert status is not None and status.reason is EndReason.SERVICE_SHUTDOWN
        assert status.keys_destroyed_at == clock.now
    finally:
        restarted.close()


# --- over HTTP ------------------------------------------------------------------------


@pytest.fixture
def client(config: CloudConfig) -> Iterator[TestClient]:
    with TestClient(create_app(config)) as c:
        yield c


def _service(client: TestClient) -> CloudService:
    service = client.app.state.service  # type: ignore[attr-defined]
    assert isinstance(service, CloudService)
    return service


def _enroll(client: TestClient, user: str) -> dict[str, str]:
    _, code = _service(client).add_user(user)
    answer = client.post(
        "/v1/enroll",
        json={
            "protocol_version": 2,
            "code": code,
            "device_name": "phone",
            "public_key": base64.b64encode(bytes(PrivateKey.generate().public_key)).decode(),
        },
    )
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['credential']}"}


def _push(client: TestClient, headers: dict[str, str], ops: Ops, episode: str) -> Any:
    body = {"protocol_version": 2, "ops": [ops.episode(episode, "I like tea.")]}
    return client.post("/v1/push", json=body, headers=headers)


def test_the_closing_over_http(client: TestClient, ops: Ops, clock: FakeClock) -> None:
    service = _service(client)
    headers = _enroll(client, "alice")
    space = service.find_space("alice")
    assert CLOSING_HEADER not in client.get("/v1/health").headers
    assert client.get("/v1/service").json() == {
        "protocol_version": 1,
        "region": "default",
        "mode": "open",
        "announced_at": None,
        "closes_at": None,
        "export_until": None,
    }
    service.announce_closing(CLOSES, EXPORT_UNTIL)

    # closing: everything works, and every answer says when the service closes
    pushed = _push(client, headers, ops, "ep_aaaaaaaa01")
    assert pushed.status_code == 200 and pushed.json()["receipts"][0]["status"] == "applied"
    notice = pushed.headers[CLOSING_HEADER]
    assert parse_closing_header(notice) == (CLOSES, EXPORT_UNTIL)
    assert client.get("/v1/health").headers[CLOSING_HEADER] == notice
    assert client.get("/v1/service").json()["mode"] == "closing"

    # export only: writes answer 503 and change nothing; pulls and wipes still work
    clock.now = CLOSES + timedelta(days=1)
    seq = service.last_seq(space)
    refused = _push(client, headers, ops, "ep_aaaaaaaa02")
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "service_closed"
    assert "export stays open until" in refused.json()["message"]
    assert refused.headers[CLOSING_HEADER] == notice
    assert service.last_seq(space) == seq
    for path, body in (
        ("/v1/recall", {"query": "tea"}),
        ("/v1/enroll", {"code": "x" * 10, "device_name": "x", "public_key": "A" * 44}),
        ("/v1/account/delete", {"request_id": "req_aaaaaaaaaaaa", "proof": "AAAA"}),
        ("/v1/account-key", {"account_key": "A" * 43 + "="}),
    ):
        answer = client.post(path, json={"protocol_version": 2, **body}, headers=headers)
        assert answer.status_code == 503 and answer.json()["code"] == "service_closed", path
    pulled = client.post("/v1/pull", json={"protocol_version": 2}, headers=headers)
    assert pulled.status_code == 200 and len(pulled.json()["changes"]) == 1
    assert pulled.headers[CLOSING_HEADER] == notice
    assert client.get("/v1/service").json()["mode"] == "export_only"

    # closed: every account ends; its devices hear 410 (enrolling stays refused)
    clock.now = EXPORT_UNTIL
    for path in ("/v1/push", "/v1/pull"):
        body = {"protocol_version": 2, "ops": []} if path == "/v1/push" else {"protocol_version": 2}
        ended = client.post(path, json=body, headers=headers)
        assert ended.status_code == 410, ended.text
        assert ended.json()["code"] == "account_ended"
        assert "service shut down" in ended.json()["message"]
    wiped = client.post("/v1/wiped", json={"protocol_version": 2}, headers=headers)
    assert wiped.status_code == 200, wiped.text
    status = service.account_status(space)
    assert status is not None and status.reason is EndReason.SERVICE_SHUTDOWN
    assert status.pending == ()  # the one device confirmed its wipe
    assert client.get("/v1/service").json()["mode"] == "closed"
