"""Who produced a record's words, and who verified it: read by every presentation.

Invariants:
- Provenance is separate from epistemic state: a record *verified* by the user may
  still hold a web page's words, and only a record whose producer is ``user`` holds a
  sentence the user typed (the rules set it only on a verbatim-checked said record).
- ``provenance_of`` and ``verification_of`` read the stored fields; content written
  before they existed (record schema 1 without them) is read from its source kind,
  state and evidence, leaning to "not the user's words" when unsure.
- Two pieces of evidence are independent only when their *origins* differ
  (``origin_of``): a web page's host, an address's domain, or else the reference
  itself; the medium does not count, so two emails from one sender, two pages of one
  site, or an email and a page of one domain are one origin.
"""

from __future__ import annotations

from datetime import datetime
from typing import assert_never

from protocol.model import (
    EpistemicState,
    Producer,
    Provenance,
    RecordContent,
    SourceKind,
    Verification,
    VerifiedBy,
)

# Where external content comes from: the device logs it as external content, its medium
# prefixed to the source id ("web_page:https://pay.example").
EXTERNAL_MEDIA = ("web_page", "email", "document", "calendar_invite", "agent", "tool_output")
# The media a source id may name as its prefix.
MEDIA = (*EXTERNAL_MEDIA, "connected_source")
MEDIUM_WORDS = {
    "web_page": "a web page",
    "email": "an email",
    "document": "a document",
    "calendar_invite": "a calendar invite",
    "agent": "another agent",
    "tool_output": "a tool's output",
    "connected_source": "a connected source",
    "external": "external content",
}
REFERENCE_CHARS = 60  # how much of a reference a line shows


def host_of(url: str) -> str:
    """The host of ``scheme://[user@]host[:port]/…`` (lowercase), or the text itself."""
    _scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority = rest.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
    host = authority.rpartition("@")[2].split(":", 1)[0]
    return host.casefold() or url


def shown_reference(reference: str) -> str:
    """A reference as a line shows it: a URL's host, else the reference, cut."""
    shown = host_of(reference)
    if len(shown) > REFERENCE_CHARS:
        shown = shown[: REFERENCE_CHARS - 1] + "\u2026"
    return shown


def split_source(source_id: str | None) -> tuple[str | None, str | None]:
    """(medium, reference) of a source id; the medium only when the id names one."""
    if not source_id:
        return None, None
    head, sep, rest = source_id.partition(":")
    if sep and head in MEDIA and rest:
        return head, rest
    return None, source_id


def origin_of(source_id: str) -> str:
    """The origin two pieces of evidence must not share to count as independent."""
    _medium, reference = split_source(source_id)
    ref = (reference or source_id).strip().casefold()
    if "://" in ref:
        return host_of(ref).removeprefix("www.")
    ref = ref.removeprefix("mailto:")
    name, at, domain = ref.rpartition("@")
    if at and name and domain:
        return domain.strip("<> ")
    return ref


def _not_typed(content: RecordContent, source_id: str | None, at: datetime | None) -> Provenance:
    """The provenance of words the user did not type, by the content's source kind."""
    match content.source_kind:
        case SourceKind.EXTERNAL_CONTENT | SourceKind.CONNECTED_SOURCE:
            medium, reference = split_source(source_id)
            if medium is None and content.source_kind is SourceKind.CONNECTED_SOURCE:
                medium = "connected_source"
            return Provenance(
                producer=Producer.SOURCE, medium=medium or "external", reference=reference, at=at
            )
        case SourceKind.IMPORT:
            return Provenance(producer=Producer.IMPORT, reference=source_id, at=at)
        case SourceKind.USER_BEHAVIOUR:
            return Provenance(producer=Producer.ASSISTANT, medium="behaviour", at=at)
        case SourceKind.USER_STATEMENT:
            return Provenance(producer=Producer.ASSISTANT, at=at)
        case unknown:
            assert_never(unknown)


