"""How a record is shown: every line labelled with its epistemic state.

Invariants: only *said* and *verified* records are quoted as the user's words, dated
and verbatim; anything else is labelled as what it is and never as a quote. Every
line carries content type, epistemic state, confidence class and any conflict flag.
Record text is made inert: no line break, control character or angle bracket survives
(escaped as ``\\n``, ``\\uXXXX``), and inside a quote a double quote is escaped, so
a record's text can neither end its quote nor its line nor a data block around it.
"""

from __future__ import annotations

from datetime import datetime

from protocol.confidence import ConfidenceClass
from protocol.model import EpistemicState, RecordContent

QUOTABLE = frozenset({EpistemicState.SAID, EpistemicState.VERIFIED})
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "<": "\\u003c", ">": "\\u003e"}


def inert(text: str, *, quoted: bool = False) -> str:
    """The text with everything that could end a quote, a line or a block escaped."""
    out = []
    for ch in text:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif quoted and ch == '"':
            out.append('\\"')
        elif ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029\u0085":
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return "".join(out)


def present(text: str, state: EpistemicState, said_on: datetime) -> str:
    """The body of a line: a dated quote for the user's words, a labelled line otherwise."""
    if state in QUOTABLE:
        return f'On {said_on.date().isoformat()} you wrote: "{inert(text, quoted=True)}"'
    return f"[{state.value}, not your words] {inert(text)}"


def labelled_line(
    content: RecordContent,
    shown: ConfidenceClass,
    said_on: datetime,
    *,
    conflict: bool = False,
    superseded: bool = False,
    current: bool = False,
) -> str:
    """One line of the marked data block retrieval hands to the model."""
    kind = content.custom_type.name if content.custom_type else content.content_type.value
    labels = [kind, content.epistemic_state.value, shown.value]
    if conflict:
        labels.append("CONFLICT: another record disagrees")
    if superseded:
        labels.append("OUTDATED: you said something newer")
    if current:
        labels.append("CURRENT: replaces an older record")
    body = present(content.text, content.epistemic_state, said_on)
    return f"{body}  [{' | '.join(labels)}]"
