"""When two statements are about the same subject, so the newer one wins.

Invariant: ``same_subject`` is symmetric and deterministic. Two records share a
subject when both name the same explicit ``subject`` key; otherwise, when their
sentences (case-folded, final punctuation and trailing time words dropped) begin with
the same three or more words, that shared beginning covers at least half of the
shorter sentence, and what follows it differs: "I drink my coffee iced." and "I drink
my coffee hot now." share "i drink my coffee"; "I like tea." and "I like coffee." share
only two words and are not the same subject.
"""

from __future__ import annotations

import re

MIN_SHARED_WORDS = 3
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)?", re.UNICODE)
TRAILING_TIME_WORDS = frozenset(
    {"now", "nowadays", "anymore", "again", "currently", "lately", "today", "these", "days"}
)


def words(text: str) -> list[str]:
    tokens = [w.casefold() for w in _WORD.findall(text)]
    while tokens and tokens[-1] in TRAILING_TIME_WORDS:
        tokens.pop()
    return tokens


def index_key(text: str, subject: str | None) -> str | None:
    """A necessary condition for sharing a subject: records with different keys never do.

    Stores index records by this key (keyed-hashed where it is kept in plaintext) to
    find candidates without opening every record.
    """
    if subject:
        return "s:" + subject.casefold().strip()
    tokens = words(text)
    if len(tokens) < MIN_SHARED_WORDS + 1:
        return None
    return "p:" + " ".join(tokens[:MIN_SHARED_WORDS])


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
