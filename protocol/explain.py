""" "How do you know this?": a sentence built from the record's evidence and sources.

Invariants: the answer is built only from the record's fields (evidence, source
episodes, state), never from free reasoning; an inference is never described as
something the user said; a forgotten source is named as forgotten, never quoted.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from protocol.confidence import ConfidenceClass
from protocol.model import EpistemicState, RecordContent, SourceKind

SOURCE_WORDS = {
    SourceKind.USER_STATEMENT: "what you said",
    SourceKind.USER_BEHAVIOUR: "your behaviour",
    SourceKind.CONNECTED_SOURCE: "a connected source",
    SourceKind.EXTERNAL_CONTENT: "external content",
    SourceKind.IMPORT: "an import",
}


def explain(
    content: RecordContent,
    shown: ConfidenceClass,
    episodes: Mapping[str, tuple[datetime, str] | None],
    *,
    version: int = 1,
    conflicts: int = 0,
    superseded: bool = False,
) -> str:
    """The answer to "How do you know this?" for one record version.

    ``episodes`` maps each source episode id to (typed_at, text), or None when its
    content was forgotten.
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
    if conflicts:
        parts.append(f"It conflicts with {conflicts} other record(s); I keep both.")
    if superseded:
        parts.append("You said something newer on the same subject, so I use that instead.")
    return " ".join(parts)
