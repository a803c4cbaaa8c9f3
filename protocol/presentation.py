"""How a record is shown: every line labelled with its epistemic state.

Invariants: only *said* and *verified* records are quoted as the user's words, dated
and verbatim; anything else is labelled as what it is and never as a quote. Every
line carries content type, epistemic state, confidence class and any conflict flag.
"""

from __future__ import annotations

from datetime import datetime

from protocol.confidence import ConfidenceClass
from protocol.model import EpistemicState, RecordContent

QUOTABLE = frozenset({EpistemicState.SAID, EpistemicState.VERIFIED})


def present(text: str, state: EpistemicState, said_on: datetime) -> str:
    """The body of a line: a dated quote for the user's words, a labelled line otherwise."""
    if state in QUOTABLE:
        return f'On {said_on.date().isoformat()} you wrote: "{text}"'
    return f"[{state.value}, not your words] {text}"


def labelled_line(
    content: RecordContent,
    shown: ConfidenceClass,
    said_on: datetime,
    *,
    conflict: bool = False,
    superseded: bool = False,
) -> str:
    """One line of the marked data block retrieval hands to the model."""
    kind = content.custom_type.name if content.custom_type else content.content_type.value
    labels = [kind, content.epistemic_state.value, shown.value]
    if conflict:
        labels.append("CONFLICT: another record disagrees")
    if superseded:
        labels.append("OUTDATED: you said something newer")
    body = present(content.text, content.epistemic_state, said_on)
    return f"{body}  [{' | '.join(labels)}]"
