"""Relation terms: what links one record to others besides its words.

Invariants: relation terms are derived from a record's sealed content only (people it
names in its text or its context sentence, its project, its source episodes); they are
indexed beside its words, blinded the same way, and die with it. Supersedes and
conflict links come from record state, not from here.
"""

from __future__ import annotations

import re

from protocol.model import RecordContent
from protocol.retrieval.lexical import IRREGULAR, relation_term
from protocol.retrieval.task import Relation
from protocol.retrieval.text import searchable_text

_NAME = re.compile(r"(?<![\w'])([A-Z][a-z]+(?:-[A-Z][a-z]+)?)\b")
KIN = frozenset(
    """
    mother father sister brother wife husband partner son daughter grandmother grandfather
    grandma grandpa aunt uncle cousin niece nephew boss girlfriend boyfriend fiance fiancee
    """.split()
)
NOT_NAMES = frozenset(
    """
    I I'm I've I'd I'll My Our The A An This That These Those It It's We We're He She They
    Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April
    May June July August September October November December Mr Mrs Ms Dr No Yes Please
    """.split()
)


NAME_VERBS = frozenset(
    """
    is was has had lives lived works worked and said says likes liked loves loved hates
    wants wanted needs turns turned moved moves plays played studies studied prefers
    visited visits called calls got gets will would can could married met knows
    """.split()
)


def people(text: str) -> set[str]:
    """Names a sentence holds (people and places: capitalised words, a sentence's first
    word only when a verb like "is" follows it) and close family words."""
    found: set[str] = set()
    for i, match in enumerate(_NAME.finditer(text)):
        name = match.group(1)
        opens_sentence = match.start() == 0 or text[: match.start()].rstrip().endswith(
            (".", "!", "?")
        )
        after = text[match.end() :].split(None, 1)
        if name in NOT_NAMES or (
            i == 0 and opens_sentence and not (after and after[0].casefold() in NAME_VERBS)
        ):
            continue
        found.add(name.casefold())
    for word in re.findall(r"[a-z]+", text.casefold()):
        word = IRREGULAR.get(word, word)
        if word in KIN:
            found.add(word)
    return found


def relation_terms(content: RecordContent) -> list[str]:
    """The relation terms a record is indexed with, sorted."""
    out = {relation_term(Relation.PERSON.value, p) for p in people(searchable_text(content))}
    if content.project:
        out.add(relation_term(Relation.PROJECT.value, content.project))
    out.update(relation_term(Relation.EPISODE.value, e) for e in content.source_episode_ids)
    return sorted(out)


def relation_of(term: str) -> Relation:
    """Which relation a (clear) relation term stands for."""
    kind = term[1:].split(":", 1)[0]
    return Relation(kind)
