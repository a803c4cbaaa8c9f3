"""The verbatim check behind "said".

Invariant: a record may be *said* only if its text is one whole sentence that the
user typed in that conversation. Only whitespace and the sentence's final
punctuation are normalised; case, words and inner punctuation must match exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])[\"'\u201d\u2019)]*\s+")
_FINAL_PUNCT = re.compile(r"[.!?\u2026]+[\"'\u201d\u2019)]*$")
_SPACE = re.compile(r"\s+")


class SaidVerdict(StrEnum):
    WHOLE_SENTENCE = "whole_sentence"
    FRAGMENT = "fragment"
    SEVERAL_SENTENCES = "several_sentences"
    NOT_TYPED = "not_typed"


@dataclass(frozen=True, slots=True)
class SaidCheck:
    verdict: SaidVerdict
    reason: str

    @property
    def ok(self) -> bool:
        return self.verdict is SaidVerdict.WHOLE_SENTENCE


def normalise(sentence: str) -> str:
    """Collapse whitespace and drop the final punctuation; nothing else changes."""
    collapsed = _SPACE.sub(" ", sentence).strip()
    return _FINAL_PUNCT.sub("", collapsed).rstrip()


# A period after a title or one of these ends no sentence: "My dentist is Dr. Park." is
# one sentence. ("St.", "etc." and "Jr." often do end one, so they are not here.)
ABBREVIATIONS = frozenset("dr mr mrs ms mx prof rev fr vs e.g i.e approx".split())
_LAST_WORD = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z.]*)\.$")


def split_sentences(text: str) -> list[str]:
    """Split typed text into sentences at ., !, ? or an ellipsis followed by space (never
    after a title or an abbreviation such as "Dr." or "e.g.")."""
    parts = [p.strip() for p in _SENTENCE_END.split(_SPACE.sub(" ", text).strip()) if p.strip()]
    out: list[str] = []
    for part in parts:
        if out and _ends_with_abbreviation(out[-1]):
            out[-1] = f"{out[-1]} {part}"
        else:
            out.append(part)
    return out


def _ends_with_abbreviation(sentence: str) -> bool:
    found = _LAST_WORD.search(sentence)
    return found is not None and found.group(1).casefold().rstrip(".") in ABBREVIATIONS


def is_question(sentence: str) -> bool:
    """A question asks; it says nothing to remember about the user (a closing quote or
    bracket after the question mark still makes it one)."""
    return sentence.rstrip().rstrip("\"'\u201d\u2019)").endswith("?")


def check_said(claim: str, typed: Iterable[str]) -> SaidCheck:
    """Decide whether ``claim`` is one whole sentence of the ``typed`` texts."""
    claimed = normalise(claim)
    if not claimed:
        return SaidCheck(SaidVerdict.NOT_TYPED, "the text is empty")
    if len(split_sentences(claim)) > 1:
        return SaidCheck(
            SaidVerdict.SEVERAL_SENTENCES,
            f"{claim!r} holds more than one sentence; keep them one at a time",
        )
    containing: str | None = None
    for text in typed:
        for sentence in split_sentences(text):
            whole = normalise(sentence)
            if whole == claimed:
                return SaidCheck(
                    SaidVerdict.WHOLE_SENTENCE, f"{claim!r} is a sentence the user typed"
                )
            if containing is None and claimed in whole:
                containing = sentence
    if containing is not None:
        return SaidCheck(
            SaidVerdict.FRAGMENT,
            f"{claim!r} is only a fragment of the sentence {containing!r} the user typed; "
            "only a whole sentence can be kept as said",
        )
    return SaidCheck(
        SaidVerdict.NOT_TYPED,
        f"{claim!r} is not a sentence the user typed in this conversation "
        "(a paraphrase or a claim is not the user's words)",
    )
