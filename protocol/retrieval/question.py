"""Is a question factual (about the world) or personal (about the user)?

Invariant: a query that refers to the user (I, me, my, we, ...) is personal; any other
question is factual, and for it the user's opinions are left out (opinion filter).
A caller that knows better passes ``Task.factual`` explicitly.
"""

from __future__ import annotations

from protocol.retrieval.lexical import words

FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours"})


def is_factual_question(query: str) -> bool:
    return not FIRST_PERSON.intersection(words(query))
