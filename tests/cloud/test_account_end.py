"""The end of an account (``CloudService.end_space``, ``delete_account``,
``account_status``) on both stores: everything of the space is forgotten the way a
permanent forget forgets one record, every key of the space leaves the key store, and
nothing else changes; the devices that have not wiped their copy stay pending."""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cloud.account_end import REDACTED_REASON, EndReason
from cloud.app import create_app
from cloud.config import CloudConfig
from cloud.errors import (
    AccountEnded,
    KeyStoreError,
    NotFound,
    StrongAuthRequired,
)
from cloud.service import CloudService
from protocol import strongauth
from protocol.messages import (
    AccountKeyRequest,
    AckRequest,
    DeleteAccountRequest,
    PendingDevice,
    PullRequest,
    RecallRequest,
)
from protocol.operations import Receipt, ReceiptStatus
from simulator.walls import compare, take_digest
from tests.cloud.conftest import (
    Device,
    FakeClock,
    Ops,
    applied,
    feed,
    key_store_bytes,
    new_user,
    push,
)

WORD = "Quokkamarmalade"
TYPED = f"I hide the {WORD} jar behind the flour."
PROJECT = "Fjordsalmonplan"
PASSPHRASE = "correct horse battery staple"
KEY_TABLES = ("space_keys", "data_keys", "search_keys")


def _fill(service: CloudService, ops: Ops, phone: Device) -> None:
    """Memory holding the planted word in every place it can go: an episode, a record,
    an artifact, a refused fragment's receipt reason, a project's name."""
    applied(
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa01", TYPED),
            ops.remember("rec_aaaaaaaa01", TYPED, ["ep_aaaaaaaa01"]),
            ops.artifact("art_aaaaaaaa01", ["rec_aaaaaaaa01"], f"Summary: the {WORD} jar."),
            ops.project(PROJECT),
            ops.episode("ep_aaaaaaaa02", f"{WORD} is my favourite word.", "conv-2"),
        )
    )
    refused = push(service, phone, ops.remember("rec_aaaaaaaa02", WORD, ["ep_aaaaaaaa01"]))
    assert refused.receipts[0].status is ReceiptStatus.REFUSED
    assert WORD in (refused.receipts[0].reason or "")  # a reason can quote the words


def _key_rows(path: Path, space_id: str) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            table: conn.execute(
                f"SELECT count(*) FROM {table} WHERE space_id = ?", (space_id,)
            ).fetchone()[0]
            for table in KEY_TABLES
        }
    finally:
        conn.close()


def _record_store_bytes(config: CloudConfig) -> bytes:
    path = Path(config.store_url.removeprefix("sqlite:///"))
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def _names(devices: Sequence[PendingDevice]) -> list[str]:
    return sorted(d.device_name for d in devices)


def test_ending_a_space_leaves_only_skeletons_and_destroys_every_key_of_it(
    service: CloudService, config: CloudConfig, ops: Ops, clock: FakeClock
) -> None:
    phone, laptop, _tablet = new_user(service, "alice", "phone", "laptop", "tablet")
    _fill(service, ops, phone)
    feed(service, laptop)  # the laptop holds everything; the tablet never pulled
    (bob,) = new_user(service, "bob", "phone")
    applied(push(service, bob, ops.episode("ep_bbbbbbbb01", TYPED)))
    space = phone.space_id
    with sqlite3.connect(config.key_store_path) as conn:
        wrapped = {
            r[0]: bytes(r[1])
            for r in conn.execute(
                "SELECT key_id, wrapped FROM data_keys WHERE space_id = ?", (space,)
            )
        }
    assert len(wrapped) >= 4 and _key_rows(config.key_store_path, space) == {
        "space_keys": 1,
        "data_keys": len(wrapped),
        "search_keys": 1,
    }
    before = take_digest(service)
    seen = [v.encode() if isinstance(v, str) else v for v in service.store.audit_blobs()]
    for word in (WORD, PROJECT):  # positive control: the scan sees the words in the clear
        assert any(word.encode() in value for value in seen), word
    clock.advance(timedelta(minutes=5))

    end = service.end_space(space, EndReason.DELETED)

    assert (end.space_id, end.ended_at, end.reason) == (space, clock.now, EndReason.DELETED)
    assert end.keys_destroyed_at == clock.now
    # every device that may hold a copy stays pending until it confirms its wipe
    assert _names(end.pending) == ["laptop", "phone", "tablet"]
    # nothing of any other space changed, in the record store or the key store
    assert compare(before, take_digest(service), own=[space]) == []
    # the record store holds skeletons only
    for record_id in ("rec_aaaaaaaa01",):
        state = service.record_status(space, record_id)
        assert state.lifecycle_state.value == "permanently_forgotten"
        assert state.forgotten_at == clock.now
    for value in service.store.audit_blobs():
        data = value.encode() if isinstance(value, str) else value
        assert WORD.encode() not in data and PROJECT.encode() not in data, value[:200]
    if service.store.dialect == "sqlite":
        raw = _record_store_bytes(config)
        assert WORD.encode() not in raw and PROJECT.encode() not in raw
    with service.store.session() as s:
        for _op_id, receipt in s.receipts_of(space):
            reason = Receipt.model_validate_json(receipt).reason
            assert reason is None or reason == REDACTED_REASON
        assert s.projects(space) == {}
    # the key store holds no key of the space, in its file or its WAL
    assert _key_rows(config.key_store_path, space) == dict.fromkeys(KEY_TABLES, 0)
    raw_keys = key_store_bytes(config.key_store_path)
    for key_id, blob in wrapped.items():
        assert blob not in raw_keys, f"wrapped key {key_id} survives in the key store"
    with pytest.raises(KeyStoreError, match=space):
        service.key_store.index_key(space)
    with pytest.raises(KeyStoreError, match=space):
        service.key_store.search_key(space)
    # bob's memory is whole
    assert service.key_store.search_key(bob.space_id)
    assert feed(service, bob).episodes["ep_bbbbbbbb01"].text == TYPED


