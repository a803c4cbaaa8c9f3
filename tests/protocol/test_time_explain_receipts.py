"""Timeline, "how do you know this?", receipt messages and strong authentication."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from protocol import strongauth
from protocol.confidence import ConfidenceClass
from protocol.explain import explain
from protocol.model import (
    Alternative,
    ContentType,
    EpistemicState,
    Evidence,
    LifecycleState,
    Observation,
    RecordContent,
    SourceKind,
    TimeKind,
)
from protocol.operations import EffectKind, Receipt, ReceiptStatus
from protocol.receipts import receipt_message
from protocol.timeline import (
    StateChange,
    VersionTime,
    effective_time_kind,
    is_stale,
    lifecycle_as_of,
    priority,
    question_due,
    version_as_of,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _content(**kw: object) -> RecordContent:
    fields: dict[str, object] = {
        "text": "I am vegetarian for now.",
        "source_episode_ids": ["ep_0000000001"],
    }
    fields.update(kw)
    return RecordContent(**fields)  # type: ignore[arg-type]


def test_future_events_become_past_once_their_date_passes() -> None:
    event = _content(time_kind=TimeKind.ONE_OFF, valid_from=T0 + timedelta(days=3))
    assert effective_time_kind(event, T0) is TimeKind.ONE_OFF
    assert effective_time_kind(event, T0 + timedelta(days=4)) is TimeKind.PAST


def test_for_now_asks_then_goes_stale_but_only_drops_priority() -> None:
    record = _content(time_kind=TimeKind.FOR_NOW, expected_end=T0 + timedelta(days=30))
    assert not question_due(record, T0, T0 + timedelta(days=29))
    assert question_due(record, T0, T0 + timedelta(days=30))
    assert not is_stale(record, T0, T0 + timedelta(days=43))
    assert is_stale(record, T0, T0 + timedelta(days=44))
    fresh = priority(record, T0, T0 + timedelta(days=1))
    stale = priority(record, T0, T0 + timedelta(days=60))
    assert 0 < stale < fresh <= 1


@given(st.integers(0, 100_000), st.integers(0, 100_000))
def test_only_records_whose_time_has_passed_decay_and_never_to_zero(a: int, b: int) -> None:
    """Issue 20: a permanent fact does not age (a five-month-old fact is worth a new one);
    a past event decays with age, never to zero."""
    younger, older = sorted((a, b))
    fact = _content(text="My blood type is O negative.", time_kind=TimeKind.PERMANENT)
    assert priority(fact, T0, T0 + timedelta(days=older)) == 1.0
    event = _content(text="I broke my wrist skiing.", time_kind=TimeKind.PAST)
    young = priority(event, T0, T0 + timedelta(days=younger))
    old = priority(event, T0, T0 + timedelta(days=older))
    assert 0 < old <= young <= 1
    if older - younger >= 365 and younger < 365:
        assert old < young


def test_as_of_reads() -> None:
    versions = [VersionTime(1, T0), VersionTime(2, T0 + timedelta(days=10))]
    assert version_as_of(versions, T0 - timedelta(seconds=1)) is None
    assert version_as_of(versions, T0 + timedelta(days=5)) == 1
    assert version_as_of(versions, T0 + timedelta(days=10)) == 2
    changes = [
        StateChange(T0, LifecycleState.ACTIVE),
        StateChange(T0 + timedelta(days=2), LifecycleState.NOT_IN_USE),
    ]
    assert lifecycle_as_of(changes, T0 + timedelta(days=1)) is LifecycleState.ACTIVE
    assert lifecycle_as_of(changes, T0 + timedelta(days=3)) is LifecycleState.NOT_IN_USE


def test_explain_quotes_what_was_said_and_never_an_inference() -> None:
    said = _content(text="I grew up in Duluth.")
    line = explain(
        said, ConfidenceClass.YOU_TOLD_ME, {"ep_0000000001": (T0, "Hi. I grew up in Duluth.")}
    )
    assert 'on 2026-01-01 you wrote: "Hi. I grew up in Duluth."' in line
    inferred = _content(
        text="Prefers an americano in the morning",
        content_type=ContentType.PREFERENCE,
        epistemic_state=EpistemicState.INFERRED,
        source_kind=SourceKind.USER_BEHAVIOUR,
        evidence=Evidence(
            observations=[
                Observation(
                    source_id=f"o{i}", source_kind=SourceKind.USER_BEHAVIOUR, at=T0, supports=i < 14
                )
                for i in range(17)
            ]
        ),
        alternatives=[
            Alternative(text="Buys it for a colleague", content_type=ContentType.ROUTINE)
        ],
    )
    text = explain(
        inferred, ConfidenceClass.I_THINK_SO, {"ep_0000000001": (T0, "An americano please.")}
    )
    assert "14 of 17" in text and "not something you said" in text
    assert "you wrote" not in text and "Buys it for a colleague" in text
    gone = explain(said, ConfidenceClass.YOU_TOLD_ME, {"ep_0000000001": None})
    assert "forgotten" in gone and "Duluth" not in gone


def test_receipt_messages_come_from_the_receipt_alone() -> None:
    corrected = Receipt(
        index=0,
        op_id="op_0000000001",
        status=ReceiptStatus.APPLIED,
        effect=EffectKind.CORRECTED,
        versions=[1, 2],
    )
    assert receipt_message(corrected) == (
        "Your correction was committed; the previous version is no longer active."
    )
    replay = corrected.model_copy(
        update={"status": ReceiptStatus.DUPLICATE, "original_status": ReceiptStatus.APPLIED}
    )
    assert receipt_message(replay) == receipt_message(corrected)
    forgotten = corrected.model_copy(update={"effect": EffectKind.FORGOTTEN})
    assert receipt_message(forgotten) == "Permanently forgotten; it cannot be brought back."


def test_strong_auth_proofs_bind_space_op_and_area() -> None:
    key = strongauth.account_signing_key("correct horse", "sp_aaaaaaaa01")
    public = bytes(key.verify_key)
    proof = strongauth.prove(key, "sp_aaaaaaaa01", "op_0000000001", "work")
    assert strongauth.verify(public, proof, "sp_aaaaaaaa01", "op_0000000001", "work")
    assert not strongauth.verify(public, proof, "sp_aaaaaaaa01", "op_0000000002", "work")
    assert not strongauth.verify(public, proof, "sp_aaaaaaaa01", "op_0000000001", None)
    assert not strongauth.verify(public, proof, "sp_bbbbbbbb01", "op_0000000001", "work")
    assert not strongauth.verify(public, b"\x00" * 64, "sp_aaaaaaaa01", "op_0000000001", "work")
    other = strongauth.account_verify_key("wrong horse", "sp_aaaaaaaa01")
    assert other != public
    assert strongauth.account_verify_key("correct horse", "sp_aaaaaaaa01") == public
