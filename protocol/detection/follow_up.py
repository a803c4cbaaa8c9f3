"""Corrections the detector must not miss: a sentence that corrects what the user just
said is a memory candidate, whatever the model scores it.

Invariants: pure; the device (when it marks candidates) and the cloud (when it re-reads
a marked sentence) apply the same rule to the same sentences. A sentence qualifies only
if it carries a correction cue (``protocol.statements``: "Actually,", "No wait,",
"Sorry,", "Correction:", "Scratch that,", "I meant", "…, not X", "no longer", "we
switched", "I moved", or a value said to be so "now") and is not a question, and it
either has a subject of its own or
follows, within ``CONTEXT_REACH`` sentences of the same conversation, a sentence that
has one (so "No wait, it's on the 17th." after "The school play is on the 7th." is
kept, and a lone "No wait." is not).
"""

from __future__ import annotations

from collections.abc import Sequence

from protocol import statements
from protocol.sentences import is_question

CONTEXT_REACH = 3
_CHANGE = frozenset({"switched", "changed", "moved", "anymore", "longer", "instead"})
_CUES = frozenset(statements.CORRECTION_MARKERS) - {"wait", "no", "nope", "oops"}


def correction_cued(sentence: str) -> bool:
    """Whether the sentence says that something said before is no longer so."""
    if is_question(sentence):
        return False
    read = statements.parse(sentence)
    return bool(
        set(read.markers) & _CUES
        or (read.markers and read.value and set(read.markers) & statements.STRONG_MARKERS)
        or read.rejected
        or set(read.change_words) & _CHANGE
        or (read.framed and read.value and "now" in read.change_words)  # "… is on X now"
    )


def has_context(previous: Sequence[str]) -> bool:
    """Whether one of the last ``CONTEXT_REACH`` sentences can give a subject."""
    return any(not is_question(s) and statements.parse(s).framed for s in previous[-CONTEXT_REACH:])


def is_correction(sentence: str, previous: Sequence[str]) -> bool:
    """The rule of the module: ``previous`` are the conversation's sentences before it."""
    if not correction_cued(sentence):
        return False
    read = statements.parse(sentence)
    return read.framed or (read.needs_context and has_context(previous))