def test_an_ended_space_refuses_its_devices_and_frees_its_name(
    service: CloudService, ops: Ops, clock: FakeClock
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _fill(service, ops, phone)
    space = phone.space_id
    end = service.end_space(space, EndReason.DELETED)
    for device in (phone, laptop):
        with pytest.raises(AccountEnded, match=f"space {space} ended at .*deleted the account"):
            service.authenticate(device.credential)
    calls = [
        lambda: push(service, phone, ops.episode("ep_aaaaaaaa09", "Hello there.")),
        lambda: service.pull(space, phone.device_id, PullRequest()),
        lambda: service.ack(space, phone.device_id, AckRequest(event_ids=[1])),
        lambda: service.recall(space, phone.device_id, RecallRequest(query="jar")),
        lambda: service.new_enrollment_code(space),
        lambda: service.register_account_key(
            space, phone.device_id, AccountKeyRequest(account_key=b"\x01" * 32)
        ),
    ]
    for call in calls:
        with pytest.raises(AccountEnded, match="must wipe its copy"):
            call()
    # the user's name is gone (it was personal data) and free again; the id still finds it
    with pytest.raises(NotFound, match="alice"):
        service.find_space("alice")
    assert service.find_space(space) == space
    new_space, _code = service.add_user("alice")
    assert new_space != space
    # ending again changes nothing
    clock.advance(timedelta(days=1))
    again = service.end_space(space, EndReason.SERVICE_SHUTDOWN)
    assert (again.ended_at, again.reason) == (end.ended_at, EndReason.DELETED)
    assert service.account_status(new_space) is None


def test_devices_confirm_their_wipe_and_leave_the_pending_list(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop, old = new_user(service, "alice", "phone", "laptop", "old")
    (bob,) = new_user(service, "bob", "phone")
    service.revoke_device(phone.space_id, old.device_id)
    # a revoked device's word is no evidence (whoever holds a stolen phone can send it):
    # it stays listed, as a device that may still hold copies (issue 22, item 4)
    service.confirm_wipe(old.credential)
    with pytest.raises(NotFound, match="is not revoked"):
        service.confirm_wipe(phone.credential)  # nothing to confirm while the space lives
    end = service.end_space(phone.space_id, EndReason.DELETED)
    assert _names(end.pending) == ["laptop", "old", "phone"]
    wiped = service.confirm_wipe(laptop.credential)
    assert wiped.device_id == laptop.device_id
    assert service.confirm_wipe(laptop.credential).wiped_at == wiped.wiped_at  # kept
    status = service.account_status(phone.space_id)
    assert status is not None and _names(status.pending) == ["old", "phone"]
    service.confirm_wipe(phone.credential)
    status = service.account_status(phone.space_id)
    assert status is not None and _names(status.pending) == ["old"]
    with pytest.raises(NotFound, match="is not revoked"):
        service.confirm_wipe(bob.credential)  # another space's live device: nothing changes
    assert service.account_status(bob.space_id) is None


def test_a_crash_between_commit_and_key_destruction_is_finished_at_start_up(
    service: CloudService, config: CloudConfig, ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _fill(service, ops, phone)
    space = phone.space_id

    def crash(*_args: object) -> None:
        raise KeyStoreError("the process died before the key store was reached (simulated)")

    monkeypatch.setattr(service.key_store, "destroy", crash)
    monkeypatch.setattr(service.key_store, "destroy_space", crash)
    end = service.end_space(space, EndReason.DELETED)
    assert end.keys_destroyed_at is None  # committed; the keys are still there
    assert _key_rows(config.key_store_path, space)["space_keys"] == 1
    with pytest.raises(AccountEnded):  # the content is withheld all the same
        service.authenticate(phone.credential)
    monkeypatch.undo()

    restarted = CloudService(config)  # a new process on the same stores
    try:
        status = restarted.account_status(space)
        assert status is not None and status.keys_destroyed_at is not None
        assert _key_rows(config.key_store_path, space) == dict.fromkeys(KEY_TABLES, 0)
        assert restarted.ensure_destroyed() == 0  # nothing left to do
    finally:
        restarted.close()


def test_deleting_the_account_needs_the_account_key(
    service: CloudService, ops: Ops, clock: FakeClock
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _fill(service, ops, phone)
    space = phone.space_id
    key = strongauth.account_signing_key(PASSPHRASE, space)
    wrong = strongauth.account_signing_key("not the passphrase", space)
    request = DeleteAccountRequest(
        request_id="req_aaaaaaaaaaaa",
        proof=strongauth.prove_delete_account(key, space, "req_aaaaaaaaaaaa"),
    )
    before = take_digest(service)
    with pytest.raises(StrongAuthRequired, match=f"space {space} has no account key"):
        service.delete_account(space, phone.device_id, request)
    service.register_account_key(
        space, phone.device_id, AccountKeyRequest(account_key=bytes(key.verify_key))
    )
    registered = take_digest(service)
    assert compare(before, registered, own=[]) != []  # the scan sees a change
    forged = [
        # the wrong passphrase
        DeleteAccountRequest(
            request_id="req_aaaaaaaaaaaa",
            proof=strongauth.prove_delete_account(wrong, space, "req_aaaaaaaaaaaa"),
        ),
        # a proof made for another request
        DeleteAccountRequest(
            request_id="req_bbbbbbbbbbbb",
            proof=strongauth.prove_delete_account(key, space, "req_aaaaaaaaaaaa"),
        ),
        # a proof made for forgetting all memory, not for deleting the account
        DeleteAccountRequest(
            request_id="req_aaaaaaaaaaaa",
            proof=strongauth.prove(key, space, "req_aaaaaaaaaaaa", None),
        ),
        DeleteAccountRequest(request_id="req_aaaaaaaaaaaa", proof=b"\x00" * 64),
    ]
    for bad in forged:
        with pytest.raises(StrongAuthRequired, match=r"does not verify.*nothing was changed"):
            service.delete_account(space, laptop.device_id, bad)
    assert compare(registered, take_digest(service), own=[]) == []
    assert service.account_status(space) is None

    clock.advance(timedelta(hours=1))
    answer = service.delete_account(space, laptop.device_id, request)
    assert (answer.space_id, answer.ended_at) == (space, clock.now)
    assert _names(answer.pending) == ["laptop", "phone"]
    status = service.account_status(space)
    assert status is not None and status.reason is EndReason.DELETED
    assert base64.b64encode(request.proof)  # the proof itself is not stored anywhere
    for value in service.store.audit_blobs():
        assert request.proof not in (value if isinstance(value, bytes) else value.encode())


# --- over HTTP ------------------------------------------------------------------------


def test_deleting_the_account_over_http(config: CloudConfig) -> None:
    with TestClient(create_app(config)) as client:
        service = client.app.state.service  # type: ignore[attr-defined]
        phone, laptop = new_user(service, "alice", "phone", "laptop")
        space = phone.space_id
        key = strongauth.account_signing_key(PASSPHRASE, space)
        proof = strongauth.prove_delete_account(key, space, "req_aaaaaaaaaaaa")
        body = {
            "protocol_version": 2,
            "request_id": "req_aaaaaaaaaaaa",
            "proof": base64.b64encode(proof).decode(),
        }
        auth = {"Authorization": f"Bearer {phone.credential}"}
        refused = client.post("/v1/account/delete", json=body, headers=auth)
        assert refused.status_code == 403 and refused.json()["code"] == "strong_auth_required"
        assert "register an account passphrase" in refused.json()["message"]
        service.register_account_key(
            space, phone.device_id, AccountKeyRequest(account_key=bytes(key.verify_key))
        )
        old = client.post("/v1/account/delete", json={**body, "protocol_version": 1}, headers=auth)
        assert old.status_code == 400 and "new in protocol version 2" in old.json()["message"]
        assert service.account_status(space) is None

        deleted = client.post("/v1/account/delete", json=body, headers=auth)
        assert deleted.status_code == 200, deleted.text
        answer = deleted.json()
        assert answer["space_id"] == space and answer["protocol_version"] == 2
        assert sorted(d["device_name"] for d in answer["pending"]) == ["laptop", "phone"]

        for device in (phone, laptop):
            headers = {"Authorization": f"Bearer {device.credential}"}
            for method, path, sent in (
                ("POST", "/v1/pull", {"protocol_version": 2}),
                ("POST", "/v1/push", {"protocol_version": 2, "ops": []}),
                ("POST", "/v1/account/delete", body),
                ("GET", "/v1/forgets/pending", None),
                ("GET", "/v1/records/rec_aaaaaaaa01", None),
            ):
                ended = client.request(method, path, json=sent, headers=headers)
                assert ended.status_code == 410, (path, ended.text)
                assert ended.json()["code"] == "account_ended"
                assert space in ended.json()["message"]
        wiped = client.post("/v1/wiped", json={"protocol_version": 2}, headers=auth)
        assert wiped.status_code == 200 and wiped.json()["device_id"] == phone.device_id
        status = service.account_status(space)
        assert status is not None and _names(status.pending) == ["laptop"]
