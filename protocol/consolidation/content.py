"""Building the record a candidate sentence becomes, from what the extractors read.

Invariants: pure; the record's text is the user's sentence verbatim (so the rules'
verbatim check can make it *said*); it names its one source episode and conversation;
it is marked ``background`` (written by consolidation, not during the conversation);
everything else (type, time, areas, sensitivity, subject) comes from the extraction.
"""

from __future__ import annotations

from datetime import datetime

from protocol.consolidation.extract import Extraction
from protocol.model import (
    ContentType,
    EpistemicState,
    Layer,
    RecordContent,
    SourceKind,
    TimeKind,
)


def said_content(
    sentence: str,
    extraction: Extraction,
    *,
    episode_id: str,
    conversation_id: str,
    said_at: datetime,
) -> RecordContent:
    """The record a user's candidate sentence becomes (the rules decide its lifecycle)."""
    time = extraction.time
    one_off_event = extraction.content_type is ContentType.EVENT and (
        time.time_kind is TimeKind.ONE_OFF
    )
    return RecordContent(
        text=sentence,
        content_type=extraction.content_type,
        epistemic_state=EpistemicState.SAID,
        layer=Layer.EVENT if one_off_event else Layer.CONSOLIDATED_FACT,
        time_kind=time.time_kind,
        valid_from=time.valid_from,
        valid_until=time.valid_until,
        expected_end=time.expected_end,
        source_episode_ids=[episode_id],
        source_kind=SourceKind.USER_STATEMENT,
        life_areas=list(extraction.life_areas),
        sensitivity=extraction.sensitivity,
        conversation_id=conversation_id,
        subject=extraction.subject,
        said_at=said_at,
        background=True,
    )
