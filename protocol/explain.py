""" "How do you know this?": a sentence built from the record's evidence and sources.

Invariants: the answer is built only from the record's fields (evidence, source
episodes, state, provenance, verification, relation notes), never from free reasoning;
an inference, a source's claim, an import or a rule is never described as something the
user said, and only a sentence the user typed (its provenance) is quoted, and only from
episodes the user typed (never an app's behaviour event); a confirmation says who
confirmed it (you, or independent sources); a
forgotten source or related record is named as forgotten, never quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import assert_never

from protocol.confidence import ConfidenceClass
from protocol.model import (
    Layer,
    Producer,
    RecordContent,
    SourceKind,
    StatementRelation,
    VerifiedBy,
)
from protocol.presentation import minute
from protocol.provenance import is_users_words, provenance_of, source_words, verification_of

SOURCE_WORDS = {
    SourceKind.USER_STATEMENT: "what you said",
    SourceKind.USER_BEHAVIOUR: "your behaviour",
    SourceKind.CONNECTED_SOURCE: "a connected source",
    SourceKind.EXTERNAL_CONTENT: "external content",
    SourceKind.IMPORT: "an import",
}


@dataclass(frozen=True, slots=True)
class Known:
    """What the caller knows of another record: its current content (None when it was
    permanently forgotten) and when the user said it."""

    content: RecordContent | None
    said_on: datetime | None = None


def _words(known: Known | None) -> str:
    """Another record named in a sentence: quoted only if it is the user's own words."""
    if known is None:
        return "an earlier record"
    if known.content is None:
        return "a record that was permanently forgotten"
    if is_users_words(known.content):
        return f'"{known.content.text}"'
    return f"a record that was not your words ({known.content.epistemic_state.value})"


def _relation(content: RecordContent, kind: StatementRelation, when: str, other: str) -> str:
    said = f'"{content.text}"' if is_users_words(content) else "this record"
    if kind is StatementRelation.CORRECTION:
        return f"You corrected this on {when}: {said} replaces {other}"
    if kind is StatementRelation.ADDITION:
        return f"On {when} you added this beside {other}, which still holds"
    if kind is StatementRelation.EXCEPTION:
        return f"On {when} you made this an exception to {other}, which still holds otherwise"
    return f"On {when} this came to disagree with {other}; I keep both"


def relation_sentences(content: RecordContent, related: Mapping[str, Known]) -> list[str]:
    """One sentence per relation note of the record (the newer statement's decision about
    an earlier record), dated to the minute, with the note's evidence."""
    out = []
    for note in content.relations:
        if note.kind is StatementRelation.UNRELATED:
            continue
        other = _words(related.get(note.record_id))
        sentence = _relation(content, note.kind, minute(note.at), other)
        out.append(f"{sentence} ({note.evidence}).")
    return out


def _confirmed(at: datetime | None) -> str:
    return f"You confirmed this on {minute(at)}." if at is not None else "You confirmed this."


def _not_said(content: RecordContent, producer: Producer, where: str) -> list[str]:
    """Who produced words that are not the user's, with the evidence they rest on."""
    evidence = content.evidence
    span = (
        f", observed between {evidence.first_observed.date().isoformat()} and "
        f"{evidence.last_observed.date().isoformat()}"
        if evidence.first_observed and evidence.last_observed
        else ""
    )
    match producer:
        case Producer.SOURCE | Producer.IMPORT:
            verb = "imported this from" if producer is Producer.IMPORT else "saw this in"
            return [f"I {verb} {where}{span}. These are not your words."]
        case Producer.ASSISTANT | Producer.USER:
            state = content.epistemic_state
            word = {"observed": "saw", "inferred": "inferred", "hypothesis": "guessed"}.get(
                state.value, "took"
            )
            supporting = round(evidence.ratio * evidence.count)
            what = "proposed this rule" if content.layer is Layer.BEHAVIOUR_RULE else f"{word} this"
            support = (
                f": {supporting} of {evidence.count} distinct source(s) support it{span}"
                if evidence.count
                else ""
            )
            return [
                f"I {what} from {SOURCE_WORDS[content.source_kind]}{support}. "
                "It is not something you said."
            ]
        case unknown:
            assert_never(unknown)


def explain(
    content: RecordContent,
    shown: ConfidenceClass,
    episodes: Mapping[str, tuple[datetime, str] | None],
    *,
    version: int = 1,
    conflicts: int = 0,
    superseded: bool = False,
    related: Mapping[str, Known] | None = None,
    replaced_by: Known | None = None,
    episode_kinds: Mapping[str, SourceKind] | None = None,
) -> str:
    """The answer to "How do you know this?" for one record version.

    ``episodes`` maps each source episode id to (typed_at, text), or None when its
    content was forgotten. ``related`` is what the caller knows of the records the
    record's relation notes name (a missing one is "an earlier record"); ``replaced_by``
    the newer record that supersedes it, when ``superseded``.
    """
    parts: list[str] = []
    origin = provenance_of(content)
    verified = verification_of(content)
    kinds = episode_kinds or {}
    if origin.producer is Producer.USER:
        quoted = [
            f'on {found[0].date().isoformat()} you wrote: "{found[1]}"'
            for e in content.source_episode_ids
            if (found := episodes.get(e)) is not None
            and kinds.get(e, SourceKind.USER_STATEMENT) is SourceKind.USER_STATEMENT
        ]
        if verified is not None and verified.by is VerifiedBy.USER:
            parts.append(_confirmed(verified.at))
        if quoted:
            parts.append("You told me so: " + "; ".join(quoted) + ".")
        else:
            parts.append("You told me so; the conversation it came from was forgotten.")
    else:
        parts.extend(_not_said(content, origin.producer, source_words(origin)))
        if content.layer is Layer.BEHAVIOUR_RULE and verified is not None:
            when = f" on {minute(verified.at)}" if verified.at is not None else ""
            parts.append(f"You accepted this rule{when}.")
        elif verified is not None and verified.by is VerifiedBy.USER:
            parts.append(_confirmed(verified.at))
        elif verified is not None:
            origins = ", ".join(verified.sources) or "more than one source"
            parts.append(
                f"Independent sources say the same ({origins}); you have not confirmed it."
            )
        if content.alternatives:
            readings = "; ".join(a.text for a in content.alternatives)
            parts.append(f"It could also mean: {readings}.")
    parts.append(f"Confidence: {shown.value}.")
    if version > 1:
        parts.append(f"This is version {version}; earlier versions are no longer active.")
    parts.extend(relation_sentences(content, related or {}))
    if conflicts:
        parts.append(f"It conflicts with {conflicts} other record(s); I keep both.")
    if superseded:
        newer = replaced_by
        if newer is None or newer.content is None:
            parts.append("You said something newer on the same subject, so I use that instead.")
        else:
            when = f" on {minute(newer.said_on)}" if newer.said_on is not None else ""
            parts.append(
                f"You said something newer on the same subject{when}: {_words(newer)} "
                "replaces it, so I use that instead."
            )
    return " ".join(parts)
