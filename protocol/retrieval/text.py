"""What of a record the search indexes read: one function, so device and cloud index
(and embed) the same words.

Invariant: a record that took its subject from the user's previous sentence
(``context_text``) is found by that sentence's words too ("When is the school play?"
finds "No wait, it's on the 17th." said right after "The school play is on the 7th.").
"""

from __future__ import annotations

from protocol.model import RecordContent


def searchable_text(content: RecordContent) -> str:
    """The text a record is indexed and embedded by: its context sentence, then its own."""
    if content.context_text:
        return f"{content.context_text} {content.text}"
    return content.text
