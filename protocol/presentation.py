"""How a record is shown: every line labelled with its epistemic state.

Invariants: only *said* and *verified* records are quoted as the user's words, dated
to the minute and verbatim; anything else is labelled as what it is and never as a
quote. A record that took its subject from the user's previous sentence (its
``context_text``) is shown with both sentences, each verbatim and dated, and both are
quoted only when the record is. Every line carries content type, epistemic state,
confidence class and any conflict flag. Record text is made inert: no line break,
control character or angle bracket survives (escaped as ``\\n``, ``\\uXXXX``), and
inside a quote a double quote is escaped, so a record's text can neither end its
quote nor its line nor a data block around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from protocol.confidence import ConfidenceClass
from protocol.model import EpistemicState, RecordContent

QUOTABLE = frozenset({EpistemicState.SAID, EpistemicState.VERIFIED})
_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "<": "\\u003c", ">": "\\u003e"}

# The flags of a line when nothing more precise is known (a view outside a data block).
CONFLICT = "CONFLICT: another record disagrees"
OUTDATED = "OUTDATED: you said something newer"
CURRENT = "CURRENT: replaces an older record"


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


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo is None else moment.astimezone(UTC)


def day(moment: datetime) -> str:
    """``2026-12-01`` (UTC)."""
    return _utc(moment).date().isoformat()


def minute(moment: datetime) -> str:
    """``2026-12-01 at 14:02`` (UTC): when something was said, to the minute."""
    m = _utc(moment)
    return f"{m.date().isoformat()} at {m:%H:%M}"


def present(
    text: str,
    state: EpistemicState,
    said_on: datetime,
    *,
    context: str | None = None,
    context_said_on: datetime | None = None,
) -> str:
    """The body of a line: a dated quote for the user's words, a labelled line otherwise.

    With ``context`` (the user's previous sentence that gave this one its subject) both
    sentences are shown, the earlier first, each dated to the minute:
    ``On 2026-12-01 at 14:02 you wrote: "…" then at 14:03: "…"``.
    """
    if state in QUOTABLE:
        quote = inert(text, quoted=True)
        if context is None:
            return f'On {minute(said_on)} you wrote: "{quote}"'
        first = context_said_on or said_on
        if context_said_on is None:
            then = "then"
        elif day(first) == day(said_on):
            then = f"then at {_utc(said_on):%H:%M}"
        else:
            then = f"then on {minute(said_on)}"
        return f'On {minute(first)} you wrote: "{inert(context, quoted=True)}" {then}: "{quote}"'
    body = f"[{state.value}, not your words] {inert(text)}"
    if context is not None:
        body += f" (following: {inert(context)})"
    return body


def labelled_line(
    content: RecordContent,
    shown: ConfidenceClass,
    said_on: datetime,
    *,
    flags: Sequence[str] = (),
) -> str:
    """One line of the marked data block retrieval hands to the model: the body, then
    content type, epistemic state, confidence class and the flags (conflict, outdated,
    current) in brackets."""
    kind = content.custom_type.name if content.custom_type else content.content_type.value
    labels = [kind, content.epistemic_state.value, shown.value, *flags]
    body = present(
        content.text,
        content.epistemic_state,
        said_on,
        context=content.context_text,
        context_said_on=content.context_said_at,
    )
    return f"{body}  [{' | '.join(labels)}]"
