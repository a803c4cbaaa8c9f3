"""A pure, in-memory reference of how a space applies operations.

Invariants: an op id is applied at most once (a replay gets ``duplicate`` with the
original status and changes nothing); every decision comes from ``rules.decide``;
a forgotten record's content, its source episodes and everything derived from it are
dropped from the ledger, exactly what key destruction does to a real store; their ids
stay taken (a real store keeps the id row, only the key is gone), so re-adding a
forgotten episode or artifact id is refused as existing.
Tests and the simulator compare real stores against this model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import assert_never

from protocol.model import LifecycleState, RecordContent, UsageRestriction
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    ForgetArea,
    MarkCandidate,
    Receipt,
    SetProject,
)
from protocol.receipts import duplicate_of, receipt_for
from protocol.rules import (
    Accept,
    AddVersion,
    CreateArtifact,
    CreateCandidate,
    CreateEpisode,
    CreateRecord,
    DerivedItem,
    Effect,
    EndConversation,
    EpisodeFacts,
    Facts,
    FlagConflict,
    FlagSuperseded,
    ForgetRecords,
    RecordFacts,
    ResolveCandidates,
    SetLifecycle,
    SetProjectState,
    SetUsage,
    decide,
    episodes_named,
    parents_named,
)


@dataclass
class LedgerRecord:
    lifecycle: LifecycleState
    versions: dict[int, RecordContent]
    usage: UsageRestriction | None = None
    superseded_by: str | None = None
    conflicts: set[str] = field(default_factory=set)

    @property
    def version(self) -> int:
        return max(self.versions) if self.versions else 0

    @property
    def content(self) -> RecordContent | None:
        return self.versions.get(self.version)


@dataclass
class Ledger:
    space_id: str = "sp_ledger0000"
    account_key: bytes | None = None
    records: dict[str, LedgerRecord] = field(default_factory=dict)
    episodes: dict[str, EpisodeFacts] = field(default_factory=dict)
    artifacts: dict[str, tuple[tuple[str, ...], str]] = field(default_factory=dict)
    projects: dict[str, bool] = field(default_factory=dict)
    receipts: dict[str, Receipt] = field(default_factory=dict)
    forgotten_episodes: set[str] = field(default_factory=set)
    forgotten_artifacts: set[str] = field(default_factory=set)
    # (episode, sentence) -> the record it was consolidated into (None: waiting)
    candidates: dict[tuple[str, int], str | None] = field(default_factory=dict)
    ended_conversations: set[str] = field(default_factory=set)

    def facts(self, record_id: str) -> RecordFacts | None:
        record = self.records.get(record_id)
        if record is None:
            return None
        return RecordFacts(record_id, record.lifecycle, record.version, record.content)

    def readable_texts(self) -> set[str]:
        """Every text a holder of this ledger could still read."""
        texts = {c.text for r in self.records.values() for c in r.versions.values()}
        texts |= {payload for _parents, payload in self.artifacts.values()}
        return texts | {e.text for e in self.episodes.values()}

    def state(self) -> tuple[object, ...]:
        """Everything but receipts, for comparing two ledgers."""
        return (self.records, self.episodes, self.artifacts, self.projects)

    def children(self) -> dict[str, list[DerivedItem]]:
        edges: dict[str, list[DerivedItem]] = {}
        for record_id, record in self.records.items():
            for content in record.versions.values():
                for parent in content.derived_from:
                    edges.setdefault(parent, []).append(DerivedItem("record", record_id))
        for artifact_id, (parents, _payload) in self.artifacts.items():
            for parent in parents:
                edges.setdefault(parent, []).append(DerivedItem("artifact", artifact_id))
        return edges


def facts_for(ledger: Ledger, op: AnyOperation) -> Facts:
    record_id = getattr(op, "record_id", None)
    current = ledger.facts(record_id) if record_id else None
    episode_ids = episodes_named(op, current.content if current else None)
    parents = parents_named(op)
    related = [
        f for rid in ledger.records if rid != record_id and (f := ledger.facts(rid)) is not None
    ]
    area_records: list[str] = []
    if isinstance(op, ForgetArea):
        area_records = [
            rid
            for rid, r in ledger.records.items()
            if r.lifecycle is not LifecycleState.FORGOTTEN
            and r.content is not None
            and (op.area is None or op.area in r.content.life_areas)
        ]
    known = {p: f for p in parents if (f := ledger.facts(p)) is not None}
    episodes = {e: ledger.episodes[e] for e in episode_ids if e in ledger.episodes}
    if isinstance(op, AddEpisode) and op.episode_id in ledger.forgotten_episodes:
        # the id is taken; its content is gone (``decide`` only asks whether it exists)
        episodes[op.episode_id] = EpisodeFacts(op.episode_id, "", "")
    artifact_exists = isinstance(op, AddArtifact) and (
        op.artifact_id in ledger.artifacts or op.artifact_id in ledger.forgotten_artifacts
    )
    return Facts(
        space_id=ledger.space_id,
        record=current,
        episodes=episodes,
        related=related,
        children=ledger.children(),
        area_records=area_records,
        known_records=known,
        projects=dict(ledger.projects),
        artifact_exists=artifact_exists,
        account_key=ledger.account_key,
        candidate_marked=isinstance(op, MarkCandidate)
        and (op.episode_id, op.sentence) in ledger.candidates,
    )


def step(ledger: Ledger, op: AnyOperation, index: int, at: datetime) -> tuple[Ledger, Receipt]:
    """Apply one op in place; return the ledger and the op's receipt."""
    first = ledger.receipts.get(op.op_id)
    if first is not None:
        return ledger, duplicate_of(first, index)
    decision = decide(op, facts_for(ledger, op))
    if isinstance(decision, Accept):
        for effect in decision.effects:
            _perform(ledger, op, effect)
    receipt = receipt_for(index, op, decision, at)
    ledger.receipts[op.op_id] = receipt
    return ledger, receipt


