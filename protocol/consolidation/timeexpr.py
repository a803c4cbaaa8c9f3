"""Valid time and time kind from the dates and tenses of one English sentence.

Invariants:
- Pure and deterministic: every date is resolved relative to ``said_at`` (the moment
  the user typed the sentence, timezone-aware, read in UTC); nothing reads a clock.
- ``read_time`` never raises on any text: a date that cannot be built (the 31st of
  February, a year out of range) is skipped as if it were not there.
- ``valid_until`` is never before ``valid_from`` (a contradictory bound is dropped),
  a "for now" reading always has an ``expected_end`` (from the phrase, else
  ``timeline.DEFAULT_FOR_NOW`` after ``said_at``; none only at the calendar's end), and
  "next <X>" always lies after ``said_at``.
- Days are whole UTC days: a one-off day runs from 00:00 to 23:59:59 UTC. "until" a
  named day includes that day; "until" a month, season or year ends at its start (a
  "still doing this?" question asked a little early costs less than a stale record).
- ``cue`` holds the words (lowercased) that decided the time kind, or None when nothing
  in the sentence did (the hint or the permanent default decided).

The order the rules are tried in, and the known limits, are in
``docs/consolidation-rules.md``.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from protocol.consolidation.lexicon import fold
from protocol.model import MAX_TEXT_CHARS, TimeKind
from protocol.timeline import DEFAULT_FOR_NOW

Direction = Literal["future", "past"]
Role = Literal["anchor", "since", "until"]


@dataclass(frozen=True, slots=True)
class TimeReading:
    time_kind: TimeKind
    valid_from: datetime | None
    valid_until: datetime | None
    expected_end: datetime | None
    cue: str | None  # the words that decided it, for "how do you know this?"


# ---------------------------------------------------------------------------------------
# Vocabulary

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

_MONTH = "|".join(MONTHS)
_MONTH_ANY = "|".join([*MONTHS, *sorted(MONTH_ABBR, key=len, reverse=True)])
_WEEKDAY = "|".join(WEEKDAYS)
_SEASON = "|".join(SEASONS)
_NUM = (
    r"(?:\d{1,3}|a couple of|a couple|couple of|a few|several|an|a|"
    + "|".join(w for w in NUMBER_WORDS if " " not in w and w not in ("a", "an", "few"))
    + ")"
)
_UNIT = r"(?:minute|hour|day|night|week|fortnight|month|year)s?"
_ORD = "|".join(ORDINAL_WORDS)
_DAYNUM = rf"(?:\d{{1,2}}(?:st|nd|rd|th)?|{_ORD})"
_HOLIDAY = "|".join(re.escape(h) for h in sorted(HOLIDAYS, key=len, reverse=True))
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

_SINCE_WORDS = frozenset({"since", "from", "after", "between", "starting", "beginning"})
_UNTIL_WORDS = frozenset({"until", "till", "til", "through", "thru", "before", "by"})
_RANGE_END_WORDS = frozenset({"to", "and"})
_HOLIDAY_PREPOSITIONS = frozenset(
    {"at", "on", "for", "over", "around", "during", "by", "until", "till", "since", "after"}
    | {"before", "from"}
)
_MONTH_PREPOSITIONS = frozenset(
    {"in", "of", "during", "around", "early", "late", "mid", "this", "next", "last"}
    | _SINCE_WORDS
    | _UNTIL_WORDS
    | _RANGE_END_WORDS
)


def _rx(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


# Whole-sentence cues.
_USED_TO = _rx(
    r"(?<!\bam )(?<!'m )(?<!\bare )(?<!'re )(?<!\bis )(?<!'s )(?<!\bget )(?<!\bgot )"
    r"(?<!\bgetting )(?<!\bbe )(?<!\bbeen )(?<!\bbecome )\bused to\b|\bdid(?:n't| not)? use to\b"
)
_CHILDHOOD = _rx(
    r"\b(?:when|while) (?:i|we) (?:was|were) (?:a |an )?(?:little |small |young )?"
    r"(?:kid|kids|child|children|boy|girl|teen|teens|teenager|teenagers|student|students|"
    r"young|younger|little|baby|babies|at school|in school|in college|at university|"
    r"\d{1,2}|" + "|".join(w for w in NUMBER_WORDS if w.isalpha() and len(w) > 2) + r")\b"
    r"|\bas (?:a |an )?(?:kid|child|teenager|teen|student|boy|girl|youngster)\b"
    r"|\bgrowing up\b|\bback then\b|\bback in the day\b|\bin the past\b|\bformerly\b"
    r"|\bpreviously\b|\bonce upon a time\b|\bin my (?:childhood|youth|teens|twenties|"
    r"thirties|forties|fifties|school days|student days)\b"
)
_PAST_VERB = _rx(
    r"\b(?:i|we|he|she|they|you|it|my \w+|our \w+)\s+(?:" + _ADVERB + r"\s+)?"
    r"(" + _IRREGULAR_PAST + r"|[a-z]+(?:[^e\W]ed|ied))\b"
    r"|\b(?:was|were|wasn't|weren't|didn't|hadn't)\b"
)
_PERFECT = _rx(
    r"\b(?:have|has|'ve|haven't|hasn't)\s+(?:" + _ADVERB + r"\s+)?"
    r"(?:been|had|lived|known|worked|gone|done|seen|taken|made|grown|become|kept|run|spent|"
    r"eaten|drunk|[a-z]+(?:[^e\W]ed|ied))\b"
)
_PAST_PERFECT = _rx(r"\bhad\s+(?:" + _ADVERB + r"\s+)?(?:been|[a-z]+(?:[^e\W]ed|ied))\b")
_FUTURE = _rx(
    r"\b(?:will|won't|'ll|shall|going to|gonna|plan to|planning to|about to|intend to|"
    r"hope to|want to|would like to|'d like to)\b"
)
_ROUTINE = _rx(
    r"\b(?:every|each|usually|always|often|normally|typically|generally|daily|weekly|"
    r"most (?:days|mornings|evenings|nights|weekends)|on (?:" + _WEEKDAY + r")s)\b"
)
_FOR_NOW = _rx(
    r"\b(?:for now|for the time being|for the moment|currently|at the moment|right now|"
    r"at present|these days|nowadays|lately|temporarily|for a while|until further notice|"
    r"at this point|in the meantime|for the foreseeable future)\b"
)
_THIS_PERIOD = _rx(r"\bthis (week|month|year)\b")
_SEASONAL = _rx(
    r"\b(?:every|each)\s+(?:single\s+)?(?:"
    + _SEASON
    + r"|"
    + _HOLIDAY
    + r"|easter|thanksgiving|hanukkah|diwali|ramadan|new year|holiday season|holidays?|"
    r"vacation|year|season|birthday|" + _MONTH + r")\b"
    r"|\b(?:in|during|over|for)\s+the\s+(?:school\s+)?holidays\b"
    r"|\b(?:summers|winters|springs|autumns)\b"
    r"|\b(?:annually|yearly|once a year|twice a year|seasonal|seasonally)\b"
    r"|\b(?:at|over|around|during)\s+(?:easter|thanksgiving|hanukkah|diwali|ramadan)\b"
)
_SINCE_CLAUSE = _rx(r"\bsince (?:i|we|he|she|they|my \w+) \w+(?: \w+){0,3}")
_RECURRING_DATE = _rx(r"\b(?:birthday|anniversary|name day)\s+(?:is|falls)\b")
_BORN = _rx(r"\bborn\b")

# Durations: "for the next two weeks", "for the past three years", "for two weeks".
_FOR_NEXT = _rx(
    rf"\b(?:for|over|during)\s+(?:the\s+)?(?:next|coming|following)\s+(?:({_NUM})\s+)?"
    rf"({_UNIT})\b|\bfor\s+another\s+({_NUM}\s+)?({_UNIT})\b"
)
_FOR_PAST = _rx(rf"\bfor\s+(?:the\s+)?(?:past|last)\s+(?:({_NUM})\s+)?({_UNIT})\b")
_FOR_PLAIN = _rx(
    rf"\bfor\s+(?:about\s+|around\s+|almost\s+|nearly\s+|over\s+)?({_NUM})\s+"
    r"((?:day|week|fortnight|month|year)s?)\b"
)


# ---------------------------------------------------------------------------------------
# Calendar arithmetic


@dataclass(frozen=True, slots=True)
class _Span:
    start: date
    end: date  # the last day, inclusive

    @property
    def one_day(self) -> bool:
        return self.start == self.end


def _midnight(d: date) -> datetime:
    return datetime.combine(d, time(0, 0), tzinfo=UTC)


def _end_of_day(d: date) -> datetime:
    return datetime.combine(d, time(23, 59, 59), tzinfo=UTC)


def _month_span(year: int, month: int) -> _Span:
    return _Span(date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]))


def _year_span(year: int) -> _Span:
    return _Span(date(year, 1, 1), date(year, 12, 31))


def _add_months(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(d.day, calendar.monthrange(year, month + 1)[1]))


def _week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _season_span(year: int, season: str) -> _Span:
    if season == "winter":
        feb_end = calendar.monthrange(year + 1, 2)[1]
        return _Span(date(year, 12, 1), date(year + 1, 2, feb_end))
    first = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9}[season]
    return _Span(date(year, first, 1), _month_span(year, first + 2).end)


def _number(word: str | None) -> int:
    if not word:
        return 1
    word = word.strip()
    return int(word) if word.isdigit() else NUMBER_WORDS.get(word, 1)


def _shift(at: datetime, n: int, unit: str) -> datetime:
    unit = unit.rstrip("s")
    if unit == "minute":
        return at + timedelta(minutes=n)
    if unit == "hour":
        return at + timedelta(hours=n)
    if unit in ("day", "night"):
        return at + timedelta(days=n)
    if unit == "week":
        return at + timedelta(weeks=n)
    if unit == "fortnight":
        return at + timedelta(weeks=2 * n)
    months = n if unit == "month" else 12 * n
    shifted = _add_months(at.date(), months)
    return datetime.combine(shifted, at.timetz())


def _shift_span(at: datetime, n: int, unit: str) -> _Span:
    """The day, month or year that lies ``n`` units from ``at`` (precision by unit)."""
    d = _shift(at, n, unit).date()
    unit = unit.rstrip("s")
    if unit == "month":
        return _month_span(d.year, d.month)
    if unit == "year":
        return _year_span(d.year)
    return _Span(d, d)


# ---------------------------------------------------------------------------------------
# Date references found in the text


@dataclass(frozen=True, slots=True)
class _Ref:
    start: int
    end: int
    cue: str
    kind: str  # day | month_day | day_only | month | year | weekday | season | span
    year: int | None = None
    month: int | None = None
    day: int | None = None
    name: str | None = None  # weekday or season
    qualifier: str | None = None  # this | next | last | on | None
    span: _Span | None = None  # already resolved (relative days, offsets)
    direction: Direction | None = None  # fixed by the words ("ago", "yesterday")
    generic: bool = False  # "in the summer", "at Christmas": seasonal unless tensed
    role: Role = "anchor"


def _day_of(word: str) -> int:
    word = re.sub(r"(?:st|nd|rd|th)$", "", word) if word[:1].isdigit() else word
    return int(word) if word.isdigit() else ORDINAL_WORDS[word]


def _month_of(word: str) -> int:
    word = word.rstrip(".")
    return MONTHS.index(word) + 1 if word in MONTHS else MONTH_ABBR[word]


def _year_of(text: str | None) -> int | None:
    return int(text) if text else None


Builder = Callable[[re.Match[str], datetime], _Ref | None]


def _ref(
    m: re.Match[str],
    kind: str,
    *,
    year: int | None = None,
    month: int | None = None,
    day: int | None = None,
    name: str | None = None,
    qualifier: str | None = None,
    span: _Span | None = None,
    direction: Direction | None = None,
    generic: bool = False,
) -> _Ref:
    return _Ref(
        m.start(),
        m.end(),
        m.group(0),
        kind,
        year=year,
        month=month,
        day=day,
        name=name,
        qualifier=qualifier,
        span=span,
        direction=direction,
        generic=generic,
    )


def _iso(m: re.Match[str], now: datetime) -> _Ref | None:
    day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return _ref(m, "span", span=_Span(day, day))


def _day_month(m: re.Match[str], now: datetime) -> _Ref | None:
    return _ref(
        m,
        "month_day",
        day=_day_of(m.group(1)),
        month=_month_of(m.group(2)),
        year=_year_of(m.group(3)),
    )


def _month_day(m: re.Match[str], now: datetime) -> _Ref | None:
    return _ref(
        m,
        "month_day",
        month=_month_of(m.group(1)),
        day=_day_of(m.group(2) or m.group(3)),
        year=_year_of(m.group(4)),
    )


def _holiday(m: re.Match[str], now: datetime) -> _Ref | None:
    month, day = HOLIDAYS[m.group(2)]
    qualifier = m.group(1)
    if qualifier is None and _word_before(m.string, m.start()) not in _HOLIDAY_PREPOSITIONS:
        return None  # "I love Christmas" names no occurrence
    return _ref(m, "month_day", month=month, day=day, qualifier=qualifier, generic=not qualifier)


def _month_year(m: re.Match[str], now: datetime) -> _Ref | None:
    return _ref(m, "month", month=_month_of(m.group(1)), year=int(m.group(2)))


def _month_only(m: re.Match[str], now: datetime) -> _Ref | None:
    qualifier = m.group(1)
    if qualifier is None and _word_before(m.string, m.start()) not in _MONTH_PREPOSITIONS:
        return None  # "I may go", "we march on": not a month
    return _ref(m, "month", month=_month_of(m.group(2)), qualifier=qualifier)


def _year_only(m: re.Match[str], now: datetime) -> _Ref | None:
    before = _word_before(m.string, m.start())
    if before not in _MONTH_PREPOSITIONS | {"year"}:
        return None  # "I have 2000 books"
    if before in _RANGE_END_WORDS and not re.search(r"\b(?:from|between|since)\b", m.string):
        return None  # "two dogs and 2000 books": "and" ends a range only after "from"
    return _ref(m, "year", year=int(m.group(1)))


def _day_only(m: re.Match[str], now: datetime) -> _Ref | None:
    return _ref(m, "day_only", day=_day_of(m.group(1)))


def _relative_day(m: re.Match[str], now: datetime) -> _Ref | None:
    words = m.group(0)
    today = now.date()
    offsets = {
        "day after tomorrow": 2,
        "day before yesterday": -2,
        "tomorrow": 1,
        "yesterday": -1,
        "last night": -1,
    }
    offset = next((v for k, v in offsets.items() if k in words), 0)
    day = today + timedelta(days=offset)
    direction: Direction = "past" if offset < 0 else "future"
    return _ref(m, "span", span=_Span(day, day), direction=direction)


def _relative_period(m: re.Match[str], now: datetime) -> _Ref | None:
    qualifier, unit = m.group(1), m.group(2)
    today = now.date()
    step = {"next": 1, "last": -1, "this": 0}[qualifier]
    direction: Direction = "past" if step < 0 else "future"
    if unit == "weekend":
        saturday = _week_start(today) + timedelta(days=5 + 7 * step)
        return _ref(
            m,
            "span",
            span=_Span(saturday, saturday + timedelta(days=1)),
            direction=direction,
        )
    if step == 0:
        return None  # "this week / month / year": a "for now" cue, read separately
    if unit == "week":
        monday = _week_start(today) + timedelta(weeks=step)
        span = _Span(monday, monday + timedelta(days=6))
    elif unit == "month":
        first = _add_months(today.replace(day=1), step)
        span = _month_span(first.year, first.month)
    else:
        span = _year_span(today.year + step)
    return _ref(m, "span", span=span, direction=direction)


def _offset_future(m: re.Match[str], now: datetime) -> _Ref | None:
    return _ref(
        m, "span", span=_shift_span(now, _number(m.group(1)), m.group(2)), direction="future"
    )


def _offset_past(m: re.Match[str], now: datetime) -> _Ref | None:
    return _ref(
        m, "span", span=_shift_span(now, -_number(m.group(1)), m.group(2)), direction="past"
    )


def _weekday(m: re.Match[str], now: datetime) -> _Ref | None:
    before = _word_before(m.string, m.start())
    if before in ("every", "each", "most", "some", "other"):
        return None  # a routine, not a date
    qualifier = (m.group(1) or "").replace("coming", "").strip() or None
    return _ref(m, "weekday", name=m.group(2), qualifier=qualifier or None)


def _season(m: re.Match[str], now: datetime) -> _Ref | None:
    qualifier, name, year = m.group(1), m.group(2), m.group(3)
    if qualifier is None and year is None:
        return None
    return _ref(m, "season", name=name, qualifier=qualifier, year=_year_of(year))


def _generic_season(m: re.Match[str], now: datetime) -> _Ref | None:
    return _ref(m, "season", name=m.group(1), generic=True)


_ON = r"(?:on\s+)?"
PATTERNS: tuple[tuple[re.Pattern[str], Builder], ...] = (
    (_rx(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), _iso),
    (
        _rx(
            rf"\b{_ON}(?:the\s+)?({_DAYNUM})\s+(?:of\s+)?({_MONTH_ANY})\b"
            r"(?:,?\s+(\d{4})\b)?"
        ),
        _day_month,
    ),
    (
        _rx(
            rf"\b{_ON}({_MONTH_ANY})\.?\s+(?:(\d{{1,2}}(?:st|nd|rd|th)?)|the\s+({_DAYNUM}))\b(?!:)"
            r"(?:,?\s+(\d{4})\b)?"
        ),
        _month_day,
    ),
    (_rx(rf"\b(?:(this|next|last)\s+)?({_HOLIDAY})\b"), _holiday),
    (_rx(rf"\b({_MONTH})\s+(?:of\s+)?(\d{{4}})\b"), _month_year),
    (
        _rx(
            r"\b(?:the\s+)?(?:day\s+after\s+tomorrow|day\s+before\s+yesterday)\b"
            r"|\b(?:tomorrow|yesterday|today|tonight|last night|later today)\b"
            r"|\bthis (?:morning|afternoon|evening)\b"
        ),
        _relative_day,
    ),
    (_rx(r"\b(this|next|last)\s+(weekend|week|month|year)\b"), _relative_period),
    (_rx(rf"\bin\s+({_NUM})\s+({_UNIT})(?:'s|')?(?:\s+time)?\b"), _offset_future),
    (_rx(rf"\b({_NUM})\s+({_UNIT})\s+from\s+(?:now|today)\b"), _offset_future),
    (_rx(rf"\b({_NUM})\s+({_UNIT})\s+ago\b"), _offset_past),
    (_rx(rf"\b(?:(this|next|last)\s+)?({_SEASON})(?:\s+(?:of\s+)?(\d{{4}}))?\b"), _season),
    (
        _rx(
            rf"\b(?:in|during|over)\s+(?:the\s+)?({_SEASON})(?:time)?s?\b"
            r"(?!\s+(?:of\s+)?\d)"
        ),
        _generic_season,
    ),
    (
        _rx(
            rf"\b((?:this\s+coming|next|this|last|on|coming)\s+)?({_WEEKDAY})\b"
            r"(?!\s+(?:nights|mornings|evenings|afternoons)\b)"
        ),
        _weekday,
    ),
    (
        _rx(rf"\b(?:(this|next|last|early|late|mid|mid-)\s*)?({_MONTH})\b(?!\s+\d)"),
        _month_only,
    ),
    (_rx(r"\b((?:19|20|21)\d{2})\b"), _year_only),
    (_rx(r"\bthe\s+(\d{1,2}(?:st|nd|rd|th))\b"), _day_only),
)


def _word_before(text: str, pos: int) -> str:
    m = _LAST_WORD.search(text[:pos])
    return m.group(1) if m else ""


_LAST_WORD = re.compile(r"([a-z']+)[\s,]*$")
_CUE_WORDS = _MONTH_PREPOSITIONS | _HOLIDAY_PREPOSITIONS - {"this", "next", "last"}


def _find_refs(text: str, now: datetime) -> list[_Ref]:
    taken: list[tuple[int, int]] = []
    refs: list[_Ref] = []
    for pattern, build in PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            try:
                ref = build(m, now)
            except (ValueError, OverflowError, KeyError):
                ref = None
            if ref is None:
                continue
            taken.append((m.start(), m.end()))
            refs.append(ref)
    refs.sort(key=lambda r: r.start)
    return _assign_roles(text, refs)


def _assign_roles(text: str, refs: list[_Ref]) -> list[_Ref]:
    out: list[_Ref] = []
    seen_since = False
    for ref in refs:
        before = _word_before(text, ref.start)
        if before in _CUE_WORDS:  # the cue reads "since 2015", not "2015"
            word = _LAST_WORD.search(text[: ref.start])
            if word is not None:
                ref = replace(ref, cue=text[word.start(1) : ref.end], start=word.start(1))
        role: Role = "anchor"
        if before in _SINCE_WORDS:
            role = "since"
            seen_since = True
        elif before in _UNTIL_WORDS or (before in _RANGE_END_WORDS and seen_since):
            role = "until"
        out.append(replace(ref, role=role))
    return out


def _resolve(ref: _Ref, direction: Direction, today: date) -> _Span | None:
    """The span ``ref`` names, looking ``direction`` from ``today`` when it is ambiguous
    (None when the calendar has no such day, e.g. the 31st of February)."""
    try:
        return _resolve_unsafe(ref, ref.direction or direction, today)
    except (ValueError, OverflowError, StopIteration, IndexError):
        return None


def _resolve_unsafe(ref: _Ref, direction: Direction, today: date) -> _Span | None:
    if ref.span is not None:
        return ref.span
    if ref.kind == "year" and ref.year is not None:
        return _year_span(ref.year)
    if ref.kind == "month_day" and ref.month and ref.day:
        return _resolve_month_day(ref, direction, today)
    if ref.kind == "day_only" and ref.day:
        return _resolve_day_only(ref.day, direction, today)
    if ref.kind == "month" and ref.month:
        return _resolve_month(ref, direction, today)
    if ref.kind == "weekday" and ref.name:
        return _resolve_weekday(ref, direction, today)
    if ref.kind == "season" and ref.name:
        return _resolve_season(ref, direction, today)
    return None


def _resolve_month_day(ref: _Ref, direction: Direction, today: date) -> _Span | None:
    assert ref.month is not None and ref.day is not None
    if ref.year is not None:
        day = date(ref.year, ref.month, ref.day)
        return _Span(day, day)
    if ref.qualifier == "next":
        years = range(today.year, today.year + 9)
        pick = [d for d in _valid_days(years, ref.month, ref.day) if d > today]
    elif ref.qualifier == "last":
        years = range(today.year, today.year - 9, -1)
        pick = [d for d in _valid_days(years, ref.month, ref.day) if d < today]
    elif direction == "future" or ref.qualifier == "this":
        years = range(today.year, today.year + 9)
        pick = [d for d in _valid_days(years, ref.month, ref.day) if d >= today]
    else:
        years = range(today.year, today.year - 9, -1)
        pick = [d for d in _valid_days(years, ref.month, ref.day) if d <= today]
    return _Span(pick[0], pick[0]) if pick else None


def _valid_days(years: range, month: int, day: int) -> list[date]:
    found = []
    for year in years:
        if 1 <= year <= 9999 and day <= calendar.monthrange(year, month)[1]:
            found.append(date(year, month, day))
    return found


def _resolve_day_only(day: int, direction: Direction, today: date) -> _Span | None:
    step = 1 if direction == "future" else -1
    first = today.replace(day=1)
    for i in range(13):
        month = _add_months(first, step * i)
        if day <= calendar.monthrange(month.year, month.month)[1]:
            candidate = month.replace(day=day)
            if (direction == "future" and candidate >= today) or (
                direction == "past" and candidate <= today
            ):
                return _Span(candidate, candidate)
    return None


def _resolve_month(ref: _Ref, direction: Direction, today: date) -> _Span | None:
    assert ref.month is not None
    if ref.year is not None:
        return _month_span(ref.year, ref.month)
    month = ref.month
    if ref.qualifier == "this":
        year = today.year
    elif ref.qualifier == "next":
        year = today.year if month > today.month else today.year + 1
    elif ref.qualifier == "last":
        year = today.year if month < today.month else today.year - 1
    elif direction == "future":
        year = today.year if month >= today.month else today.year + 1
    else:
        year = today.year if month <= today.month else today.year - 1
    return _month_span(year, month)


def _resolve_weekday(ref: _Ref, direction: Direction, today: date) -> _Span | None:
    assert ref.name is not None
    target = WEEKDAYS.index(ref.name)
    if ref.qualifier == "next":
        # The weekday of the following calendar week (Monday to Sunday).
        day = _week_start(today) + timedelta(weeks=1, days=target)
    elif ref.qualifier == "last" or (ref.qualifier != "this" and direction == "past"):
        back = (today.weekday() - target) % 7 or 7
        day = today - timedelta(days=back)
    elif ref.qualifier == "this":
        day = today + timedelta(days=(target - today.weekday()) % 7)
    else:
        day = today + timedelta(days=(target - today.weekday()) % 7 or 7)
    return _Span(day, day)


def _resolve_season(ref: _Ref, direction: Direction, today: date) -> _Span | None:
    assert ref.name is not None
    if ref.year is not None:
        return _season_span(ref.year, ref.name)
    spans = [_season_span(y, ref.name) for y in range(today.year - 2, today.year + 2)]
    if ref.qualifier == "next":
        return next(s for s in spans if s.start > today)
    if ref.qualifier == "last" or (ref.qualifier != "this" and direction == "past"):
        return [s for s in spans if s.end < today][-1]
    return next(s for s in spans if s.end >= today)


# ---------------------------------------------------------------------------------------
# The reading


@dataclass(frozen=True, slots=True)
class _Bounds:
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    expected_end: datetime | None = None


def _until_boundary(span: _Span, now: datetime) -> datetime:
    if span.one_day:
        return _end_of_day(span.end)
    start = _midnight(span.start)
    end = _end_of_day(span.end) + timedelta(seconds=1)
    # "until March" said in March: the end of this March, not a boundary already passed.
    return end if start < now < end else start


def read_time(text: str, *, said_at: datetime, hint: TimeKind | None = None) -> TimeReading:
    """Time kind and valid time of one sentence, resolved relative to ``said_at``."""
    if said_at.tzinfo is None or said_at.utcoffset() is None:
        raise ValueError("said_at must be timezone-aware (the moment the user typed it)")
    now = said_at.astimezone(UTC)
    folded = fold(text[:MAX_TEXT_CHARS])
    try:
        reading = _read(folded, now, hint)
    except (ValueError, OverflowError):  # a date at the edge of the calendar
        reading = _default(now, hint)
    return _consistent(reading)


def _default(now: datetime, hint: TimeKind | None, cue: str | None = None) -> TimeReading:
    """The hint, else permanent; a ``cue`` (a state still going) refuses past/one-off hints."""
    kind = hint or TimeKind.PERMANENT
    if cue is not None and kind in (TimeKind.PAST, TimeKind.ONE_OFF):
        kind = TimeKind.PERMANENT
    end = _safe_add(now, DEFAULT_FOR_NOW) if kind is TimeKind.FOR_NOW else None
    return TimeReading(kind, None, None, end, cue)


def _safe_add(at: datetime, delta: timedelta) -> datetime | None:
    try:
        return at + delta
    except OverflowError:
        return None


def _consistent(r: TimeReading) -> TimeReading:
    """Drop a bound that contradicts another ("since 2020 until 2019")."""
    if r.valid_from and r.valid_until and r.valid_until < r.valid_from:
        return replace(r, valid_until=None)
    return r


def _read(text: str, now: datetime, hint: TimeKind | None) -> TimeReading:
    today = now.date()
    past_tense = _PAST_VERB.search(text) is not None or _PAST_PERFECT.search(text) is not None
    perfect = _PERFECT.search(text)
    future = _FUTURE.search(text) is not None
    tense: Direction = "past" if past_tense and not future else "future"
    refs = _find_refs(text, now)

    since_from: datetime | None = None
    since_cue: str | None = None
    since_at = 0
    until_at: datetime | None = None
    until_cue: str | None = None
    anchors: list[tuple[_Ref, _Span]] = []
    for ref in refs:
        if ref.role == "since":
            # "since" looks back; "from June 3" follows the tense.
            looking: Direction = "past" if ref.cue.startswith("since") else tense
            span = _resolve(ref, looking, today)
            if span is not None and since_from is None:
                since_from, since_cue, since_at = _midnight(span.start), ref.cue, ref.start
        elif ref.role == "until":
            span = _resolve(ref, tense, today)
            if span is not None and until_at is None:
                until_at, until_cue = _until_boundary(span, now), ref.cue
                if since_cue is not None:  # "from 2015 to 2019"
                    until_cue = text[since_at : ref.end]
        else:
            span = _resolve(ref, tense, today)
            if span is not None:
                anchors.append((ref, span))
    specific = [(r, s) for r, s in anchors if not r.generic]
    generic = [(r, s) for r, s in anchors if r.generic]

    def past(cue: str, spans: list[_Span] | None = None) -> TimeReading:
        spans = spans or []
        start = since_from or (_midnight(spans[0].start) if spans else None)
        end = until_at or (_end_of_day(max(s.end for s in spans)) if spans else None)
        return TimeReading(TimeKind.PAST, start, end, None, cue)

    def for_now(cue: str, end: datetime | None) -> TimeReading:
        return TimeReading(
            TimeKind.FOR_NOW, since_from, None, end or _safe_add(now, DEFAULT_FOR_NOW), cue
        )

    # 1. "used to", "when I was a kid": a state that ended.
    ended = _USED_TO.search(text) or _CHILDHOOD.search(text)
    if ended is not None:
        past_spans = [s for _, s in specific if _end_of_day(s.end) < now]
        return past(ended.group(0), past_spans)

    # 2. "until <date>": over (past) or still going with a known end (for now).
    if until_at is not None and until_cue is not None:
        if since_from is not None and since_from > now:  # "from June 3 to June 10"
            return TimeReading(TimeKind.ONE_OFF, since_from, until_at, None, until_cue)
        if until_at < now:
            past_spans = [s for _, s in specific if _end_of_day(s.end) < now]
            return past(until_cue, past_spans)
        return for_now(until_cue, until_at)

    # 3. Durations: "for the next two weeks", "for two weeks" (not routines, not past).
    routine = _ROUTINE.search(text) is not None
    ahead = _FOR_NEXT.search(text)
    if ahead is not None:
        n, unit = _number(ahead.group(1) or ahead.group(3)), ahead.group(2) or ahead.group(4)
        return for_now(ahead.group(0), _shift(now, n, unit))
    back = _FOR_PAST.search(text)
    plain = _FOR_PLAIN.search(text)
    if back is None and plain is not None and perfect is not None:
        back = plain
    if back is not None and since_from is None:
        since_from = _midnight(_shift(now, -_number(back.group(1)), back.group(2)).date())
        since_cue = back.group(0)
    elif plain is not None and not past_tense and not routine and perfect is None:
        return for_now(plain.group(0), _shift(now, _number(plain.group(1)), plain.group(2)))

    # 4. "for now", "currently", "this month".
    period = _THIS_PERIOD.search(text)
    cue = _FOR_NOW.search(text)
    if period is not None or cue is not None:
        end = None
        if period is not None:
            end = _end_of_day(_this_period_end(period.group(1), today))
        decided = cue or period
        assert decided is not None
        return for_now(decided.group(0), end)

    # 5. "every summer", "in the holidays".
    seasonal = _SEASONAL.search(text)
    if seasonal is not None:
        return TimeReading(TimeKind.SEASONAL, since_from, None, None, seasonal.group(0))

    # 6. Facts that hold from a date on: "born in 1990", "my birthday is on March 3".
    born = _BORN.search(text) or _RECURRING_DATE.search(text)
    if born is not None:
        start = since_from
        dated = [s for r, s in specific if r.year is not None or r.kind == "span"]
        if start is None and dated and _BORN.search(text):
            start = _midnight(dated[0].start)
        return TimeReading(TimeKind.PERMANENT, start, None, None, born.group(0))

    # 7. "since 2015", "for the past three years": true from then on.
    if since_from is not None and since_cue is not None:
        if _PAST_PERFECT.search(text) is not None:
            return past(since_cue)
        kind = hint if hint not in (None, TimeKind.ONE_OFF) else TimeKind.PERMANENT
        assert kind is not None
        end = _safe_add(now, DEFAULT_FOR_NOW) if kind is TimeKind.FOR_NOW else None
        return TimeReading(kind, since_from, None, end, since_cue)

    # 8. A date: over (past) or to come (one-off).
    if specific:
        first_ref, first_span = specific[0]
        is_past = _end_of_day(first_span.end) < now
        same_side = [s for _, s in specific if (_end_of_day(s.end) < now) == is_past]
        if is_past:
            return past(first_ref.cue, same_side)
        return TimeReading(
            TimeKind.ONE_OFF,
            _midnight(min(s.start for s in same_side)),
            _end_of_day(max(s.end for s in same_side)),
            None,
            first_ref.cue,
        )

    # 9. "in the summer", "at Christmas": seasonal unless the tense fixes one occurrence.
    if generic:
        ref, span = generic[0]
        if future:
            upcoming = _resolve(ref, "future", today) or span
            return TimeReading(
                TimeKind.ONE_OFF,
                _midnight(upcoming.start),
                _end_of_day(upcoming.end),
                None,
                ref.cue,
            )
        if past_tense:
            last = _resolve(ref, "past", today) or span
            return past(ref.cue, [last])
        return TimeReading(TimeKind.SEASONAL, None, None, None, ref.cue)

    # 10. "I have been vegetarian since I was 12": the past tense is in the since-clause.
    clause = _SINCE_CLAUSE.search(text)
    if clause is not None and perfect is not None:
        return _default(now, hint, clause.group(0))

    # 11. Past tense with no date: "I lived in Berlin", "I grew up in Duluth".
    verb = _PAST_VERB.search(text) or _PAST_PERFECT.search(text)
    if verb is not None and not future:
        return past(verb.group(0))

    return _default(now, hint)


def _this_period_end(unit: str, today: date) -> date:
    if unit == "week":
        return _week_start(today) + timedelta(days=6)
    if unit == "month":
        return _month_span(today.year, today.month).end
    return date(today.year, 12, 31)
