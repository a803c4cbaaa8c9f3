"""How a record is shown: every line labelled with its epistemic state.

Invariants: a record is quoted as the user's words ("you wrote", dated to the minute,
verbatim) if and only if its provenance says the user typed it
(``protocol.provenance``); anything else says who produced the words (a source with
its medium and reference, an import, the assistant), who verified it (you, or
independent sources) or that it is a rule you accepted, and is marked "not your
words", never quoted. A record that took its subject from the user's previous sentence
(its ``context_text``) is shown with both sentences, each verbatim and dated, and both
are quoted only when the record is. Every line carries content type, epistemic state
(a verified one says by whom), confidence class and any conflict flag. Record text is
made inert: no line break, control character or angle bracket survives (escaped as
``\\n``, ``\\uXXXX``), and inside a quote a double quote is escaped, so a record's
text can neither end its quote nor its line nor a data block around it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import assert_never

from protocol.confidence import ConfidenceClass
from protocol.model import Layer, Producer, RecordContent, SourceKind, VerifiedBy
from protocol.provenance import is_users_words, provenance_of, source_words, verification_of

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


def _follow_up(
    quote: str, said_on: datetime, context: str | None, context_said_on: datetime | None
) -> str:
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


def state_label(content: RecordContent) -> str:
    """The epistemic state as a line's label: *verified* says by whom."""
    verified = verification_of(content)
    if verified is None:
        return content.epistemic_state.value
    return "verified by you" if verified.by is VerifiedBy.USER else "corroborated by sources"


_VERBS = {"observed": "I observed this", "inferred": "I inferred this", "hypothesis": "I guess"}
_FROM = {
    SourceKind.USER_BEHAVIOUR: " from your behaviour",
    SourceKind.USER_STATEMENT: " from what you said",
}


def _inferred(content: RecordContent) -> str:
    """The assistant's own words, with the evidence they rest on."""
    verb = _VERBS.get(content.epistemic_state.value, "I noted this")
    evidence = content.evidence
    count = evidence.count
    support = f" ({round(evidence.ratio * count)} of {count} observations)" if count else ""
    return f"{verb}{_FROM.get(content.source_kind, '')}{support}"


def _not_users(content: RecordContent, said_on: datetime) -> str:
    """The body of a line whose words are not the user's: who produced them, and who
    (if anyone) verified them, then the text, unquoted."""
    origin = provenance_of(content)
    verified = verification_of(content)
    rule = content.layer is Layer.BEHAVIOUR_RULE
    where = source_words(origin)
    when = verified.at if verified is not None and verified.at is not None else said_on
    if rule and verified is not None and verified.by is VerifiedBy.USER:
        head = f"[rule you accepted, not your words] You accepted this rule on {minute(when)}"
    elif rule:
        head = f"[proposed rule, not your words] I propose this rule from {where}"
    elif verified is not None and verified.by is VerifiedBy.USER:
        head = (
            f"[verified by you, not your words] You confirmed this from {where} on {minute(when)}"
        )
    elif verified is not None:
        origins = ", ".join(inert(o) for o in verified.sources[:3]) or where
        count = max(len(verified.sources), 2)
        head = (
            f"[corroborated, not your words] Seen in {count} independent sources ({origins}), "
            "not confirmed by you"
        )
    else:
        state = content.epistemic_state.value
        match origin.producer:
            case Producer.SOURCE | Producer.IMPORT:
                head = f"[{state}, not your words] From {where}, seen {day(said_on)}"
            case Producer.ASSISTANT | Producer.USER:
                head = f"[{state}, not your words] {_inferred(content)}"
            case unknown:
                assert_never(unknown)
    body = f"{head}: {inert(content.text)}"
    if content.context_text is not None:
        body += f" (following: {inert(content.context_text)})"
    return body


def present(content: RecordContent, said_on: datetime) -> str:
    """The body of a line: a dated quote for a sentence the user typed, a labelled line
    naming who produced the words otherwise.

    With ``context_text`` (the user's previous sentence that gave this one its subject)
    both sentences are shown, the earlier first, each dated to the minute:
    ``On 2026-12-01 at 14:02 you wrote: "…" then at 14:03: "…"``.
    """
    if is_users_words(content):
        quote = inert(content.text, quoted=True)
        return _follow_up(quote, said_on, content.context_text, content.context_said_at)
    return _not_users(content, said_on)


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
    labels = [kind, state_label(content), shown.value, *flags]
    body = present(content, said_on)
    return f"{body}  [{' | '.join(labels)}]"
