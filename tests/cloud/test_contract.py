"""The cloud contract, run against every record store (SQLite file and PostgreSQL)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path

import pytest

from cloud.config import CloudConfig
from cloud.errors import (
    DeviceRevoked,
    EnrollmentRefused,
    MalformedCursorError,
    MalformedRequest,
    NotFound,
    PullRequired,
    Unauthorized,
)
from cloud.service import CloudService, encode_cursor
from protocol.messages import (
    AckRequest,
    EnrollRequest,
    EpisodeChange,
    EpisodeContent,
    KeyDestruction,
    PullRequest,
    RecordStateChange,
    RecordVersionChange,
)
from protocol.model import LifecycleState, RecordContent
from protocol.operations import ReceiptStatus, RefusalCode
from protocol.sealing import binding, open_sealed
from protocol.version import PROTOCOL_VERSION
from tests.cloud.conftest import (
    SENTENCE,
    TYPED,
    Device,
    FakeClock,
    Ops,
    enroll,
    new_user,
    pull_all,
    push,
)


def _pending(service: CloudService, space_id: str) -> dict[str, set[str]]:
    return {
        f.record_id: {d.device_id for d in f.pending} for f in service.pending(space_id).forgets
    }


def _key_store_bytes(path: Path) -> bytes:
    data = b""
    for suffix in ("", "-wal", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            data += p.read_bytes()
    return data


# --- enrollment and auth -------------------------------------------------------------


def test_enrollment_code_is_single_use(service: CloudService) -> None:
    space_id, code = service.add_user("alice")
    phone = enroll(service, code, "phone")
    assert phone.space_id == space_id
    assert service.authenticate(phone.credential) == (space_id, phone.device_id)
    with pytest.raises(EnrollmentRefused, match="already used"):
        enroll(service, code, "laptop")
    with pytest.raises(EnrollmentRefused, match="unknown"):
        enroll(service, "not-a-real-code-at-all", "laptop")


def test_expired_code_is_refused_by_the_injected_clock(
    service: CloudService, clock: FakeClock
) -> None:
    _, code = service.add_user("alice")
    _, late_code = service.add_user("bob")
    clock.advance(timedelta(hours=23, minutes=59))
    enroll(service, code)  # still valid
    clock.advance(timedelta(minutes=1))
    with pytest.raises(EnrollmentRefused, match="expired"):
        enroll(service, late_code)


def test_a_bad_public_key_is_refused_and_the_code_stays_usable(service: CloudService) -> None:
    _, code = service.add_user("alice")
    with pytest.raises(MalformedRequest, match=r"public_key.*32 bytes, got 5"):
        service.enroll(EnrollRequest(code=code, device_name="phone", public_key=b"12345"))
    enroll(service, code)  # nothing was consumed


def test_codes_and_credentials_are_stored_hashed(service: CloudService) -> None:
    _, code = service.add_user("alice")
    phone = enroll(service, code)
    blobs = list(service.store.audit_blobs())
    assert not any(code in b for b in blobs if isinstance(b, str))
    assert not any(phone.credential in b for b in blobs if isinstance(b, str))
    assert any(b == "phone" for b in blobs)  # the audit does see every table


def test_unknown_credential_is_unauthorized(service: CloudService) -> None:
    new_user(service, "alice", "phone")
    with pytest.raises(Unauthorized):
        service.authenticate("cred_nope")
    with pytest.raises(Unauthorized):
        service.authenticate("")


def test_a_revoked_device_is_refused_everywhere_and_only_it(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    (stranger,) = new_user(service, "bob", "phone")
    with pytest.raises(NotFound, match="no device"):
        service.revoke_device(phone.space_id, stranger.device_id)  # another space's device
    service.revoke_device(phone.space_id, phone.device_id)
    with pytest.raises(DeviceRevoked, match=f"device {phone.device_id} was revoked"):
        service.authenticate(phone.credential)
    with pytest.raises(NotFound, match="no device"):
        service.revoke_device(phone.space_id, phone.device_id)  # once is enough
    assert service.authenticate(laptop.credential) == (laptop.space_id, laptop.device_id)
    assert service.authenticate(stranger.credential)[1] == stranger.device_id
    with pytest.raises(Unauthorized, match="not enrolled"):
        push(service, phone, ops.episode("ep_0000000001", TYPED))  # past the HTTP boundary too
    with service.store.session() as s:
        listed = {d.device_id: d.revoked_at is not None for d in s.devices(phone.space_id)}
    assert listed == {phone.device_id: True, laptop.device_id: False}


def test_find_space_by_name_or_id(service: CloudService) -> None:
    space_id, _ = service.add_user("alice")
    assert service.find_space("alice") == space_id
    assert service.find_space(space_id) == space_id
    with pytest.raises(NotFound, match="nobody"):
        service.find_space("nobody")


# --- push ------------------------------------------------------------------------------


def test_replayed_ops_are_duplicates_with_one_effect(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    batch = [
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
        ops.remember("rec_aaaaaaaa02", "1729", ["ep_aaaaaaaa01"]),
    ]
    first = push(service, phone, *batch).receipts
    assert [r.status for r in first] == [
        ReceiptStatus.APPLIED,
        ReceiptStatus.APPLIED,
        ReceiptStatus.REFUSED,
    ]
    again = push(service, phone, *batch).receipts
    assert [r.status for r in again] == [ReceiptStatus.DUPLICATE] * 3
    assert [r.original_status for r in again] == [r.status for r in first]
    assert again[1].record_id == "rec_aaaaaaaa01"
    assert again[1].applied_at == first[1].applied_at
    assert again[2].code is RefusalCode.NOT_SAID and again[2].reason == first[2].reason
    # one effect: one episode, one record version and its state in the change feed
    kinds = [c.kind for c in pull_all(service, phone)]
    assert kinds == ["episode", "record_version", "record_state"]


def test_a_repeated_op_id_inside_one_batch_applies_once(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    op = ops.episode("ep_aaaaaaaa01", TYPED)
    receipts = push(service, phone, op, op).receipts
    assert [r.status for r in receipts] == [ReceiptStatus.APPLIED, ReceiptStatus.DUPLICATE]
    assert [r.index for r in receipts] == [0, 1]
    assert len(pull_all(service, phone)) == 1


def test_a_malformed_op_is_refused_and_the_rest_applies(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    bad_text = ops.episode("ep_aaaaaaaa02", "x")
    bad_text["text"] = ""
    no_kind = {"op_id": ops.op_id(), "record_id": "rec_aaaaaaaa09"}
    naive_time = ops.episode("ep_aaaaaaaa03", "Hello there.")
    naive_time["typed_at"] = "2026-03-01T09:00:00"
    receipts = push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa01", TYPED),
        bad_text,
        no_kind,
        naive_time,
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    ).receipts
    assert [r.status for r in receipts] == [
        ReceiptStatus.APPLIED,
        ReceiptStatus.REFUSED,
        ReceiptStatus.REFUSED,
        ReceiptStatus.REFUSED,
        ReceiptStatus.APPLIED,
    ]
    assert receipts[1].code is RefusalCode.MALFORMED
    assert "field 'text'" in (receipts[1].reason or "")
    assert bad_text["op_id"] in (receipts[1].reason or "")
    assert "field 'kind'" in (receipts[2].reason or "")
    assert "field 'typed_at'" in (receipts[3].reason or "")
    kinds = [c.kind for c in pull_all(service, phone)]
    assert kinds == ["episode", "record_version", "record_state"]


def test_a_fragment_is_refused_as_not_said(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    receipts = push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", "1729", ["ep_aaaaaaaa01"]),
        ops.remember("rec_aaaaaaaa02", "My favourite number is 1729.", ["ep_aaaaaaaa01"]),
        ops.remember("rec_aaaaaaaa03", SENTENCE, ["ep_aaaaaaaa01"], conversation="conv-2"),
    ).receipts
    fragment, paraphrase, elsewhere = receipts[1:]
    assert fragment.status is ReceiptStatus.REFUSED and fragment.code is RefusalCode.NOT_SAID
    assert "'1729'" in (fragment.reason or "") and "fragment" in (fragment.reason or "")
    assert "rec_aaaaaaaa01" in (fragment.reason or "")
    assert paraphrase.code is RefusalCode.NOT_SAID
    assert elsewhere.code is RefusalCode.WRONG_CONVERSATION
    for record_id in ("rec_aaaaaaaa01", "rec_aaaaaaaa02", "rec_aaaaaaaa03"):
        with pytest.raises(NotFound, match=record_id):
            service.record_status(phone.space_id, record_id)


def test_said_is_checked_against_the_stored_episode_not_the_claim(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    receipts = push(
        service, phone, ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa77"])
    ).receipts
    assert receipts[0].code is RefusalCode.UNKNOWN_EPISODE


# --- pull --------------------------------------------------------------------------------


def test_pull_pages_in_server_order_and_content_opens_on_the_device(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    push(service, phone, *(ops.episode(f"ep_aaaaaaaa0{i}", f"Note {i}.") for i in range(1, 5)))
    push(service, laptop, *(ops.episode(f"ep_bbbbbbbb0{i}", f"Other {i}.") for i in range(1, 4)))
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        page = service.pull(laptop.space_id, laptop.device_id, PullRequest(cursor=cursor, limit=3))
        pages += 1
        seen.extend(c.seq for c in page.changes)
        assert page.has_more == (pages < 3)
        cursor = page.cursor
        if not page.has_more:
            break
    assert seen == list(range(1, 8))
    empty = service.pull(laptop.space_id, laptop.device_id, PullRequest(cursor=cursor))
    assert empty.changes == [] and empty.cursor == cursor and not empty.has_more

    first = pull_all(service, laptop)[0]
    assert isinstance(first, EpisodeChange) and first.episode_id == "ep_aaaaaaaa01"
    dek = laptop.open_key(first.sealed_key)
    content = EpisodeContent.model_validate_json(
        open_sealed(
            dek, first.sealed_content, binding(laptop.space_id, "episode", first.episode_id, 1)
        )
    )
    assert content.text == "Note 1." and content.conversation_id == "conv-1"
    # the sealed key is for this device only
    with pytest.raises(Exception):  # noqa: B017 - nacl's CryptoError
        phone.open_key(first.sealed_key)


def test_record_version_change_carries_sealed_content(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    )
    change, state = pull_all(service, phone)[1:]
    assert isinstance(change, RecordVersionChange) and isinstance(state, RecordStateChange)
    assert change.version == 1 and change.supersedes is None
    assert state.lifecycle_state is LifecycleState.ACTIVE and state.current_version == 1
    content = RecordContent.model_validate_json(
        open_sealed(
            phone.open_key(change.sealed_key),
            change.sealed_content,
            binding(phone.space_id, "record", "rec_aaaaaaaa01", 1),
        )
    )
    assert content.text == SENTENCE and content.source_episode_ids == ["ep_aaaaaaaa01"]
    assert content.epistemic_state.value == "said"  # sealed, not a plain column
    status = service.record_status(phone.space_id, "rec_aaaaaaaa01")
    assert status.lifecycle_state is LifecycleState.ACTIVE and status.version == 1


def test_a_cursor_the_server_did_not_issue_is_refused(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    push(service, phone, ops.episode("ep_aaaaaaaa01", TYPED))
    for cursor in ("garbage!", "", "YzE6MDE", encode_cursor(2)):
        with pytest.raises(MalformedCursorError):
            service.pull(phone.space_id, phone.device_id, PullRequest(cursor=cursor))
    assert (
        service.pull(phone.space_id, phone.device_id, PullRequest(cursor=encode_cursor(1))).changes
        == []
    )


# --- forgetting ------------------------------------------------------------------------


def _remember_and_forget(
    service: CloudService, ops: Ops, phone: Device
) -> tuple[list[str], dict[str, bytes]]:
    push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    )
    changes = pull_all(service, phone)
    key_ids = [c.key_id for c in changes if hasattr(c, "key_id")]
    wrapped = service.key_store.wrapped_keys_for(key_ids)
    assert set(wrapped) == set(key_ids)
    before = _key_store_bytes(service.key_store_path)
    assert all(blob in before for blob in wrapped.values()), "the scan must be able to see keys"
    receipts = push(service, phone, ops.forget("rec_aaaaaaaa01")).receipts
    assert receipts[0].status is ReceiptStatus.APPLIED
    return key_ids, wrapped


def test_forget_leaves_a_skeleton_and_destroys_every_key(
    service: CloudService, ops: Ops, clock: FakeClock
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    clock.advance(timedelta(minutes=5))
    key_ids, wrapped = _remember_and_forget(service, ops, phone)

    skeleton = service.record_status(phone.space_id, "rec_aaaaaaaa01")
    assert skeleton.model_dump(exclude_none=True) == {
        "protocol_version": PROTOCOL_VERSION,
        "id": "rec_aaaaaaaa01",
        "lifecycle_state": LifecycleState.FORGOTTEN,
        "forgotten_at": clock.now,
    }
    assert service.key_store.existing(key_ids) == set()
    assert all(service.key_store.data_key(phone.space_id, k) is None for k in key_ids)
    raw = _key_store_bytes(service.key_store_path)
    for key_id, blob in wrapped.items():
        assert blob not in raw, f"wrapped key {key_id} survives in the key store file or WAL"
    # nothing readable remains in the record store: no plain text anywhere
    for value in service.store.audit_blobs():
        data = value.encode() if isinstance(value, str) else value
        assert b"1729" not in data and b"tea" not in data
    # the key-destruction event names every key and the source episode
    event = pull_all(service, phone)[-1]
    assert isinstance(event, KeyDestruction)
    assert sorted(event.key_ids) == sorted(key_ids)
    assert event.episode_ids == ["ep_aaaaaaaa01"]


def test_forgotten_content_is_never_pulled_again(service: CloudService, ops: Ops) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _remember_and_forget(service, ops, phone)
    changes = pull_all(service, laptop)
    assert [c.kind for c in changes] == ["key_destruction"]


def test_ops_on_a_forgotten_record_are_refused_and_it_stays_gone(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    key_ids, _ = _remember_and_forget(service, ops, phone)
    events = [c.event_id for c in pull_all(service, phone) if isinstance(c, KeyDestruction)]
    service.ack(phone.space_id, phone.device_id, AckRequest(event_ids=events))
    receipts = push(
        service,
        phone,
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
        ops.forget("rec_aaaaaaaa01"),
        ops.remember("rec_aaaaaaaa02", SENTENCE, ["ep_aaaaaaaa01"]),
        ops.episode("ep_aaaaaaaa01", TYPED),
    ).receipts
    assert [r.code for r in receipts] == [
        RefusalCode.FORGOTTEN,
        RefusalCode.FORGOTTEN,
        RefusalCode.UNKNOWN_EPISODE,
        RefusalCode.EPISODE_EXISTS,
    ]
    assert "rec_aaaaaaaa01" in (receipts[0].reason or "")
    assert service.record_status(phone.space_id, "rec_aaaaaaaa01").lifecycle_state is (
        LifecycleState.FORGOTTEN
    )
    assert service.key_store.existing(key_ids) == set()
    assert [c.kind for c in pull_all(service, phone)] == ["key_destruction"]


def test_pending_lists_holders_until_each_acknowledges(service: CloudService, ops: Ops) -> None:
    phone, laptop, tablet = new_user(service, "alice", "phone", "laptop", "tablet")
    push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    )
    pull_all(service, laptop)  # the laptop now holds the record's key
    push(service, phone, ops.forget("rec_aaaaaaaa01"))
    assert _pending(service, phone.space_id) == {
        "rec_aaaaaaaa01": {phone.device_id, laptop.device_id}
    }
    # the tablet never held it: it may push, and an ack from it changes nothing
    assert push(service, tablet, ops.episode("ep_cccccccc01", "Hi.")).receipts[0].status is (
        ReceiptStatus.APPLIED
    )
    event_id = next(c.event_id for c in pull_all(service, laptop) if c.kind == "key_destruction")
    service.ack(tablet.space_id, tablet.device_id, AckRequest(event_ids=[event_id]))
    assert len(_pending(service, phone.space_id)["rec_aaaaaaaa01"]) == 2

    acked = service.ack(laptop.space_id, laptop.device_id, AckRequest(event_ids=[event_id] * 2))
    assert acked.acknowledged == [event_id]
    assert _pending(service, phone.space_id) == {"rec_aaaaaaaa01": {phone.device_id}}
    service.ack(laptop.space_id, laptop.device_id, AckRequest(event_ids=[event_id]))  # idempotent
    service.ack(phone.space_id, phone.device_id, AckRequest(event_ids=[event_id]))
    assert _pending(service, phone.space_id) == {"rec_aaaaaaaa01": set()}


def test_a_device_holding_only_the_source_episode_is_pending(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    push(service, phone, ops.episode("ep_aaaaaaaa01", TYPED))
    pull_all(service, laptop)  # the laptop holds the episode (the user's words) only
    push(service, phone, ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]))
    push(service, phone, ops.forget("rec_aaaaaaaa01"))
    assert laptop.device_id in _pending(service, phone.space_id)["rec_aaaaaaaa01"]


def test_pull_required_applies_nothing_until_acknowledged(service: CloudService, ops: Ops) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    )
    cursor = service.pull(laptop.space_id, laptop.device_id, PullRequest()).cursor
    push(service, phone, ops.forget("rec_aaaaaaaa01"))

    queued = ops.episode("ep_bbbbbbbb01", "Queued while offline.")
    with pytest.raises(PullRequired, match=laptop.device_id):
        push(service, laptop, queued, ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]))
    assert "ep_bbbbbbbb01" not in {getattr(c, "episode_id", None) for c in pull_all(service, phone)}
    page = service.pull(laptop.space_id, laptop.device_id, PullRequest(cursor=cursor))
    assert [c.kind for c in page.changes] == ["key_destruction"]  # the queued op is not there
    event = page.changes[0]
    assert isinstance(event, KeyDestruction)
    service.ack(laptop.space_id, laptop.device_id, AckRequest(event_ids=[event.event_id]))
    receipts = push(service, laptop, queued).receipts
    assert receipts[0].status is ReceiptStatus.APPLIED  # not a duplicate: nothing was stored


def test_a_crash_between_commit_and_key_destruction_is_finished_by_the_sweep(
    config: CloudConfig, ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = CloudService(config)
    try:
        (phone,) = new_user(service, "alice", "phone")
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa01", TYPED),
            ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
        )
        key_ids = [c.key_id for c in pull_all(service, phone) if hasattr(c, "key_id")]
        forget = ops.forget("rec_aaaaaaaa01")

        def crash(_key_ids: object) -> None:
            raise RuntimeError("power lost")

        monkeypatch.setattr(service.key_store, "destroy", crash)
        with pytest.raises(RuntimeError, match="power lost"):
            push(service, phone, forget)
        assert service.key_store.existing(key_ids) == set(key_ids)  # the crash window
        # the committed forget already hides the content from pulls
        assert [c.kind for c in pull_all(service, phone)][-1] == "key_destruction"
    finally:
        monkeypatch.undo()
        service.close()

    restarted = CloudService(config)  # start-up sweep
    try:
        assert restarted.key_store.existing(key_ids) == set()
        assert restarted.ensure_destroyed() == 0  # idempotent, nothing left
        events = [c.event_id for c in pull_all(restarted, phone) if c.kind == "key_destruction"]
        restarted.ack(phone.space_id, phone.device_id, AckRequest(event_ids=events))
        replay = push(restarted, phone, forget).receipts[0]
        assert replay.status is ReceiptStatus.DUPLICATE
        assert replay.original_status is ReceiptStatus.APPLIED
    finally:
        restarted.close()


# --- walls -------------------------------------------------------------------------------


def test_no_op_reaches_another_space(service: CloudService, ops: Ops) -> None:
    (alice,) = new_user(service, "alice", "phone")
    (bob,) = new_user(service, "bob", "phone")
    push(
        service,
        alice,
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    )
    alice_keys = [c.key_id for c in pull_all(service, alice) if hasattr(c, "key_id")]
    receipts = push(
        service,
        bob,
        ops.forget("rec_aaaaaaaa01"),
        ops.remember("rec_bbbbbbbb01", SENTENCE, ["ep_aaaaaaaa01"]),
    ).receipts
    assert receipts[0].code is RefusalCode.UNKNOWN_RECORD
    assert receipts[1].code is RefusalCode.UNKNOWN_EPISODE
    with pytest.raises(NotFound):
        service.record_status(bob.space_id, "rec_aaaaaaaa01")
    assert pull_all(service, bob) == []
    assert service.pending(bob.space_id).forgets == []
    assert service.record_status(alice.space_id, "rec_aaaaaaaa01").lifecycle_state is (
        LifecycleState.ACTIVE
    )
    assert service.key_store.existing(alice_keys) == set(alice_keys)
    # the same op id in another space is a different op
    shared = ops.episode("ep_cccccccc01", "Hello.")
    assert push(service, alice, shared).receipts[0].status is ReceiptStatus.APPLIED
    assert push(service, bob, shared).receipts[0].status is ReceiptStatus.APPLIED
    # bob may even use the same record id: it is his own record
    push(service, bob, ops.remember("rec_aaaaaaaa01", "Hello.", ["ep_cccccccc01"]))
    push(service, bob, ops.forget("rec_aaaaaaaa01"))
    assert service.record_status(alice.space_id, "rec_aaaaaaaa01").lifecycle_state is (
        LifecycleState.ACTIVE
    )
    assert service.key_store.existing(alice_keys) == set(alice_keys)


def test_concurrent_pushes_get_one_total_order(service: CloudService, ops: Ops) -> None:
    devices = new_user(service, "alice", "a", "b", "c", "d")
    batches = {
        d.device_id: [
            [ops.episode(f"ep_{i:02d}{j:02d}{k:02d}aaaa", f"Note {i} {j} {k}.") for k in range(3)]
            for j in range(6)
        ]
        for i, d in enumerate(devices)
    }

    def run(device: Device) -> None:
        for batch in batches[device.device_id]:
            push(service, device, *batch)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(run, devices))
    changes = pull_all(service, devices[0])
    assert [c.seq for c in changes] == list(range(1, 4 * 6 * 3 + 1))
    assert len({c.episode_id for c in changes}) == 72


def test_the_account_key_is_replaced_only_from_the_key_registered_now(
    service: CloudService,
) -> None:
    """The store's swap (``cloud.account_key``): a stale ``old`` writes nothing."""
    [phone] = new_user(service, "ada", "phone")
    first, second, third = b"\x01" * 32, b"\x02" * 32, b"\x03" * 32
    with service.store.session(phone.space_id, lock=True) as s:
        assert not s.replace_account_key(phone.space_id, first, second)  # none set yet
        s.set_account_key(phone.space_id, first)
        assert not s.replace_account_key(phone.space_id, third, second)
        assert s.account_key(phone.space_id) == first
        assert s.replace_account_key(phone.space_id, first, second)
        assert not s.replace_account_key(phone.space_id, first, third)  # stale now
    with service.store.session(phone.space_id) as s:
        assert s.account_key(phone.space_id) == second
