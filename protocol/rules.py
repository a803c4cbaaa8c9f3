"""The transition rules: one pure function both device and cloud apply.

Invariants:
- A permanently forgotten record accepts no operation; nothing can write it back.
- A record is created once; its source episodes must exist, belong to the same
  conversation, and its text must be a whole sentence of them (see ``sentences``).
- ``decide`` only reads the facts it is handed and returns the effect as data; the
  caller's store performs it. Idempotency by op id is the caller's job (receipts).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol.model import EpistemicState, LifecycleState
from protocol.operations import AddEpisode, ForgetPermanently, RefusalCode, Remember
from protocol.sentences import check_said


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """What the store knows about one record when an operation arrives."""

    record_id: str
    lifecycle: LifecycleState
    version: int


@dataclass(frozen=True, slots=True)
class EpisodeFacts:
    episode_id: str
    conversation_id: str
    text: str


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything ``decide`` may look at, gathered by the caller from its store.

    ``record`` is the current state of the record the op names (or None);
    ``episodes`` maps each episode id the op names to its facts, when it exists.
    """

    record: RecordFacts | None = None
    episodes: Mapping[str, EpisodeFacts] | None = None


@dataclass(frozen=True, slots=True)
class CreateEpisode:
    episode_id: str
    conversation_id: str


@dataclass(frozen=True, slots=True)
class CreateRecord:
    record_id: str
    version: int
    epistemic_state: EpistemicState
    lifecycle_state: LifecycleState


@dataclass(frozen=True, slots=True)
class ForgetRecord:
    """Destroy the keys of every version of the record and of all its source episodes.

    A source episode holds the forgotten words themselves, so it goes too, even when
    another record also cites it (that record keeps its own sealed text).
    """

    record_id: str


Effect = CreateEpisode | CreateRecord | ForgetRecord


@dataclass(frozen=True, slots=True)
class Accept:
    effect: Effect


@dataclass(frozen=True, slots=True)
class Refuse:
    code: RefusalCode
    reason: str


Decision = Accept | Refuse

AnyOperation = AddEpisode | Remember | ForgetPermanently


def decide(op: AnyOperation, facts: Facts) -> Decision:
    """Decide what ``op`` does given ``facts``; never raises for a well-formed op."""
    if isinstance(op, AddEpisode):
        return _add_episode(op, facts)
    if isinstance(op, Remember):
        return _remember(op, facts)
    return _forget(op, facts)


def _add_episode(op: AddEpisode, facts: Facts) -> Decision:
    if facts.episodes and op.episode_id in facts.episodes:
        return Refuse(
            RefusalCode.EPISODE_EXISTS,
            f"episode {op.episode_id} already exists; an episode is written once",
        )
    return Accept(CreateEpisode(op.episode_id, op.conversation_id))


def _refuse_forgotten(record_id: str) -> Refuse:
    return Refuse(
        RefusalCode.FORGOTTEN,
        f"record {record_id} was permanently forgotten; it cannot be changed or brought back",
    )


def _remember(op: Remember, facts: Facts) -> Decision:
    if facts.record is not None:
        if facts.record.lifecycle is LifecycleState.FORGOTTEN:
            return _refuse_forgotten(op.record_id)
        return Refuse(
            RefusalCode.RECORD_EXISTS,
            f"record {op.record_id} already exists (v{facts.record.version}); "
            "a new record needs a new id",
        )
    known = facts.episodes or {}
    missing = [e for e in op.source_episode_ids if e not in known]
    if missing:
        return Refuse(
            RefusalCode.UNKNOWN_EPISODE,
            f"record {op.record_id} names episode(s) {', '.join(missing)} that this space "
            "does not hold (or whose content was forgotten)",
        )
    elsewhere = [e for e in op.source_episode_ids if known[e].conversation_id != op.conversation_id]
    if elsewhere:
        return Refuse(
            RefusalCode.WRONG_CONVERSATION,
            f"record {op.record_id}: episode(s) {', '.join(elsewhere)} belong to another "
            f"conversation than {op.conversation_id}",
        )
    check = check_said(op.text, (known[e].text for e in op.source_episode_ids))
    if not check.ok:
        return Refuse(RefusalCode.NOT_SAID, f"record {op.record_id} refused: {check.reason}")
    return Accept(
        CreateRecord(
            record_id=op.record_id,
            version=1,
            epistemic_state=EpistemicState.SAID,
            lifecycle_state=LifecycleState.ACTIVE,
        )
    )


def _forget(op: ForgetPermanently, facts: Facts) -> Decision:
    if facts.record is None:
        return Refuse(
            RefusalCode.UNKNOWN_RECORD, f"record {op.record_id} does not exist in this space"
        )
    if facts.record.lifecycle is LifecycleState.FORGOTTEN:
        return _refuse_forgotten(op.record_id)
    return Accept(ForgetRecord(op.record_id))
