"""Finding the records a new statement may relate to, without opening every record.

``protocol.relating`` decides how two statements relate; this module gives the index
keys under which the candidates are found, and the generic "same beginning" rule it
falls back on when a sentence fits no frame.

Invariant: ``same_subject`` is symmetric and deterministic. Two records share a
subject when both name the same explicit ``subject`` key; otherwise, when their
sentences (case-folded, leading discourse markers such as "Actually," or "No wait,"
stripped, contractions expanded, final punctuation and trailing time words dropped) begin with
the same three or more words, that shared beginning covers at least half of the
shorter sentence, and what follows it differs: "I drink my coffee iced." and "I drink
my coffee hot now." share "i drink my coffee"; "I like tea." and "I like coffee." share
only two words and are not the same subject.

Finding candidates without opening every record: a record is stored under the keys
``stored_keys`` gives, a new statement looks up ``lookup_keys``, and any two records on
the same subject share at least one key (``tests/protocol/test_subjects.py`` checks it).
With ``k(n) = max(3, ceil(n / 2))`` for a sentence of ``n`` words, the shared beginning
of two same-subject sentences is at least ``min(k(a), k(b))`` words, so a record keeps
"up to" keys for its prefixes of 3..k(b) words and an "own" key for its k(b)-word
prefix; a new sentence looks up its k(a)-word "up to" key and its shorter "own" keys.
Long sentences thus meet only records that share half of their words (or the first
``MAX_KEY_WORDS``), not every record that starts with "I want to". The prefix length is
bounded: ``k'(n) = min(k(n), MAX_KEY_WORDS)``, so a sentence is kept under at most
``MAX_KEY_WORDS - 1`` prefix keys (plus its frame key) and looks up at most as many,
however long it is. The argument above holds for ``k'`` too (the shared beginning is at
least ``min(k(a), k(b)) >= min(k'(a), k'(b))`` words), and it only ever finds more
candidates than the unbounded ``k``, never fewer: ``same_subject`` decides. Keys stored
before the bound (prefixes up to ``k(n)``) are still found by the bounded lookup, as
their "up to" keys include every bounded length. Beside those, every sentence with a frame
(``protocol.statements``: who it is about and which attribute) is kept and looked up
under ``f:<holder>|<attribute>``, read with its context sentence when it has none of its
own, so two statements on one attribute always meet however they begin. A statement with no
subject of its own whose context sentence has no frame looks up that sentence's keys.
"""

from __future__ import annotations

import re

from protocol import statements

MIN_SHARED_WORDS = 3
# the longest prefix a key is made of: a sentence has at most MAX_KEY_WORDS - 1 prefix
# keys (issue 21: 36 words made 18 keys); at least 6, so that two long sentences sharing
# only their first five words ("I keep a note about ...") still do not meet
MAX_KEY_WORDS = 6
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?", re.UNICODE)
TRAILING_TIME_WORDS = frozenset(
    {"now", "nowadays", "anymore", "again", "currently", "lately", "today", "these", "days"}
)


def words(text: str) -> list[str]:
    core, _markers = statements.strip_markers(statements.fold(text))
    tokens = [w.casefold() for w in _WORD.findall(core)]
    while tokens and tokens[-1] in TRAILING_TIME_WORDS:
        tokens.pop()
    return tokens


def _needed(n: int) -> int:
    """Shared words a sentence of ``n`` words needs with one at least as long."""
    return max(MIN_SHARED_WORDS, -(-n // 2))


def _key_words(n: int) -> int:
    """The prefix length a sentence of ``n`` words is keyed by: ``_needed``, bounded."""
    return min(_needed(n), MAX_KEY_WORDS)


def _explicit(subject: str) -> str:
    return "s:" + subject.casefold().strip()


def frame_key(text: str, context: str | None = None) -> list[str]:
    """The frame key of a sentence (read with its context sentence), if it has a frame."""
    own = statements.parse(text)
    if own.needs_context and context:
        own = statements.with_context(own, statements.parse(context))
    key = own.key
    return [] if key is None else ["f:" + key]


def stored_keys(text: str, subject: str | None, context: str | None = None) -> list[str]:
    """The index keys a record is kept under (empty: it can share no subject)."""
    if subject:
        return [_explicit(subject)]
    frame = frame_key(text, context)
    tokens = words(text)
    if len(tokens) <= MIN_SHARED_WORDS:
        return frame
    own = _key_words(len(tokens))
    keys = [f"u{k}:" + " ".join(tokens[:k]) for k in range(MIN_SHARED_WORDS, own + 1)]
    return [*frame, *keys, f"o{own}:" + " ".join(tokens[:own])]


def lookup_keys(text: str, subject: str | None, context: str | None = None) -> list[str]:
    """The keys under which every record on the same subject as this one is kept."""
    if subject:
        return [_explicit(subject)]
    frame = frame_key(text, context)
    if context and not frame and statements.parse(text).needs_context:
        # a follow-up of a sentence no frame reads is about that sentence: look where
        # that sentence's records are kept (``Statement.after``)
        frame = [k for k in lookup_keys(context, None) if not k.startswith("f:")]
    tokens = words(text)
    if len(tokens) <= MIN_SHARED_WORDS:
        return frame
    need = _key_words(len(tokens))
    keys = [f"u{need}:" + " ".join(tokens[:need])]
    return [
        *frame,
        *keys,
        *(f"o{k}:" + " ".join(tokens[:k]) for k in range(MIN_SHARED_WORDS, need)),
    ]


def same_subject(text_a: str, subject_a: str | None, text_b: str, subject_b: str | None) -> bool:
    if subject_a and subject_b:
        return subject_a.casefold().strip() == subject_b.casefold().strip()
    if subject_a or subject_b:
        return False
    a, b = words(text_a), words(text_b)
    shared = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        shared += 1
    if shared < MIN_SHARED_WORDS or shared * 2 < min(len(a), len(b)):
        return False
    return a[shared:] != b[shared:] and bool(a[shared:]) and bool(b[shared:])
