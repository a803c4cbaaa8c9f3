"""A pure, in-memory reference of how a space applies operations.

Invariants: an op id is applied at most once (a replay gets ``duplicate`` with the
original status and changes nothing); every decision comes from ``rules.decide``.
Tests and the simulator compare real stores against this model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from protocol.model import LifecycleState
from protocol.operations import (
    AddEpisode,
    ForgetPermanently,
    Receipt,
    ReceiptStatus,
    Remember,
)
from protocol.rules import (
    Accept,
    AnyOperation,
    CreateEpisode,
    CreateRecord,
    EpisodeFacts,
    Facts,
    ForgetRecord,
    RecordFacts,
    decide,
)


@dataclass(frozen=True)
class Ledger:
    records: dict[str, RecordFacts] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    episodes: dict[str, EpisodeFacts] = field(default_factory=dict)
    receipts: dict[str, Receipt] = field(default_factory=dict)

    def readable_texts(self) -> set[str]:
        """Every text a holder of this ledger could still read."""
        return set(self.texts.values()) | {e.text for e in self.episodes.values()}


def facts_for(ledger: Ledger, op: AnyOperation) -> Facts:
    if isinstance(op, AddEpisode):
        known = (
            {op.episode_id: ledger.episodes[op.episode_id]}
            if op.episode_id in ledger.episodes
            else {}
        )
        return Facts(episodes=known)
    record = ledger.records.get(op.record_id)
    if isinstance(op, Remember):
        episodes = {e: ledger.episodes[e] for e in op.source_episode_ids if e in ledger.episodes}
        return Facts(record=record, episodes=episodes)
    return Facts(record=record)


def step(ledger: Ledger, op: AnyOperation, index: int, at: datetime) -> tuple[Ledger, Receipt]:
    """Apply one op; return the new ledger and the op's receipt."""
    first = ledger.receipts.get(op.op_id)
    if first is not None:
        duplicate = first.model_copy(
            update={
                "index": index,
                "status": ReceiptStatus.DUPLICATE,
                "original_status": first.status,
            }
        )
        return ledger, duplicate
    decision = decide(op, facts_for(ledger, op))
    record_id = None if isinstance(op, AddEpisode) else op.record_id
    if not isinstance(decision, Accept):
        receipt = Receipt(
            index=index,
            op_id=op.op_id,
            status=ReceiptStatus.REFUSED,
            code=decision.code,
            reason=decision.reason,
            record_id=record_id,
        )
        return replace(ledger, receipts={**ledger.receipts, op.op_id: receipt}), receipt
    ledger = _perform(ledger, op, decision)
    receipt = Receipt(
        index=index,
        op_id=op.op_id,
        status=ReceiptStatus.APPLIED,
        record_id=record_id,
        applied_at=at,
    )
    return replace(ledger, receipts={**ledger.receipts, op.op_id: receipt}), receipt


def _perform(ledger: Ledger, op: AnyOperation, decision: Accept) -> Ledger:
    effect = decision.effect
    if isinstance(effect, CreateEpisode):
        assert isinstance(op, AddEpisode)
        facts = EpisodeFacts(op.episode_id, op.conversation_id, op.text)
        return replace(ledger, episodes={**ledger.episodes, op.episode_id: facts})
    if isinstance(effect, CreateRecord):
        assert isinstance(op, Remember)
        created = RecordFacts(effect.record_id, effect.lifecycle_state, effect.version)
        return replace(
            ledger,
            records={**ledger.records, effect.record_id: created},
            texts={**ledger.texts, effect.record_id: op.text},
            sources={**ledger.sources, effect.record_id: tuple(op.source_episode_ids)},
        )
    assert isinstance(effect, ForgetRecord) and isinstance(op, ForgetPermanently)
    gone = set(ledger.sources.get(effect.record_id, ()))
    old = ledger.records[effect.record_id]
    return replace(
        ledger,
        records={
            **ledger.records,
            effect.record_id: RecordFacts(old.record_id, LifecycleState.FORGOTTEN, old.version),
        },
        texts={k: v for k, v in ledger.texts.items() if k != effect.record_id},
        episodes={k: v for k, v in ledger.episodes.items() if k not in gone},
    )
