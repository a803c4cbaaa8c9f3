"""What ``decide`` returns: the effects a store must perform (as data), and the
decision, ``Accept`` with its effects or ``Refuse`` with a code and a reason.

Invariants:
- Effects are frozen dataclasses, one per kind of write; ``Effect`` is their closed
  union, and every interpreter (device, cloud, the reference ledger) is one ``match``
  over it ending in ``assert_never`` (``tests/test_interpreters.py``).
- A new version never overwrites: ``next_version`` adds one above every number held.
- A permanently forgotten record is refused with the same words everywhere
  (``refuse_forgotten``).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.model import (
    ArtifactKind,
    EpistemicState,
    LifecycleState,
    RecordContent,
    UsageRestriction,
)
from protocol.operations import CandidateRef, EffectKind, RefusalCode
from protocol.rulebook.facts import RecordFacts


@dataclass(frozen=True, slots=True)
class CreateEpisode:
    episode_id: str
    conversation_id: str


@dataclass(frozen=True, slots=True)
class CreateRecord:
    record_id: str
    version: int
    lifecycle_state: LifecycleState
    content: RecordContent

    @property
    def epistemic_state(self) -> EpistemicState:
        return self.content.epistemic_state


@dataclass(frozen=True, slots=True)
class AddVersion:
    """A new version of an existing record (correction, confirmation, reaffirmation)."""

    record_id: str
    version: int
    supersedes: int
    content: RecordContent
    lifecycle_state: LifecycleState


@dataclass(frozen=True, slots=True)
class SetLifecycle:
    record_id: str
    lifecycle_state: LifecycleState


@dataclass(frozen=True, slots=True)
class SetUsage:
    record_id: str
    restriction: UsageRestriction | None


@dataclass(frozen=True, slots=True)
class FlagSuperseded:
    """An older said statement on the same subject: flagged, kept, no longer current."""

    record_id: str
    by_record: str


@dataclass(frozen=True, slots=True)
class FlagConflict:
    """Two records on the same subject from different kinds of source: both kept."""

    record_id: str
    other_record: str


@dataclass(frozen=True, slots=True)
class ForgetRecords:
    """Destroy the keys of every version of these records, of their source episodes and
    of these artifacts; the records become skeletons. With ``all_episodes``, every
    episode of the space goes too (forgetting all memory).
    """

    record_ids: tuple[str, ...]
    artifact_ids: tuple[str, ...] = ()
    all_episodes: bool = False
    episode_ids: tuple[str, ...] = ()  # episodes to destroy beyond the records' own


@dataclass(frozen=True, slots=True)
class CreateArtifact:
    artifact_id: str
    artifact_kind: ArtifactKind
    derived_from: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SetProjectState:
    project: str
    open: bool


@dataclass(frozen=True, slots=True)
class CreateCandidate:
    """A detector's candidate: labels only; the words stay in their episode."""

    episode_id: str
    sentence: int
    conversation_id: str


@dataclass(frozen=True, slots=True)
class EndConversation:
    conversation_id: str


@dataclass(frozen=True, slots=True)
class ResolveCandidates:
    """These candidates were consolidated into ``record_id``."""

    candidates: tuple[CandidateRef, ...]
    record_id: str


Effect = (
    CreateEpisode
    | CreateRecord
    | AddVersion
    | SetLifecycle
    | SetUsage
    | FlagSuperseded
    | FlagConflict
    | ForgetRecords
    | CreateArtifact
    | SetProjectState
    | CreateCandidate
    | EndConversation
    | ResolveCandidates
)


@dataclass(frozen=True, slots=True)
class Accept:
    effects: tuple[Effect, ...]
    kind: EffectKind
    record_id: str | None = None
    versions: tuple[int, ...] = ()
    affected_records: tuple[str, ...] = ()
    conflict: str | None = None  # applied, but it raced another change: why (the receipt)

    @property
    def effect(self) -> Effect:
        """The primary effect (the first)."""
        return self.effects[0]


@dataclass(frozen=True, slots=True)
class Refuse:
    code: RefusalCode
    reason: str


Decision = Accept | Refuse


def refuse_forgotten(record_id: str) -> Refuse:
    return Refuse(
        RefusalCode.FORGOTTEN,
        f"record {record_id} was permanently forgotten; it cannot be changed or brought back",
    )


def next_version(
    record: RecordFacts, content: RecordContent, lifecycle: LifecycleState, kind: EffectKind
) -> Accept:
    """A new version of ``record`` (the old one stays in the chain)."""
    new = record.next_version
    effect = AddVersion(record.record_id, new, record.version, content, lifecycle)
    return Accept((effect,), kind, record.record_id, (record.version, new))
