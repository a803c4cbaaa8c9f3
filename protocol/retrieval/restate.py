"""A question restated as the statement that would answer it, for the vector index.

Invariants:
- ``restate`` is a few general rules of English word order, not a list of this
  evaluation's sentences: drop the question word and the question mark, move the
  auxiliary after its subject ("where do I live?" -> "I live", "what is my cat
  called?" -> "my cat is called"); a query that is not a question is returned as is.
- It only ever feeds the query embedding (averaged with the question's own, so the
  question's words still count); lexical search reads the query unchanged.
- Pure: no I/O.
"""

from __future__ import annotations

import re

WH = frozenset({"what", "where", "when", "who", "whom", "whose", "which", "how", "why"})
AUX = frozenset(
    {
        "do",
        "does",
        "did",
        "is",
        "are",
        "was",
        "were",
        "am",
        "have",
        "has",
        "had",
        "can",
        "could",
        "should",
        "would",
        "will",
        "must",
    }
)
DO = frozenset({"do", "does", "did"})
SUBJECTS = frozenset({"i", "we", "you", "he", "she", "they", "it"})
HOW_MODIFIERS = frozenset({"often", "many", "much", "long", "old", "far"})
_WORD = re.compile(r"[\w'\u2019-]+")


def _subject_end(words: list[str]) -> int:
    """How many words the subject after an auxiliary takes: a pronoun is one; "my X",
    "the X", "X's Y" run to the next word that is not part of the noun phrase (kept
    short: at most three words)."""
    if not words:
        return 0
    if words[0].lower() in SUBJECTS:
        return 1
    if words[0].lower() in {"my", "our", "the", "your", "his", "her", "their"}:
        n = 2
        while n < min(len(words), 3) and words[n - 1].lower().endswith(("'s", "\u2019s")):
            n += 1
        return min(n, len(words))
    return 1


def restate(query: str) -> str:
    text = query.strip()
    if not text.endswith("?"):
        return text
    words = _WORD.findall(text)
    if not words:
        return text
    lead = 0
    if words[0].lower() in WH:
        lead = 1
        if words[0].lower() == "how" and len(words) > 1 and words[1].lower() in HOW_MODIFIERS:
            lead = 2
        elif (
            words[0].lower() in {"which", "what", "whose"}
            and len(words) > 1
            and (words[1].lower() not in AUX)
        ):
            lead = 2  # "which city is ...": the asked-for noun goes with the question word
    if lead == 0:
        return text  # a yes/no or advice question: its words already say what it is about
    rest = words[lead:]
    if not rest or rest[0].lower() not in AUX:
        return " ".join(rest) if rest else text
    aux, after = rest[0].lower(), rest[1:]
    n = _subject_end(after)
    subject, tail = after[:n], after[n:]
    moved = subject + ([] if aux in DO else [aux]) + tail
    return " ".join(moved) if moved else text
