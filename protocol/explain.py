""" "How do you know this?": a sentence built from the record's evidence and sources.

Invariants: the answer is built only from the record's fields (evidence, source
episodes, state, relation notes), never from free reasoning; an inference is never
described as something the user said, and only said/verified text is quoted; a
forgotten source or related record is named as forgotten, never quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from protocol.confidence import ConfidenceClass
from protocol.model import EpistemicState, RecordContent, SourceKind, StatementRelation
from protocol.presentation import QUOTABLE, minute

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
    if known.content.epistemic_state in QUOTABLE:
        return f'"{known.content.text}"'
    return f"a record that was not your words ({known.content.epistemic_state.value})"


def _relation(content: RecordContent, kind: StatementRelation, when: str, other: str) -> str:
    said = f'"{content.text}"' if content.epistemic_state in QUOTABLE else "this record"
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
) -> str:
    """The answer to "How do you know this?" for one record version.

    ``episodes`` maps each source episode id to (typed_at, text), or None when its
    content was forgotten. ``related`` is what the caller knows of the records the
    record's relation notes name (a missing one is "an earlier record"); ``replaced_by``
    the newer record that supersedes it, when ``superseded``.
    """
    parts: list[str] = []
    state = content.epistemic_state
    if state in (EpistemicState.SAID, EpistemicState.VERIFIED):
        quoted = [
            f'on {found[0].date().isoformat()} you wrote: "{found[1]}"'
            for e in content.source_episode_ids
            if (found := episodes.get(e)) is not None
        ]
        if state is EpistemicState.VERIFIED:
            parts.append("You confirmed this.")
        if quoted:
            parts.append("You told me so: " + "; ".join(quoted) + ".")
        elif state is EpistemicState.SAID:
            parts.append("You told me so; the conversation it came from was forgotten.")
    else:
        evidence = content.evidence
        word = {"observed": "saw", "inferred": "inferred", "hypothesis": "guessed"}.get(
            state.value, state.value
        )
        supporting = round(evidence.ratio * evidence.count)
        parts.append(
            f"I {word} this from {SOURCE_WORDS[content.source_kind]}: {supporting} of "
            f"{evidence.count} distinct source(s) support it"
            + (
                f", observed between {evidence.first_observed.date().isoformat()} and "
                f"{evidence.last_observed.date().isoformat()}"
                if evidence.first_observed and evidence.last_observed
                else ""
            )
            + ". It is not something you said."
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
