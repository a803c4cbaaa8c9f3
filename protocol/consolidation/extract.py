"""From one sentence the user typed to the structured fields of a memory record.

Invariants:
- An ``Extractor`` is a pure function of the sentence, the moment it was said and the
  on-device detector's hints: no clock, no I/O, no randomness. Any object with a
  ``name`` and this ``extract`` method is one (the rule set here, the ONNX detector,
  later a language model).
- The detector's hints are respected: a hinted content type is taken as it is, a hinted
  time kind is used when the sentence itself names no time, and a hinted sensitive class
  is never lowered (``sensitivity.sensitivity_of``). Rules only fill in and raise.
- ``ChainExtractor`` runs its extractors in order; each sees the caller's hints overlaid
  with the previous extractor's answer, so a later extractor refines an earlier one.
  The chain never lowers sensitivity: if an earlier step named a sensitive class and
  the last says ``normal``, the earlier class stands.
- Nothing here decides the epistemic state: an extraction of a typed sentence is what
  the user said; whether it may be kept as *said* is ``protocol.sentences``' call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from protocol.consolidation.areas import life_areas
from protocol.consolidation.lexicon import fold
from protocol.consolidation.sensitivity import sensitivity_of
from protocol.consolidation.timeexpr import TimeReading, read_time
from protocol.model import ContentType, LifeArea, Sensitivity, TimeKind


@dataclass(frozen=True, slots=True)
class Hints:
    """What the on-device detector said (all optional)."""

    content_type: ContentType | None = None
    sensitivity: Sensitivity | None = None
    time_kind: TimeKind | None = None


@dataclass(frozen=True, slots=True)
class Extraction:
    content_type: ContentType
    time: TimeReading
    life_areas: tuple[LifeArea, ...]
    sensitivity: Sensitivity
    subject: str | None  # an explicit subject key; None lets protocol.subjects decide
    type_cue: str | None = None  # the words that decided the content type (None: a hint)


class Extractor(Protocol):
    name: str

    def extract(self, sentence: str, *, said_at: datetime, hints: Hints) -> Extraction: ...


_RELATIONS = (
    r"(?:wife|husband|partner|spouse|boyfriend|girlfriend|fianc[eé]e?|friend|best friend|"
    r"brother|sister|sibling|mother|father|mom|mum|dad|parents?|son|daughter|kids?|"
    r"children|child|baby|cousin|uncle|aunt|grandma|grandpa|grandmother|grandfather|"
    r"grandparents?|niece|nephew|mother-in-law|father-in-law|boss|colleague|coworker|"
    r"neighbou?r|roommate|flatmate|mentor|team ?mate|ex)"
)
_SUBJECT_RELATION = re.compile(rf"^(?:and\s+)?(?:my|our)\s+(?:\w+\s+)?{_RELATIONS}s?\b")
_OPINION_LEAD = re.compile(
    r"^(?:i think|i believe|i feel that|in my opinion|in my view|personally,? i think|"
    r"i reckon|i'm convinced|i am convinced|i find that)\b"
)
# Checked in this order; the first rule that matches decides.
TYPE_RULES: tuple[tuple[ContentType, re.Pattern[str]], ...] = (
    (
        ContentType.CONSTRAINT,
        re.compile(
            r"\b(?:allergic|allergy|intolerant|can't|cannot|can not|mustn't|must not|"
            r"not allowed|unable to|shouldn't eat|avoid|don't eat|do not eat|never eat|"
            r"don't drink|do not drink|never drink)\b"
        ),
    ),
    (
        ContentType.GOAL,
        re.compile(
            r"\b(?:want to|wants to|plan to|planning to|plan is|goal|aim to|aiming to|"
            r"hope to|hoping to|trying to|try to|intend to|going to start|resolution|"
            r"would like to|'d like to|would love to|'d love to|dream of|dream is|"
            r"saving up for|working towards?)\b"
        ),
    ),
    (
        ContentType.PREFERENCE,
        re.compile(
            r"\b(?:like|likes|liked|love|loves|prefer|prefers|preferred|favou?rite|"
            r"enjoy|enjoys|hate|hates|dislike|dislikes|can't stand|rather|fond of|"
            r"fan of|adore|crave)\b"
        ),
    ),
    # A plain "don't" or "never" after the preferences: "I don't like olives" is one.
    (ContentType.CONSTRAINT, re.compile(r"\b(?:don't|do not|never|won't|will not)\b")),
    (
        ContentType.ROUTINE,
        re.compile(
            r"\b(?:every|each|usually|always|often|normally|typically|generally|daily|"
            r"weekly|monthly|most (?:days|mornings|evenings|nights)|routine|habit|"
            r"on (?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays|"
            r"weekdays|weekends))\b"
        ),
    ),
    (ContentType.RELATIONSHIP, re.compile(rf"\b(?:my|our)\s+(?:\w+\s+)?{_RELATIONS}s?\b")),
    (
        ContentType.OPINION,
        re.compile(
            r"\b(?:i think|i believe|in my opinion|in my view|i feel that|i reckon|"
            r"overrated|underrated|is the best|are the best|is the worst|are the worst)\b"
        ),
    ),
)


def content_type_of(sentence: str, time: TimeReading) -> tuple[ContentType, str | None]:
    """The content type from keywords, and the words that decided it."""
    text = fold(sentence)
    lead = _SUBJECT_RELATION.search(text)
    if lead is not None:  # "My wife loves sushi" is about the wife
        return ContentType.RELATIONSHIP, lead.group(0)
    opinion = _OPINION_LEAD.search(text)
    if opinion is not None:  # "I think I prefer tea" is still an opinion
        return ContentType.OPINION, opinion.group(0)
    for content_type, pattern in TYPE_RULES:
        hit = pattern.search(text)
        if hit is not None:
            return content_type, hit.group(0)
    if time.time_kind is TimeKind.ONE_OFF:
        return ContentType.EVENT, time.cue
    return ContentType.PERSONAL_FACT, None


class RuleExtractor:
    """Keyword and date rules; needs no model, so it runs anywhere (docs/consolidation-rules.md)."""

    name = "rules-v1"

    def extract(self, sentence: str, *, said_at: datetime, hints: Hints) -> Extraction:
        time = read_time(sentence, said_at=said_at, hint=hints.time_kind)
        if hints.content_type is not None:
            content_type, cue = hints.content_type, None
        else:
            content_type, cue = content_type_of(sentence, time)
        return Extraction(
            content_type=content_type,
            time=time,
            life_areas=tuple(life_areas(sentence, content_type)),
            sensitivity=sensitivity_of(sentence, hints.sensitivity),
            subject=None,  # protocol.subjects keys on the sentence itself
            type_cue=cue,
        )


class ChainExtractor:
    """Runs extractors in order; each later one sees the earlier answer as its hints."""

    def __init__(self, extractors: Sequence[Extractor]) -> None:
        if not extractors:
            raise ValueError("a chain needs at least one extractor")
        self.extractors = tuple(extractors)
        self.name = "chain(" + ",".join(e.name for e in self.extractors) + ")"

    def extract(self, sentence: str, *, said_at: datetime, hints: Hints) -> Extraction:
        result: Extraction | None = None
        sensitive: Sensitivity | None = (
            hints.sensitivity if hints.sensitivity not in (None, Sensitivity.NORMAL) else None
        )
        for extractor in self.extractors:
            step_hints = hints
            if result is not None:
                step_hints = Hints(
                    content_type=result.content_type,
                    sensitivity=result.sensitivity,
                    time_kind=result.time.time_kind,
                )
            result = extractor.extract(sentence, said_at=said_at, hints=step_hints)
            if sensitive is None and result.sensitivity is not Sensitivity.NORMAL:
                sensitive = result.sensitivity
        assert result is not None
        if result.sensitivity is Sensitivity.NORMAL and sensitive is not None:
            result = replace(result, sensitivity=sensitive)
        return result
