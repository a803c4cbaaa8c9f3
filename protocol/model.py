"""The memory record and the episode, as both sides understand them.

Invariants: a record's source episodes are never empty; a permanently forgotten
record is a skeleton (id, state, when) and carries no text, type or source.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import Field, model_validator

from protocol.ids import ConversationId, EpisodeId, RecordId, SpaceId
from protocol.wire import UtcDatetime, WireModel

MAX_TEXT_CHARS = 4_000


class EpistemicState(StrEnum):
    """How the assistant knows a record."""

    SAID = "said"
    OBSERVED = "observed"
    INFERRED = "inferred"
    HYPOTHESIS = "hypothesis"
    VERIFIED = "verified"
    INVALID = "invalid"


class LifecycleState(StrEnum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    NOT_IN_USE = "not_in_use"
    FORGOTTEN = "permanently_forgotten"


Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]


class RecordContent(WireModel):
    """What a record version seals: the parts that must vanish with its key."""

    text: Text
    source_episode_ids: Annotated[list[EpisodeId], Field(min_length=1, max_length=64)]
    conversation_id: ConversationId


class MemoryRecord(WireModel):
    """One version of a memory record, opened (readable)."""

    id: RecordId
    space: SpaceId
    version: Annotated[int, Field(ge=1)]
    supersedes: Annotated[int, Field(ge=1)] | None = None
    text: Text
    epistemic_state: EpistemicState
    lifecycle_state: LifecycleState
    source_episode_ids: Annotated[list[EpisodeId], Field(min_length=1, max_length=64)]
    conversation_id: ConversationId
    recorded_at: UtcDatetime

    @model_validator(mode="after")
    def _not_forgotten(self) -> MemoryRecord:
        if self.lifecycle_state is LifecycleState.FORGOTTEN:
            raise ValueError(
                f"record {self.id} is permanently forgotten; only a Skeleton may stand for it"
            )
        if self.supersedes is not None and self.supersedes >= self.version:
            raise ValueError(
                f"record {self.id} v{self.version} cannot supersede v{self.supersedes}"
            )
        return self


class Skeleton(WireModel):
    """What remains of a permanently forgotten record: id, state, and when."""

    id: RecordId
    lifecycle_state: LifecycleState = LifecycleState.FORGOTTEN
    forgotten_at: UtcDatetime


class Episode(WireModel):
    """What the user typed, once, in a conversation."""

    id: EpisodeId
    conversation_id: ConversationId
    text: Text
    typed_at: UtcDatetime
