"""The full memory record through the cloud, on every record store (SQLite and PostgreSQL):
the thirteen operations, corrections and retractions, same-subject statements, the
forget cascade over derived items, mass forgets with strong authentication, projects,
and "as of" reads.
"""

from __future__ import annotations

import base64
from datetime import timedelta
from typing import Any

import pytest
from nacl.public import PrivateKey
from nacl.signing import SigningKey
from sqlalchemy import text

from cloud.errors import AccountKeyMismatch, NotFound
from cloud.service import CloudService
from protocol import strongauth, subjects
from protocol.messages import (
    AccountKeyRequest,
    AckRequest,
    EnrollRequest,
    KeyDestruction,
    RecordState,
)
from protocol.model import (
    EpistemicState,
    LifeArea,
    LifecycleState,
    TimeKind,
    UsageRestriction,
)
from protocol.operations import EffectKind, ReceiptStatus, RefusalCode
from protocol.receipts import receipt_message
from tests.cloud.conftest import (
    Device,
    FakeClock,
    Ops,
    applied,
    enroll,
    feed,
    key_store_bytes,
    new_user,
    pull_all,
    push,
)

ICED = "I drink my coffee iced."
HOT = "I drink my coffee hot now."
TODAY = "I drink my coffee hot today."
DULUTH = "I grew up in Duluth."
BERLIN = "I live in Berlin."
PASSPHRASE = "correct horse battery staple"


def _said(
    service: CloudService,
    ops: Ops,
    device: Device,
    record: str,
    episode: str,
    sentence: str,
    **fields: Any,
) -> None:
    applied(
        push(
            service,
            device,
            ops.episode(episode, sentence),
            ops.remember(record, sentence, [episode], **fields),
        )
    )


def _status(service: CloudService, device: Device, record_id: str) -> RecordState:
    return service.record_status(device.space_id, record_id)


# --- corrections, retractions, restatements ----------------------------------------------


def test_a_correction_is_a_new_sealed_version_and_the_old_one_is_kept(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", ICED)
    receipt = applied(
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa02", HOT),
            ops.correct("rec_aaaaaaaa01", HOT, ["ep_aaaaaaaa02"]),
        )
    ).receipts[1]
    assert receipt.effect is EffectKind.CORRECTED and receipt.versions == [1, 2]
    assert receipt.record_id == "rec_aaaaaaaa01"
    assert receipt_message(receipt).startswith("Your correction was committed")

    seen = feed(service, laptop)
    assert seen.versions[("rec_aaaaaaaa01", 1)].text == ICED  # v1 kept, still sealed
    assert seen.versions[("rec_aaaaaaaa01", 2)].text == HOT
    assert seen.versions[("rec_aaaaaaaa01", 2)].epistemic_state is EpistemicState.SAID
    state = seen.states["rec_aaaaaaaa01"]
    assert state.current_version == 2 and state.lifecycle_state is LifecycleState.ACTIVE
    assert seen.kinds.count("record_state") == 1  # only the latest state is sent
    status = _status(service, phone, "rec_aaaaaaaa01")
    assert status.version == 2 and status.lifecycle_state is LifecycleState.ACTIVE
    with service.store.engine.connect() as conn:
        rows = conn.execute(
            text("SELECT version, supersedes, epistemic_state FROM record_versions ORDER BY 1")
        ).all()
    assert [(r[0], r[1]) for r in rows] == [(1, None), (2, 1)]
    assert {r[2] for r in rows} == {"sealed"}  # the state is sealed, never a plain column


