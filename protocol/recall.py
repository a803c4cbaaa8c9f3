"""Placeholder recall: plain word match shared by device and cloud.

Invariant: scoring is deterministic; callers must re-check each hit against the
record's authoritative state before returning it (a later issue replaces this).
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> set[str]:
    """Lower-cased words of a text."""
    return {w.casefold() for w in _WORD.findall(text)}


def score(query: str, text: str) -> int:
    """How many distinct query words the text contains."""
    return len(words(query) & words(text))
