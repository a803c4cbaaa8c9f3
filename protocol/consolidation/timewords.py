"""The words and patterns of time in English: months, weekdays, seasons, holidays,
numbers, and the compiled patterns of tense ("used to", "had been"), routine, "for
now" and durations ("for the next two weeks").

Invariants:
- Data only: every pattern is compiled once, case-insensitive, over text folded as
  ``protocol.consolidation.lexicon.fold`` folds it; nothing here reads a sentence.
"""

from __future__ import annotations

import re

MONTHS = (
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
)  # fmt: skip

MONTH_ABBR = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8,
    "sep": 9, "sept": 9, "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip

WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "a": 1, "an": 1,
    "a couple of": 2, "a couple": 2, "couple of": 2, "a few": 3, "few": 3, "several": 3,
}  # fmt: skip

ORDINAL_WORDS = {
    "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6,
    "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12,
}  # fmt: skip

SEASONS = ("spring", "summer", "autumn", "fall", "winter")

# Fixed-date holidays, so "at Christmas" can be a day; movable feasts stay seasonal.
HOLIDAYS = {
    "christmas eve": (12, 24),
    "christmas day": (12, 25),
    "christmas": (12, 25),
    "xmas": (12, 25),
    "new year's eve": (12, 31),
    "new year's day": (1, 1),
    "halloween": (10, 31),
    "valentine's day": (2, 14),
}

MONTH = "|".join(MONTHS)

MONTH_ANY = "|".join([*MONTHS, *sorted(MONTH_ABBR, key=len, reverse=True)])

WEEKDAY = "|".join(WEEKDAYS)

SEASON = "|".join(SEASONS)

NUM = (
    r"(?:\d{1,3}|a couple of|a couple|couple of|a few|several|an|a|"
    + "|".join(w for w in NUMBER_WORDS if " " not in w and w not in ("a", "an", "few"))
    + ")"
)

UNIT = r"(?:minute|hour|day|night|week|fortnight|month|year)s?"

_ORD = "|".join(ORDINAL_WORDS)

DAYNUM = rf"(?:\d{{1,2}}(?:st|nd|rd|th)?|{_ORD})"

HOLIDAY = "|".join(re.escape(h) for h in sorted(HOLIDAYS, key=len, reverse=True))

_ADVERB = (
    r"(?:also|just|then|once|really|never|finally|first|recently|already|still|only|"
    r"actually|even|ever|always|previously|originally|eventually|briefly)"
)

_IRREGULAR_PAST = (
    r"(?:was|were|had|did|went|grew|got|left|quit|lost|met|bought|sold|broke|took|came|"
    r"saw|made|began|spent|ate|drank|wrote|taught|ran|flew|knew|thought|told|gave|fell|"
    r"felt|found|kept|built|paid|sent|sat|stood|won|wore|drove|rode|swam|sang|slept|"
    r"became|brought|caught|fought|held|heard|hid|led|meant|read|said|shut|split|threw|"
    r"understood|woke|forgot|chose)"
)

SINCE_WORDS = frozenset({"since", "from", "after", "between", "starting", "beginning"})

UNTIL_WORDS = frozenset({"until", "till", "til", "through", "thru", "before", "by"})

RANGE_END_WORDS = frozenset({"to", "and"})

HOLIDAY_PREPOSITIONS = frozenset(
    {"at", "on", "for", "over", "around", "during", "by", "until", "till", "since", "after"}
    | {"before", "from"}
)

MONTH_PREPOSITIONS = frozenset(
    {"in", "of", "during", "around", "early", "late", "mid", "this", "next", "last"}
    | SINCE_WORDS
    | UNTIL_WORDS
    | RANGE_END_WORDS
)


def compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# Whole-sentence cues.
USED_TO = compiled(
    r"(?<!\bam )(?<!'m )(?<!\bare )(?<!'re )(?<!\bis )(?<!'s )(?<!\bget )(?<!\bgot )"
    r"(?<!\bgetting )(?<!\bbe )(?<!\bbeen )(?<!\bbecome )\bused to\b|\bdid(?:n't| not)? use to\b"
)