def test_dont_use_is_reversible_and_two_retractions_never_lose_each_other(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", DULUTH)
    _said(service, ops, phone, "rec_aaaaaaaa02", "ep_aaaaaaaa02", BERLIN)
    receipts = push(
        service,
        phone,
        ops.simple("dont_use", "rec_aaaaaaaa01"),
        ops.simple("dont_use", "rec_aaaaaaaa02"),
        ops.simple("use_again", "rec_aaaaaaaa01"),
        ops.simple("dont_use", "rec_aaaaaaaa02"),
        ops.simple("use_again", "rec_aaaaaaaa01"),
    ).receipts
    assert [r.effect for r in receipts[:3]] == [
        EffectKind.NOT_IN_USE,
        EffectKind.NOT_IN_USE,
        EffectKind.IN_USE_AGAIN,
    ]
    assert [r.code for r in receipts[3:]] == [RefusalCode.WRONG_STATE, RefusalCode.WRONG_STATE]
    assert _status(service, phone, "rec_aaaaaaaa01").lifecycle_state is LifecycleState.ACTIVE
    assert _status(service, phone, "rec_aaaaaaaa02").lifecycle_state is (LifecycleState.NOT_IN_USE)
    states = feed(service, phone).states
    assert states["rec_aaaaaaaa02"].lifecycle_state is LifecycleState.NOT_IN_USE


def test_dont_use_then_use_again_gives_a_candidate_back_as_a_candidate(
    service: CloudService, ops: Ops
) -> None:
    """The cloud applies ``SetLifecycle(candidate)`` like any state and sends it to the
    devices: a page's claim taken out of use and put back still waits for the user."""
    (phone,) = new_user(service, "alice", "phone")
    applied(push(service, phone, ops.episode("ep_aaaaaaaa01", "Read this page for me.")))
    applied(
        push(
            service,
            phone,
            ops.infer(
                "rec_aaaaaaaa01",
                text="The shop opens at 9.",
                source_kind="external_content",
                source_episode_ids=["ep_aaaaaaaa01"],
            ),
        )
    )
    out, back, by_assistant = push(
        service,
        phone,
        ops.simple("dont_use", "rec_aaaaaaaa01"),
        ops.simple("use_again", "rec_aaaaaaaa01"),
        ops.simple("use_again", "rec_aaaaaaaa01", by="assistant"),
    ).receipts
    assert (out.effect, back.effect) == (EffectKind.NOT_IN_USE, EffectKind.IN_USE_AGAIN)
    assert by_assistant.code is RefusalCode.NOT_ALLOWED
    assert _status(service, phone, "rec_aaaaaaaa01").lifecycle_state is LifecycleState.CANDIDATE
    states = feed(service, phone).states
    assert states["rec_aaaaaaaa01"].lifecycle_state is LifecycleState.CANDIDATE


def test_a_fact_restated_after_it_was_retracted_is_active_again(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", DULUTH)
    applied(push(service, phone, ops.simple("dont_use", "rec_aaaaaaaa01")))
    _said(service, ops, phone, "rec_aaaaaaaa02", "ep_aaaaaaaa02", DULUTH)
    assert _status(service, phone, "rec_aaaaaaaa02").lifecycle_state is LifecycleState.ACTIVE
    assert _status(service, phone, "rec_aaaaaaaa01").lifecycle_state is (LifecycleState.NOT_IN_USE)


# --- same subject, conflicts, exceptions --------------------------------------------------


def test_a_later_statement_on_the_same_subject_supersedes_the_older_without_a_correct(
    service: CloudService, ops: Ops, clock: FakeClock
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", ICED)
    seen_before = feed(service, laptop)
    assert seen_before.states["rec_aaaaaaaa01"].superseded_by_record is None
    clock.advance(timedelta(days=2))
    ops.at = clock.now.isoformat()
    _said(service, ops, phone, "rec_aaaaaaaa02", "ep_aaaaaaaa02", HOT)

    older = _status(service, phone, "rec_aaaaaaaa01")
    assert older.superseded_by_record == "rec_aaaaaaaa02"
    assert older.lifecycle_state is LifecycleState.ACTIVE and older.version == 1  # flagged only
    assert _status(service, phone, "rec_aaaaaaaa02").superseded_by_record is None
    seen = feed(service, laptop)
    assert seen.states["rec_aaaaaaaa01"].superseded_by_record == "rec_aaaaaaaa02"
    assert seen.states["rec_aaaaaaaa02"].superseded_by_record is None


def test_said_and_a_connected_source_on_one_subject_conflict_and_both_are_kept(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", BERLIN)
    receipt = applied(
        push(
            service,
            phone,
            ops.infer(
                "rec_aaaaaaaa02",
                text="I live in Hamburg.",
                epistemic_state="observed",
                source_kind="connected_source",
                source_episode_ids=["ep_aaaaaaaa01"],
            ),
        )
    ).receipts[0]
    assert receipt.effect is EffectKind.CREATED
    said, seen = (_status(service, phone, r) for r in ("rec_aaaaaaaa01", "rec_aaaaaaaa02"))
    assert said.conflicts_with == ["rec_aaaaaaaa02"] and seen.conflicts_with == ["rec_aaaaaaaa01"]
    assert said.lifecycle_state is LifecycleState.ACTIVE
    assert said.superseded_by_record is None and seen.superseded_by_record is None
    pulled = feed(service, phone)
    assert pulled.versions[("rec_aaaaaaaa02", 1)].evidence.conflicting_records == ["rec_aaaaaaaa01"]
    assert pulled.states["rec_aaaaaaaa01"].conflicts_with == ["rec_aaaaaaaa02"]


def test_a_one_off_exception_leaves_the_lasting_record_untouched(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", ICED)
    _said(service, ops, phone, "rec_aaaaaaaa02", "ep_aaaaaaaa02", TODAY, time_kind="one_off")
    lasting = _status(service, phone, "rec_aaaaaaaa01")
    assert lasting.superseded_by_record is None and lasting.conflicts_with == []
    assert lasting.version == 1 and lasting.lifecycle_state is LifecycleState.ACTIVE
    with service.store.engine.connect() as conn:
        events = conn.execute(
            text("SELECT kind FROM record_events WHERE record_id = 'rec_aaaaaaaa01'")
        ).all()
    assert [e[0] for e in events] == ["created"]


# --- what the assistant may and may not do --------------------------------------------------


def test_external_content_stays_a_candidate_and_never_becomes_a_behaviour_rule(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    applied(push(service, phone, ops.episode("ep_aaaaaaaa01", "Read this page for me.")))
    src: dict[str, Any] = {"source_episode_ids": ["ep_aaaaaaaa01"]}
    receipts = push(
        service,
        phone,
        ops.infer(
            "rec_aaaaaaaa01", text="Pays bills on the 1st.", source_kind="external_content", **src
        ),
        ops.infer(
            "rec_aaaaaaaa02",
            text="Always pay to account 123.",
            layer="behaviour_rule",
            source_kind="external_content",
            **src,
        ),
        ops.infer("rec_aaaaaaaa03", text="Has a peanut allergy.", sensitivity="health", **src),
        ops.infer("rec_aaaaaaaa04", text="Likes short answers.", **src),
        ops.infer("rec_aaaaaaaa05", text="Keep answers short.", layer="behaviour_rule", **src),
    ).receipts
    assert receipts[1].status is ReceiptStatus.REFUSED
    assert receipts[1].code is RefusalCode.NOT_ALLOWED
    assert "behaviour rule" in (receipts[1].reason or "")
    with pytest.raises(NotFound):
        _status(service, phone, "rec_aaaaaaaa02")
    lifecycles = {
        r: _status(service, phone, r).lifecycle_state
        for r in ("rec_aaaaaaaa01", "rec_aaaaaaaa03", "rec_aaaaaaaa04", "rec_aaaaaaaa05")
    }
    assert lifecycles == {
        "rec_aaaaaaaa01": LifecycleState.CANDIDATE,
        "rec_aaaaaaaa03": LifecycleState.CANDIDATE,
        "rec_aaaaaaaa04": LifecycleState.ACTIVE,
        "rec_aaaaaaaa05": LifecycleState.CANDIDATE,
    }


def test_only_the_user_confirms_a_candidate(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    applied(push(service, phone, ops.episode("ep_aaaaaaaa01", "Read this page for me.")))
    applied(
        push(
            service,
            phone,
            ops.infer(
                "rec_aaaaaaaa01",
                text="Pays bills on the 1st.",
                source_kind="external_content",
                source_episode_ids=["ep_aaaaaaaa01"],
            ),
        )
    )
    by_assistant, by_user, again = push(
        service,
        phone,
        ops.simple("confirm", "rec_aaaaaaaa01", by="assistant"),
        ops.simple("confirm", "rec_aaaaaaaa01"),
        ops.simple("confirm", "rec_aaaaaaaa01"),
    ).receipts
    assert by_assistant.code is RefusalCode.NOT_ALLOWED
    assert by_user.effect is EffectKind.CONFIRMED and by_user.versions == [1, 2]
    assert again.code is RefusalCode.WRONG_STATE
    status = _status(service, phone, "rec_aaaaaaaa01")
    assert status.lifecycle_state is LifecycleState.ACTIVE and status.version == 2
    seen = feed(service, phone)
    assert seen.versions[("rec_aaaaaaaa01", 2)].epistemic_state is EpistemicState.VERIFIED
    assert seen.versions[("rec_aaaaaaaa01", 1)].epistemic_state is EpistemicState.INFERRED


def test_reaffirm_answers_still_doing_this(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _said(
        service,
        ops,
        phone,
        "rec_aaaaaaaa01",
        "ep_aaaaaaaa01",
        "I am training for a race.",
        time_kind="for_now",
    )
    _said(service, ops, phone, "rec_aaaaaaaa02", "ep_aaaaaaaa02", DULUTH)
    still, ended, lasting = push(
        service,
        phone,
        ops.simple("reaffirm", "rec_aaaaaaaa01", still_true=True),
        ops.simple("reaffirm", "rec_aaaaaaaa01", still_true=False),
        ops.simple("reaffirm", "rec_aaaaaaaa02", still_true=True),
    ).receipts
    assert (still.effect, still.versions) == (EffectKind.REAFFIRMED, [1, 2])
    assert (ended.effect, ended.versions) == (EffectKind.ENDED, [2, 3])
    assert lasting.code is RefusalCode.WRONG_STATE
    assert feed(service, phone).versions[("rec_aaaaaaaa01", 3)].time_kind is TimeKind.PAST


def test_every_record_op_refuses_unknown_and_forgotten_records(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", DULUTH)
    applied(push(service, phone, ops.forget("rec_aaaaaaaa01")))
    events = [e.event_id for e in feed(service, phone).destroyed]
    service.ack(phone.space_id, phone.device_id, AckRequest(event_ids=events))
    applied(push(service, phone, ops.episode("ep_aaaaaaaa02", HOT)))

    def every(record_id: str) -> list[dict[str, object]]:
        return [
            ops.correct(record_id, HOT, ["ep_aaaaaaaa02"]),
            ops.simple("dont_use", record_id),
            ops.simple("use_again", record_id),
            ops.simple("restrict_usage", record_id, restriction={"area": "work"}),
            ops.simple("confirm", record_id),
            ops.simple("reaffirm", record_id, still_true=True),
            ops.forget(record_id),
        ]

    unknown = push(service, phone, *every("rec_bbbbbbbb01")).receipts
    assert {r.code for r in unknown} == {RefusalCode.UNKNOWN_RECORD}
    assert all("rec_bbbbbbbb01" in (r.reason or "") for r in unknown)
    forgotten = push(service, phone, *every("rec_aaaaaaaa01")).receipts
    assert {r.code for r in forgotten} == {RefusalCode.FORGOTTEN}
    others = push(
        service,
        phone,
        ops.infer("rec_aaaaaaaa01", text=HOT, source_episode_ids=["ep_aaaaaaaa02"]),
        ops.artifact("art_aaaaaaaa01", ["rec_bbbbbbbb01"], "x"),
        ops.artifact("art_aaaaaaaa02", ["rec_aaaaaaaa01"], "x"),
        ops.infer("rec_cccccccc01", text=HOT, source_episode_ids=["ep_aaaaaaaa01"]),
    ).receipts
    assert [r.code for r in others] == [
        RefusalCode.FORGOTTEN,
        RefusalCode.UNKNOWN_RECORD,
        RefusalCode.FORGOTTEN,
        RefusalCode.UNKNOWN_EPISODE,  # its episode was forgotten with the record
    ]


# --- the forget cascade ---------------------------------------------------------------------


def test_forget_destroys_everything_derived_and_lists_every_holder(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop, tablet = new_user(service, "alice", "phone", "laptop", "tablet")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", DULUTH)
    applied(
        push(
            service,
            laptop,  # the assistant's derivations, made on the laptop
            ops.episode("ep_aaaaaaaa02", "We talked about winters by the lake."),
            ops.infer(
                "rec_aaaaaaaa02",
                text="Probably grew up near Lake Superior.",
                source_episode_ids=["ep_aaaaaaaa02"],
                derived_from=["rec_aaaaaaaa01"],
            ),
            ops.artifact("art_aaaaaaaa01", ["rec_aaaaaaaa02"], "Summary: a Lake Superior youth."),
            ops.artifact(
                "art_aaaaaaaa02",
                ["rec_aaaaaaaa01"],
                "Text view: Duluth childhood.",
                kind="text_view",
            ),
            ops.simple("dont_use", "rec_aaaaaaaa02", by="assistant"),
        )
    )
    before = feed(service, tablet)  # the tablet now holds everything
    assert before.artifacts["art_aaaaaaaa01"][0] == ["rec_aaaaaaaa02"]
    assert before.artifacts["art_aaaaaaaa02"][1].payload == "Text view: Duluth childhood."
    with service.store.session() as s:
        key_ids = [
            *(
                v.key_id
                for r in ("rec_aaaaaaaa01", "rec_aaaaaaaa02")
                for v in s.versions(phone.space_id, r)
            ),
            *(
                e.key_id
                for e in s.episodes(phone.space_id, ["ep_aaaaaaaa01", "ep_aaaaaaaa02"]).values()
            ),
            *(
                a.key_id
                for a in s.artifacts(phone.space_id, ["art_aaaaaaaa01", "art_aaaaaaaa02"]).values()
            ),
        ]
    assert len(key_ids) == 6
    wrapped = service.key_store.wrapped_keys_for(key_ids)
    raw = key_store_bytes(service.key_store_path)
    assert len(wrapped) == 6 and all(blob in raw for blob in wrapped.values())

    receipt = applied(push(service, phone, ops.forget("rec_aaaaaaaa01"))).receipts[0]
    assert receipt.effect is EffectKind.FORGOTTEN
    assert receipt.affected_records == ["rec_aaaaaaaa01", "rec_aaaaaaaa02"]
    assert receipt_message(receipt) == "Permanently forgotten; it cannot be brought back."

    assert service.key_store.existing(key_ids) == set()
    raw = key_store_bytes(service.key_store_path)
    for key_id, blob in wrapped.items():
        assert blob not in raw, f"wrapped key {key_id} survives in the key store file or WAL"
    for record_id in ("rec_aaaaaaaa01", "rec_aaaaaaaa02"):
        skeleton = _status(service, phone, record_id).model_dump(exclude_none=True)
        assert set(skeleton) == {"protocol_version", "id", "lifecycle_state", "forgotten_at"}
    pending = {
        f.record_id: {d.device_name for d in f.pending}
        for f in service.pending(phone.space_id).forgets
    }
    assert pending == {
        "rec_aaaaaaaa01": {"phone", "laptop", "tablet"},  # laptop: via the artifact it made
        "rec_aaaaaaaa02": {"laptop", "tablet"},
    }
    after = feed(service, tablet)
    events = {e.record_id: e for e in after.destroyed}
    assert events["rec_aaaaaaaa01"].artifact_ids == ["art_aaaaaaaa02"]
    assert events["rec_aaaaaaaa01"].episode_ids == ["ep_aaaaaaaa01"]
    assert events["rec_aaaaaaaa02"].artifact_ids == ["art_aaaaaaaa01"]
    assert events["rec_aaaaaaaa02"].episode_ids == ["ep_aaaaaaaa02"]
    newcomer = enroll(service, service.new_enrollment_code(phone.space_id), "watch")
    fresh = feed(service, newcomer)
    assert fresh.kinds == ["key_destruction", "key_destruction"]
    for value in service.store.audit_blobs():
        data = value.encode() if isinstance(value, str) else value
        assert b"Duluth" not in data and b"Superior" not in data
    with service.store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM derivations")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM subject_index")).scalar_one() == 0
        assert conn.execute(text("SELECT count(*) FROM history_index")).scalar_one() == 0
    # ids stay taken: the forgotten artifact and episode cannot be written back
    for device in (phone, laptop, tablet):
        service.ack(
            device.space_id,
            device.device_id,
            AckRequest(event_ids=[e.event_id for e in after.destroyed]),
        )
    again = push(
        service,
        laptop,
        ops.artifact("art_aaaaaaaa01", ["rec_aaaaaaaa01"], "x"),
        ops.episode("ep_aaaaaaaa02", "We talked about winters by the lake."),
    ).receipts
    assert [r.code for r in again] == [RefusalCode.ARTIFACT_EXISTS, RefusalCode.EPISODE_EXISTS]


def test_the_subject_index_holds_keyed_hashes_not_words(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", ICED)
    with service.store.engine.connect() as conn:
        tokens = [r[0] for r in conn.execute(text("SELECT token FROM subject_index")).all()]
    assert len(tokens) == len(subjects.stored_keys(ICED, None)) > 0
    for token in tokens:
        assert len(token) == 64 and "coffee" not in token and ":" not in token
    for value in service.store.audit_blobs():
        if isinstance(value, str):
            assert "coffee" not in value


# --- mass forgets and strong authentication -----------------------------------------------


def _account(service: CloudService, device: Device) -> SigningKey:
    key = strongauth.account_signing_key(PASSPHRASE, device.space_id)
    service.register_account_key(
        device.space_id, device.device_id, AccountKeyRequest(account_key=bytes(key.verify_key))
    )
    return key


def test_the_account_key_is_registered_once(service: CloudService) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    key = _account(service, phone)
    same = service.register_account_key(
        laptop.space_id, laptop.device_id, AccountKeyRequest(account_key=bytes(key.verify_key))
    )
    assert same.account_key == bytes(key.verify_key)
    other = strongauth.account_signing_key("not our passphrase", phone.space_id)
    with pytest.raises(AccountKeyMismatch, match=phone.space_id):
        service.register_account_key(
            laptop.space_id,
            laptop.device_id,
            AccountKeyRequest(account_key=bytes(other.verify_key)),
        )
    code = service.new_enrollment_code(phone.space_id)
    response = service.enroll(
        EnrollRequest(
            code=code, device_name="tablet", public_key=bytes(PrivateKey.generate().public_key)
        )
    )
    assert response.account_key == bytes(key.verify_key)


def test_forget_area_needs_the_user_and_strong_authentication(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _said(
        service,
        ops,
        phone,
        "rec_aaaaaaaa01",
        "ep_aaaaaaaa01",
        "I work at the harbour office.",
        life_areas=["work"],
    )
    _said(
        service,
        ops,
        phone,
        "rec_aaaaaaaa02",
        "ep_aaaaaaaa02",
        DULUTH,
        life_areas=["general", "home"],
    )
    no_key = push(service, phone, ops.forget_area("work", b"\x00" * 64)).receipts[0]
    assert no_key.code is RefusalCode.STRONG_AUTH_REQUIRED
    key = _account(service, phone)

    def proof_for(op: dict[str, object], area: str | None) -> dict[str, object]:
        signed = strongauth.prove(key, phone.space_id, str(op["op_id"]), area)
        return {**op, "proof": base64.b64encode(signed).decode()}

    by_assistant = proof_for(ops.forget_area("work", b"", by="assistant"), "work")
    wrong_area = proof_for(ops.forget_area("work", b""), "health")
    good = proof_for(ops.forget_area("work", b""), "work")
    receipts = push(service, phone, by_assistant, wrong_area, good).receipts
    assert receipts[0].code is RefusalCode.NOT_ALLOWED
    assert "assistant" in (receipts[0].reason or "")
    assert receipts[1].code is RefusalCode.STRONG_AUTH_REQUIRED
    assert receipts[2].effect is EffectKind.FORGOTTEN
    assert receipts[2].affected_records == ["rec_aaaaaaaa01"] and receipts[2].record_id is None
    assert _status(service, phone, "rec_aaaaaaaa01").lifecycle_state is LifecycleState.FORGOTTEN
    assert _status(service, phone, "rec_aaaaaaaa02").lifecycle_state is LifecycleState.ACTIVE
    seen = feed(service, laptop)
    assert set(seen.episodes) == {"ep_aaaaaaaa02"}  # the work episode went with its record
    assert [e.record_id for e in seen.destroyed] == ["rec_aaaaaaaa01"]


def test_forget_all_destroys_every_record_and_every_episode(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", DULUTH, life_areas=["home"])
    _said(service, ops, phone, "rec_aaaaaaaa02", "ep_aaaaaaaa02", BERLIN, life_areas=["travel"])
    applied(push(service, phone, ops.episode("ep_aaaaaaaa03", "Nothing worth keeping here.")))
    key = _account(service, phone)
    op = ops.forget_area(None, b"")
    op["proof"] = base64.b64encode(
        strongauth.prove(key, phone.space_id, op["op_id"], None)
    ).decode()
    receipt = applied(push(service, phone, op)).receipts[0]
    assert receipt.affected_records == ["rec_aaaaaaaa01", "rec_aaaaaaaa02"]
    seen = feed(service, laptop)
    assert seen.episodes == {} and seen.versions == {}
    destroyed = {e for ev in seen.destroyed for e in ev.episode_ids}
    assert destroyed == {"ep_aaaaaaaa01", "ep_aaaaaaaa02", "ep_aaaaaaaa03"}
    with service.store.session() as s:
        keys = [e.key_id for e in s.episodes(phone.space_id, destroyed).values()]
    assert service.key_store.existing(keys) == set()


def test_forget_all_with_no_record_destroys_the_episodes_and_tells_their_holders(
    service: CloudService, ops: Ops
) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    applied(push(service, phone, ops.episode("ep_aaaaaaaa01", "Just chatting.")))
    key = _account(service, phone)
    op = ops.forget_area(None, b"")
    op["proof"] = base64.b64encode(
        strongauth.prove(key, phone.space_id, op["op_id"], None)
    ).decode()
    assert applied(push(service, phone, op)).receipts[0].affected_records == []
    with service.store.session() as s:
        keys = [e.key_id for e in s.episodes(phone.space_id, ["ep_aaaaaaaa01"]).values()]
    assert service.key_store.existing(keys) == set()
    # nothing readable is sent; the event names no record, only the episode
    assert feed(service, laptop).kinds == ["key_destruction"]
    (event,) = [c for c in pull_all(service, laptop) if isinstance(c, KeyDestruction)]
    assert event.record_id is None and event.episode_ids == ["ep_aaaaaaaa01"]
    (status,) = service.pending(phone.space_id).forgets
    assert status.record_id is None
    assert [d.device_id for d in status.pending] == [phone.device_id]  # it pushed the episode


# --- projects and usage restrictions ---------------------------------------------------------


def test_projects_open_close_and_restrict_usage(service: CloudService, ops: Ops) -> None:
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", DULUTH)
    receipts = push(
        service,
        phone,
        ops.project("renovation", open=False),
        ops.simple("restrict_usage", "rec_aaaaaaaa01", restriction={"project": "renovation"}),
        ops.project("renovation"),
        ops.simple("restrict_usage", "rec_aaaaaaaa01", restriction={"project": "renovation"}),
        ops.project("renovation", open=False),
        ops.project("renovation"),
        ops.project("thesis"),
        ops.project("thesis", open=False),
    ).receipts
    assert receipts[0].code is RefusalCode.UNKNOWN_PROJECT
    assert receipts[1].code is RefusalCode.UNKNOWN_PROJECT and "renovation" in (
        receipts[1].reason or ""
    )
    assert [r.effect for r in receipts[2:]] == [
        EffectKind.PROJECT_OPENED,
        EffectKind.USAGE_RESTRICTED,
        EffectKind.PROJECT_CLOSED,
        EffectKind.PROJECT_OPENED,
        EffectKind.PROJECT_OPENED,
        EffectKind.PROJECT_CLOSED,
    ]
    status = _status(service, phone, "rec_aaaaaaaa01")
    assert status.usage_restriction == UsageRestriction(project="renovation")
    seen = feed(service, laptop)
    assert seen.projects == {"renovation": True, "thesis": False}
    assert seen.kinds.count("project") == 2  # the latest state of each, once
    assert seen.states["rec_aaaaaaaa01"].usage_restriction == UsageRestriction(project="renovation")
    lifted = applied(
        push(service, phone, ops.simple("restrict_usage", "rec_aaaaaaaa01", restriction=None))
    ).receipts[0]
    assert lifted.effect is EffectKind.USAGE_UNRESTRICTED
    assert _status(service, phone, "rec_aaaaaaaa01").usage_restriction is None
    in_project = push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa02", "The tiles arrive on Monday."),
        ops.remember(
            "rec_aaaaaaaa02", "The tiles arrive on Monday.", ["ep_aaaaaaaa02"], project="kitchen"
        ),
        ops.remember(
            "rec_aaaaaaaa03",
            "The tiles arrive on Monday.",
            ["ep_aaaaaaaa02"],
            project="renovation",
            life_areas=[LifeArea.HOME.value],
        ),
    ).receipts
    assert in_project[1].code is RefusalCode.UNKNOWN_PROJECT
    assert in_project[2].effect is EffectKind.CREATED


# --- time ----------------------------------------------------------------------------------


def test_as_of_reads_what_memory_said_at_a_time(
    service: CloudService, ops: Ops, clock: FakeClock
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    start = clock.now
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", ICED)
    clock.advance(timedelta(hours=1))
    applied(
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa02", HOT),
            ops.correct("rec_aaaaaaaa01", HOT, ["ep_aaaaaaaa02"]),
        )
    )
    clock.advance(timedelta(hours=1))
    applied(push(service, phone, ops.simple("dont_use", "rec_aaaaaaaa01")))

    def at(delta: timedelta) -> tuple[int | None, LifecycleState | None]:
        answer = service.as_of(phone.space_id, "rec_aaaaaaaa01", start + delta)
        assert "text" not in answer.model_dump()
        return answer.version, answer.lifecycle_state

    assert at(timedelta(minutes=-1)) == (None, None)
    assert at(timedelta(minutes=30)) == (1, LifecycleState.ACTIVE)
    assert at(timedelta(minutes=90)) == (2, LifecycleState.ACTIVE)
    assert at(timedelta(hours=3)) == (2, LifecycleState.NOT_IN_USE)
    with pytest.raises(NotFound, match="rec_bbbbbbbb01"):
        service.as_of(phone.space_id, "rec_bbbbbbbb01", start)


def test_a_revoked_device_cannot_clear_pending_by_its_word(service: CloudService, ops: Ops) -> None:
    """Issue 22, item 4: a stolen phone is revoked before it could shred a forgotten
    record. Its credential still confirms a wipe (200), but that is only its word: it
    stays on the record's pending list, and the devices list says it is revoked (the
    pair reads "revoked, may still hold copies"). A device that acknowledged the key
    destruction itself leaves the list as before."""
    phone, laptop = new_user(service, "alice", "phone", "laptop")
    _said(service, ops, phone, "rec_aaaaaaaa01", "ep_aaaaaaaa01", DULUTH)
    feed(service, laptop)  # the laptop now holds the record
    applied(push(service, phone, ops.forget("rec_aaaaaaaa01")))

    def pending() -> set[str]:
        (status,) = service.pending(phone.space_id).forgets
        return {d.device_name for d in status.pending}

    assert pending() == {"phone", "laptop"}
    service.revoke_device(laptop.space_id, laptop.device_id)
    wiped = service.confirm_wipe(laptop.credential)  # the thief's "I wiped"
    assert wiped.device_id == laptop.device_id
    assert "laptop" in pending()
    (listed,) = [d for d in service.devices(phone.space_id).devices if d.name == "laptop"]
    assert listed.revoked_at is not None and listed.wiped_at is not None
    from protocol.messages import AckRequest

    with service.store.session(phone.space_id) as s:
        unacked = s.unacked_events(phone.space_id, phone.device_id)
    service.ack(phone.space_id, phone.device_id, AckRequest(event_ids=unacked))  # shredded
    assert pending() == {"laptop"}
