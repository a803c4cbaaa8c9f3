"""Performing the effects ``protocol.rules.decide`` returns, on this device's store.

Invariants:
- Each effect does locally what ``protocol.ledger._perform`` does to the reference:
  a new record or version is sealed under a fresh data key and INSERTed (never an
  overwrite); lifecycle, usage, flags and projects are metadata; a forget shreds the
  whole closure through ``device.shred``.
- Every lifecycle or version change appends to the record's state history.
- Derived rows (search indexes, subject index, derivation edges) are written with the
  content they come from, in the same transaction.
- A queued op never carries text: ``queue_fields`` strips it, and the push re-reads it
  from the sealed row (see ``device.sync``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, assert_never

from device import accounting, candidates, catalog, keys, search, shred, store
from device.db import Database
from device.sync_state import SyncState
from protocol.messages import EpisodeContent
from protocol.model import ArtifactContent, RecordContent
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    Consolidate,
    Correct,
    Corroborate,
    Infer,
    MarkCandidate,
    Remember,
    ReviseRule,
)
from protocol.rules import (
    AddVersion,
    CreateArtifact,
    CreateCandidate,
    CreateEpisode,
    CreateRecord,
    Effect,
    EndConversation,
    FlagConflict,
    FlagSuperseded,
    ForgetRecords,
    ResolveCandidates,
    SetLifecycle,
    SetProjectState,
    SetUsage,
)


@dataclass(frozen=True, slots=True)
class Context:
    db: Database
    random_bytes: Callable[[int], bytes]
    now: datetime
    space: str

    @property
    def at(self) -> str:
        return self.now.isoformat()


def _seal(ctx: Context, kind: str, item_id: str, version: int, plain: bytes) -> keys.SealedItem:
    sealed = keys.seal_new(ctx.random_bytes, ctx.space, kind, item_id, version, plain)
    store.put_key(ctx.db, sealed.key_id, sealed.dek, "local")
    return sealed


def write_version(
    ctx: Context,
    record_id: str,
    version: int,
    supersedes: int | None,
    content: RecordContent,
    *,
    sealed: keys.SealedItem | None = None,
    recorded_at: str | None = None,
    bound_space: str | None = None,
) -> None:
    """INSERT one version and the rows derived from it (words, subject, derivations)."""
    item = sealed or _seal(ctx, "record", record_id, version, content.model_dump_json().encode())
    store.insert_version(
        ctx.db,
        record_id=record_id,
        version=version,
        supersedes=supersedes,
        epistemic_state=content.epistemic_state.value,
        recorded_at=recorded_at or ctx.at,
        bound_space=bound_space or ctx.space,
        key_id=item.key_id,
        sealed=item.sealed,
    )
    catalog.add_derivations(ctx.db, "record", record_id, content.derived_from)


def _create_record(ctx: Context, effect: CreateRecord) -> None:
    store.insert_record(
        ctx.db,
        record_id=effect.record_id,
        lifecycle=effect.lifecycle_state.value,
        current_version=effect.version,
        sync_state=SyncState.PENDING,
    )
    write_version(ctx, effect.record_id, effect.version, None, effect.content)
    search.index(ctx.db, [(effect.record_id, effect.version, effect.content)])
    catalog.index_subject(ctx.db, effect.record_id, effect.content)
    catalog.log_event(
        ctx.db, effect.record_id, ctx.at, effect.lifecycle_state.value, effect.version
    )


def _add_version(ctx: Context, effect: AddVersion) -> None:
    write_version(ctx, effect.record_id, effect.version, effect.supersedes, effect.content)
    store.set_current_version(ctx.db, effect.record_id, effect.version)
    store.set_record_state(ctx.db, effect.record_id, lifecycle=effect.lifecycle_state.value)
    search.index(ctx.db, [(effect.record_id, effect.version, effect.content)])
    catalog.index_subject(ctx.db, effect.record_id, effect.content)
    catalog.log_event(
        ctx.db, effect.record_id, ctx.at, effect.lifecycle_state.value, effect.version
    )


def _set_lifecycle(ctx: Context, effect: SetLifecycle) -> None:
    store.set_record_state(ctx.db, effect.record_id, lifecycle=effect.lifecycle_state.value)
    row = store.record_row(ctx.db, effect.record_id)
    catalog.log_event(
        ctx.db, effect.record_id, ctx.at, effect.lifecycle_state.value, row["current_version"]
    )


def _flag_conflict(ctx: Context, effect: FlagConflict) -> None:
    row = store.record_row(ctx.db, effect.record_id)
    store.set_conflicts(ctx.db, effect.record_id, [*store.conflicts_of(row), effect.other_record])


def perform(ctx: Context, op: AnyOperation, effect: Effect) -> None:
    """Do one effect on the store (inside the caller's transaction)."""
    match effect:
        case CreateEpisode():
            assert isinstance(op, AddEpisode)
            content = EpisodeContent(
                conversation_id=op.conversation_id,
                text=op.text,
                source_kind=op.source_kind,
                source_id=op.source_id,
            )
            item = _seal(ctx, "episode", op.episode_id, 1, content.model_dump_json().encode())
            store.insert_episode(
                ctx.db,
                episode_id=op.episode_id,
                conversation_id=op.conversation_id,
                typed_at=op.typed_at.isoformat(),
                bound_space=ctx.space,
                key_id=item.key_id,
                sealed=item.sealed,
                sync_state=SyncState.PENDING,
            )
        case CreateRecord():
            _create_record(ctx, effect)
        case AddVersion():
            _add_version(ctx, effect)
        case SetLifecycle():
            _set_lifecycle(ctx, effect)
        case SetUsage():
            restriction = effect.restriction
            area = restriction.area.value if restriction and restriction.area else None
            store.set_usage(
                ctx.db, effect.record_id, area, restriction.project if restriction else None
            )
        case FlagSuperseded():
            store.set_superseded_by(ctx.db, effect.record_id, effect.by_record)
        case FlagConflict():
            _flag_conflict(ctx, effect)
        case CreateArtifact():
            assert isinstance(op, AddArtifact)
            body = ArtifactContent(kind=op.artifact_kind, payload=op.payload)
            item = _seal(ctx, "artifact", op.artifact_id, 1, body.model_dump_json().encode())
            catalog.insert_artifact(
                ctx.db,
                artifact_id=op.artifact_id,
                kind=op.artifact_kind.value,
                created_at=ctx.at,
                bound_space=ctx.space,
                key_id=item.key_id,
                sealed=item.sealed,
                sync_state=SyncState.PENDING,
            )
            catalog.add_derivations(ctx.db, "artifact", op.artifact_id, effect.derived_from)
        case SetProjectState():
            catalog.set_project(ctx.db, effect.project, effect.open, ctx.at)
        case CreateCandidate():
            assert isinstance(op, MarkCandidate)
            candidates.insert(
                ctx.db,
                candidates.CandidateRow(
                    episode_id=op.episode_id,
                    sentence=op.sentence,
                    conversation_id=effect.conversation_id,
                    content_type=op.content_type,
                    sensitivity=op.sensitivity,
                    time_kind=op.time_kind,
                    score=op.score,
                    model_id=op.model_id,
                    marked_at=ctx.at,
                    record_id=None,
                ),
            )
        case EndConversation():
            candidates.end_conversation(ctx.db, effect.conversation_id, ctx.at)
        case ResolveCandidates():
            refs = [(ref.episode_id, ref.sentence) for ref in effect.candidates]
            candidates.resolve(ctx.db, refs, effect.record_id)
        case ForgetRecords():
            words = accounting.words_of_records(ctx.db, effect.record_ids)
            shred.destroy(
                ctx.db,
                shred.Forget(
                    record_ids=tuple(effect.record_ids),
                    artifact_ids=tuple(effect.artifact_ids),
                    episode_ids=tuple(effect.episode_ids),
                    all_episodes=effect.all_episodes,
                    at=ctx.at,
                    sync_state=SyncState.PENDING,
                ),
            )
            accounting.drop_candidates_saying(ctx.db, words)
        case _:
            assert_never(effect)


# --- the queue row: the op without its text ---------------------------------------------

_TEXT_FIELDS: dict[type, set[str]] = {
    AddEpisode: {"text"},
    Remember: {"text", "subject"},
    Correct: {"text"},
    Infer: {"content"},
    Consolidate: {"content"},
    ReviseRule: {"text"},
    AddArtifact: {"payload"},
}


@dataclass(frozen=True, slots=True)
class QueueFields:
    op_json: str
    record_id: str | None
    episode_id: str | None
    artifact_id: str | None
    version: int | None


def queue_fields(op: AnyOperation, versions: tuple[int, ...]) -> QueueFields:
    """What the queue stores for ``op``: its JSON minus every text-bearing field, and the
    ids of the sealed rows the push re-reads that text from."""
    strip: Any = _TEXT_FIELDS.get(type(op), set())
    version = None
    if isinstance(op, Remember | Infer | Consolidate):
        version = versions[-1] if versions else 1
    elif isinstance(op, Correct | ReviseRule):
        version = versions[-1]
    episode_id = op.episode_id if isinstance(op, AddEpisode | MarkCandidate | Corroborate) else None
    return QueueFields(
        op_json=op.model_dump_json(exclude=strip),
        record_id=getattr(op, "record_id", None),
        episode_id=episode_id,
        artifact_id=op.artifact_id if isinstance(op, AddArtifact) else None,
        version=version,
    )
