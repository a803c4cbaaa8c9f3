"""The facts ``decide`` reads: what the caller's store knows about the op's record,
episodes, related records, derivations and projects, and which of them an op names.

Invariants:
- Facts are plain frozen values gathered by the caller (device or cloud) from its own
  store; the rules read nothing else (no store, no clock, no I/O).
- ``episodes_named`` and ``parents_named`` say exactly which episodes and parent
  records ``decide(op)`` looks at, so both sides gather the same facts for one op.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from protocol.model import LifecycleState, RecordContent, SourceKind
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    Consolidate,
    Correct,
    Corroborate,
    ForgetPermanently,
    Infer,
    MarkCandidate,
    Remember,
)


@dataclass(frozen=True, slots=True)
class RecordFacts:
    """What the store knows about one record: its state and its current content.

    ``content`` is None when the record is forgotten (its keys are gone).
    ``highest_version`` is the highest version number the store holds for the record
    when that is above ``version``: a device may hold its own not-yet-numbered
    ("provisional") version above the current one after a pulled version took its
    number. A new version is numbered above both, so it never takes a held number.
    """

    record_id: str
    lifecycle: LifecycleState
    version: int
    content: RecordContent | None = None
    highest_version: int = 0

    @property
    def next_version(self) -> int:
        """The number a new version of this record takes."""
        return max(self.version, self.highest_version) + 1


@dataclass(frozen=True, slots=True)
class EpisodeFacts:
    episode_id: str
    conversation_id: str
    text: str
    typed_at: datetime | None = None
    source_kind: SourceKind = SourceKind.USER_STATEMENT
    source_id: str | None = None


@dataclass(frozen=True, slots=True)
class Facts:
    """Everything ``decide`` may look at, gathered by the caller from its store.

    - ``record``: the record the op names (None if absent).
    - ``episodes``: each episode id the op names that exists (content opened; for a
      forget, existence is enough).
    - ``related``: active records that may share a subject with the op's text (the
      store finds them by ``subjects.lookup_keys``; ``decide`` checks precisely).
    - ``children``: derivation edges, parent record id -> derived items, for every
      record reachable from the ones a forget names.
    - ``area_records``: for a mass forget, the ids of the records it covers.
    - ``known_records``: for ops naming other records (derived_from), their facts.
    - ``projects``: project name -> open?
    - ``concurrent_versions``: for a correction naming a ``base_version``, the versions
      of its record after that one made by someone other than the op's device (the
      cloud knows who made each version; a device gathers none).
    """

    space_id: str = ""
    record: RecordFacts | None = None
    episodes: Mapping[str, EpisodeFacts] | None = None
    related: Sequence[RecordFacts] = ()
    children: Mapping[str, Sequence[DerivedItem]] = field(default_factory=dict)
    area_records: Sequence[str] = ()
    known_records: Mapping[str, RecordFacts] = field(default_factory=dict)
    projects: Mapping[str, bool] = field(default_factory=dict)
    concurrent_versions: Sequence[int] = ()
    artifact_exists: bool = False
    account_key: bytes | None = None
    candidate_marked: bool = False


@dataclass(frozen=True, slots=True)
class DerivedItem:
    kind: str  # "record" or "artifact"
    item_id: str


def episodes_named(op: AnyOperation, record: RecordContent | None = None) -> list[str]:
    """The episode ids whose facts ``decide(op)`` looks at. ``record``: the current
    content of the record the op names, when the caller has read it (a corroboration
    compares its sources with the record's own episodes)."""
    if isinstance(op, AddEpisode | MarkCandidate):
        return [op.episode_id]
    if isinstance(op, ForgetPermanently):
        return list(op.episode_ids)
    if isinstance(op, Remember | Correct):
        return list(op.source_episode_ids)
    if isinstance(op, Infer | Consolidate):
        return list(op.content.source_episode_ids)
    if isinstance(op, Corroborate):
        own = list(record.source_episode_ids) if record is not None else []
        return [op.episode_id, *own]
    return []


def parents_named(op: AnyOperation) -> list[str]:
    """The records ``op`` says it derives from (their facts go in ``known_records``)."""
    if isinstance(op, Infer | Consolidate):
        return list(op.content.derived_from)
    if isinstance(op, AddArtifact):
        return list(op.derived_from)
    return []