def _typed(content: RecordContent) -> Provenance:
    return Provenance(
        producer=Producer.USER, conversation_id=content.conversation_id, at=content.said_at
    )


def _legacy(content: RecordContent) -> Provenance:
    """The provenance of content written before the field, from what it does hold."""
    observed = content.evidence.observations
    first = observed[0] if observed else None
    if content.source_kind is SourceKind.USER_STATEMENT:
        # a said record was checked verbatim; a verified or invalid one was the user's
        # if it carries when they said it (an inference carries no said_at)
        if content.epistemic_state is EpistemicState.SAID or (
            content.epistemic_state in (EpistemicState.VERIFIED, EpistemicState.INVALID)
            and content.said_at is not None
        ):
            return _typed(content)
        return _not_typed(content, None, content.said_at)
    if content.source_kind is SourceKind.USER_BEHAVIOUR:
        return _not_typed(content, None, content.evidence.last_observed)
    return _not_typed(content, first.source_id if first else None, first.at if first else None)


def provenance_of(content: RecordContent) -> Provenance:
    """Who produced the record's words (stored, or read from older content)."""
    return content.provenance if content.provenance is not None else _legacy(content)


def verification_of(content: RecordContent) -> Verification | None:
    """How a verified record was verified; None when it is not verified."""
    if content.epistemic_state is not EpistemicState.VERIFIED:
        return None
    if content.verification is not None:
        return content.verification
    origins = {
        origin_of(o.source_id)
        for o in content.evidence.observations
        if o.source_kind is not SourceKind.USER_STATEMENT
    }
    if provenance_of(content).producer is not Producer.USER and len(origins) >= 2:
        return Verification(by=VerifiedBy.SOURCES, sources=sorted(origins)[:64])
    return Verification(by=VerifiedBy.USER)


def is_users_words(content: RecordContent) -> bool:
    """Whether the record's text is a sentence the user typed (quoted as theirs)."""
    return provenance_of(content).producer is Producer.USER


def verified_by_user(content: RecordContent) -> bool:
    found = verification_of(content)
    return found is not None and found.by is VerifiedBy.USER


def source_words(provenance: Provenance) -> str:
    """ "a web page (pay.example)", "an email (ana@bank.example)", "an import (notes.txt)"."""
    match provenance.producer:
        case Producer.SOURCE:
            what = MEDIUM_WORDS.get(provenance.medium or "external", "external content")
        case Producer.IMPORT:
            what = "an import"
        case Producer.ASSISTANT:
            what = "your behaviour" if provenance.medium == "behaviour" else "what I inferred"
        case Producer.USER:
            what = "what you typed"
    reference = provenance.reference
    if not reference or provenance.producer in (Producer.USER, Producer.ASSISTANT):
        return what
    return f"{what} ({shown_reference(reference)})"


def establish(
    content: RecordContent, episode_sources: dict[str, tuple[SourceKind, str | None]]
) -> Provenance:
    """The provenance the rules store on a new record: ``user`` only for a said record of
    the user's statement (whose words the rules checked verbatim); a source's medium and
    reference from its episode; the assistant for everything it inferred.
    ``episode_sources`` maps the record's source episodes to (kind, source id)."""
    if (
        content.source_kind is SourceKind.USER_STATEMENT
        and content.epistemic_state is EpistemicState.SAID
    ):
        return _typed(content)
    source_id = next(
        (
            source
            for e in content.source_episode_ids
            if (found := episode_sources.get(e)) is not None and (source := found[1]) is not None
        ),
        None,
    )
    if source_id is None and content.evidence.observations:
        source_id = content.evidence.observations[0].source_id
    seen = content.evidence.first_observed
    if content.source_kind is SourceKind.USER_STATEMENT:
        return _not_typed(content, source_id, content.said_at or seen)
    return _not_typed(content, source_id, seen)