CHILDHOOD = compiled(
    r"\b(?:when|while) (?:i|we) (?:was|were) (?:a |an )?(?:little |small |young )?"
    r"(?:kid|kids|child|children|boy|girl|teen|teens|teenager|teenagers|student|students|"
    r"young|younger|little|baby|babies|at school|in school|in college|at university|"
    r"\d{1,2}|" + "|".join(w for w in NUMBER_WORDS if w.isalpha() and len(w) > 2) + r")\b"
    r"|\bas (?:a |an )?(?:kid|child|teenager|teen|student|boy|girl|youngster)\b"
    r"|\bgrowing up\b|\bback then\b|\bback in the day\b|\bin the past\b|\bformerly\b"
    r"|\bpreviously\b|\bonce upon a time\b|\bin my (?:childhood|youth|teens|twenties|"
    r"thirties|forties|fifties|school days|student days)\b"
)

PAST_VERB = compiled(
    r"\b(?:i|we|he|she|they|you|it|my \w+|our \w+)\s+(?:" + _ADVERB + r"\s+)?"
    r"(" + _IRREGULAR_PAST + r"|[a-z]+(?:[^e\W]ed|ied))\b"
    r"|\b(?:was|were|wasn't|weren't|didn't|hadn't)\b"
)

PERFECT = compiled(
    r"\b(?:have|has|'ve|haven't|hasn't)\s+(?:" + _ADVERB + r"\s+)?"
    r"(?:been|had|lived|known|worked|gone|done|seen|taken|made|grown|become|kept|run|spent|"
    r"eaten|drunk|[a-z]+(?:[^e\W]ed|ied))\b"
)

PAST_PERFECT = compiled(r"\bhad\s+(?:" + _ADVERB + r"\s+)?(?:been|[a-z]+(?:[^e\W]ed|ied))\b")

FUTURE = compiled(
    r"\b(?:will|won't|'ll|shall|going to|gonna|plan to|planning to|about to|intend to|"
    r"hope to|want to|would like to|'d like to)\b"
)

ROUTINE = compiled(
    r"\b(?:every|each|usually|always|often|normally|typically|generally|daily|weekly|"
    r"most (?:days|mornings|evenings|nights|weekends)|on (?:" + WEEKDAY + r")s)\b"
)

FOR_NOW = compiled(
    r"\b(?:for now|for the time being|for the moment|currently|at the moment|right now|"
    r"at present|these days|nowadays|lately|temporarily|for a while|until further notice|"
    r"at this point|in the meantime|for the foreseeable future)\b"
)

THIS_PERIOD = compiled(r"\bthis (week|month|year)\b")

SEASONAL = compiled(
    r"\b(?:every|each)\s+(?:single\s+)?(?:"
    + SEASON
    + r"|"
    + HOLIDAY
    + r"|easter|thanksgiving|hanukkah|diwali|ramadan|new year|holiday season|holidays?|"
    r"vacation|year|season|birthday|" + MONTH + r")\b"
    r"|\b(?:in|during|over|for)\s+the\s+(?:school\s+)?holidays\b"
    r"|\b(?:summers|winters|springs|autumns)\b"
    r"|\b(?:annually|yearly|once a year|twice a year|seasonal|seasonally)\b"
    r"|\b(?:at|over|around|during)\s+(?:easter|thanksgiving|hanukkah|diwali|ramadan)\b"
)

SINCE_CLAUSE = compiled(r"\bsince (?:i|we|he|she|they|my \w+) \w+(?: \w+){0,3}")

RECURRING_DATE = compiled(r"\b(?:birthday|anniversary|name day)\s+(?:is|falls)\b")

BORN = compiled(r"\bborn\b")

# Durations: "for the next two weeks", "for the past three years", "for two weeks".
FOR_NEXT = compiled(
    rf"\b(?:for|over|during)\s+(?:the\s+)?(?:next|coming|following)\s+(?:({NUM})\s+)?"
    rf"({UNIT})\b|\bfor\s+another\s+({NUM}\s+)?({UNIT})\b"
)

FOR_PAST = compiled(rf"\bfor\s+(?:the\s+)?(?:past|last)\s+(?:({NUM})\s+)?({UNIT})\b")

FOR_PLAIN = compiled(
    rf"\bfor\s+(?:about\s+|around\s+|almost\s+|nearly\s+|over\s+)?({NUM})\s+"
    r"((?:day|week|fortnight|month|year)s?)\b"
)