def _perform(ledger: Ledger, op: AnyOperation, effect: Effect) -> None:
    match effect:
        case CreateEpisode():
            assert isinstance(op, AddEpisode)
            ledger.episodes[op.episode_id] = EpisodeFacts(
                op.episode_id,
                op.conversation_id,
                op.text,
                op.typed_at,
                op.source_kind,
                op.source_id,
            )
        case CreateRecord():
            ledger.records[effect.record_id] = LedgerRecord(
                effect.lifecycle_state, {effect.version: effect.content}
            )
        case AddVersion():
            record = ledger.records[effect.record_id]
            record.versions[effect.version] = effect.content
            record.lifecycle = effect.lifecycle_state
        case SetLifecycle():
            ledger.records[effect.record_id].lifecycle = effect.lifecycle_state
        case SetUsage():
            ledger.records[effect.record_id].usage = effect.restriction
        case FlagSuperseded():
            ledger.records[effect.record_id].superseded_by = effect.by_record
        case FlagConflict():
            ledger.records[effect.record_id].conflicts.add(effect.other_record)
        case CreateArtifact():
            assert isinstance(op, AddArtifact)
            ledger.artifacts[effect.artifact_id] = (effect.derived_from, op.payload)
        case SetProjectState():
            assert isinstance(op, SetProject)
            ledger.projects[effect.project] = effect.open
        case CreateCandidate():
            ledger.candidates[(effect.episode_id, effect.sentence)] = None
        case EndConversation():
            ledger.ended_conversations.add(effect.conversation_id)
        case ResolveCandidates():
            for ref in effect.candidates:
                if (ref.episode_id, ref.sentence) in ledger.candidates:
                    ledger.candidates[(ref.episode_id, ref.sentence)] = effect.record_id
        case ForgetRecords():
            _forget(ledger, effect)
        case _:
            assert_never(effect)


def _forget(ledger: Ledger, effect: ForgetRecords) -> None:
    gone_episodes: set[str] = set(ledger.episodes) if effect.all_episodes else set()
    gone_episodes.update(effect.episode_ids)
    for record_id in effect.record_ids:
        record = ledger.records.get(record_id)
        if record is None:
            continue
        for content in record.versions.values():
            gone_episodes.update(content.source_episode_ids)
        ledger.records[record_id] = LedgerRecord(LifecycleState.FORGOTTEN, {})
    for artifact_id in effect.artifact_ids:
        ledger.artifacts.pop(artifact_id, None)
        ledger.forgotten_artifacts.add(artifact_id)
    for episode_id in gone_episodes:
        if ledger.episodes.pop(episode_id, None) is not None:
            ledger.forgotten_episodes.add(episode_id)
    for key in [k for k in ledger.candidates if k[0] in gone_episodes]:
        del ledger.candidates[key]
