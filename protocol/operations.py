"""Operations: what a device asks the authority to do, each with a client-made id.

Invariant: an operation is applied at most once per space, keyed by ``op_id``; a
replay gets the original receipt back, never a second effect.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import Field, TypeAdapter

from protocol.ids import ConversationId, EpisodeId, OpId, RecordId
from protocol.model import Text
from protocol.wire import UtcDatetime, WireModel


class AddEpisode(WireModel):
    """Log what the user typed in a conversation (the episode log 'said' is checked against)."""

    kind: Literal["add_episode"] = "add_episode"
    op_id: OpId
    episode_id: EpisodeId
    conversation_id: ConversationId
    text: Text
    typed_at: UtcDatetime


class Remember(WireModel):
    """Explicit "remember this": the user's own sentence becomes an active, said record."""

    kind: Literal["remember"] = "remember"
    op_id: OpId
    record_id: RecordId
    text: Text
    conversation_id: ConversationId
    source_episode_ids: Annotated[list[EpisodeId], Field(min_length=1, max_length=64)]
    made_at: UtcDatetime


class ForgetPermanently(WireModel):
    """Destroy the keys of a record and everything derived from it. Cannot be undone."""

    kind: Literal["forget_permanently"] = "forget_permanently"
    op_id: OpId
    record_id: RecordId
    made_at: UtcDatetime


Operation = Annotated[AddEpisode | Remember | ForgetPermanently, Field(discriminator="kind")]
OPERATION_ADAPTER: TypeAdapter[AddEpisode | Remember | ForgetPermanently] = TypeAdapter(Operation)

MAX_OPS_PER_PUSH = 500


class ReceiptStatus(StrEnum):
    APPLIED = "applied"
    DUPLICATE = "duplicate"
    REFUSED = "refused"
    CONFLICT = "conflict"


class RefusalCode(StrEnum):
    MALFORMED = "malformed"
    UNKNOWN_RECORD = "unknown_record"
    UNKNOWN_EPISODE = "unknown_episode"
    RECORD_EXISTS = "record_exists"
    EPISODE_EXISTS = "episode_exists"
    FORGOTTEN = "forgotten"
    NOT_SAID = "not_said"
    WRONG_CONVERSATION = "wrong_conversation"


class Receipt(WireModel):
    """The durable answer to one operation."""

    index: Annotated[int, Field(ge=0)]
    op_id: str | None
    status: ReceiptStatus
    original_status: ReceiptStatus | None = None  # set on a duplicate: what the first try got
    code: RefusalCode | None = None
    reason: str | None = None
    record_id: RecordId | None = None
    applied_at: UtcDatetime | None = None
