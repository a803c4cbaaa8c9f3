"""Keyword lexicons shared by the area and sensitivity rules.

Invariants: pure and deterministic. Text is compared lowercase, with curly apostrophes
made straight and runs of whitespace collapsed (``fold``). A lexicon entry matches on
word boundaries only: ``"loan"`` matches "loan" and "loans" (a plain entry also takes a
simple plural ``s``/``es``), ``"allerg*"`` matches every word starting with "allerg",
and an entry with spaces matches that phrase with any whitespace between its words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SPACE = re.compile(r"\s+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


def fold(text: str) -> str:
    """Lowercase, straight apostrophes, single spaces: the form every rule reads."""
    return _SPACE.sub(" ", text.translate(_APOSTROPHES).lower()).strip()


def _entry(word: str) -> str:
    prefix = word.endswith("*")
    stem = word.rstrip("*")
    body = r"\s+".join(re.escape(part) for part in stem.split())
    if prefix:
        return body + r"[\w'-]*"
    return body + r"(?:s|es)?"


def compile_lexicon(words: Iterable[str]) -> re.Pattern[str]:
    """One pattern matching any entry on word boundaries (longest entries first)."""
    entries = sorted(set(words), key=lambda w: (-len(w), w))
    if not entries:
        raise ValueError("a lexicon needs at least one entry")
    return re.compile(r"(?<![\w'-])(?:" + "|".join(_entry(w) for w in entries) + r")(?![\w-])")
