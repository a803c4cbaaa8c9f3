"""The grammar of dates: every date reference one sentence holds ("next Friday", "the
3rd of May", "in two weeks", "at Christmas"), found by ``PATTERNS`` and given its role
(an anchor, the start of a "since", the end of an "until").

Invariants:
- References are found left to right and never overlap: the first pattern that
  matches a stretch of text owns it.
- A builder only reads the match and ``said_at``; what is relative (tomorrow, "two
  weeks ago") is already a span, everything else is resolved later (``timespans``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace
from datetime import date, datetime, timedelta

from protocol.consolidation.timespans import (
    Direction,
    Ref,
    Role,
    Span,
    add_months,
    count_of,
    month_span,
    shift_span,
    week_start,
    year_span,
)
from protocol.consolidation.timewords import (
    DAYNUM,
    HOLIDAY,
    HOLIDAY_PREPOSITIONS,
    HOLIDAYS,
    MONTH,
    MONTH_ABBR,
    MONTH_ANY,
    MONTH_PREPOSITIONS,
    MONTHS,
    NUM,
    ORDINAL_WORDS,
    RANGE_END_WORDS,
    SEASON,
    SINCE_WORDS,
    UNIT,
    UNTIL_WORDS,
    WEEKDAY,
    compiled,
)


def _day_of(word: str) -> int:
    word = re.sub(r"(?:st|nd|rd|th)$", "", word) if word[:1].isdigit() else word
    return int(word) if word.isdigit() else ORDINAL_WORDS[word]


def _month_of(word: str) -> int:
    word = word.rstrip(".")
    return MONTHS.index(word) + 1 if word in MONTHS else MONTH_ABBR[word]


def _year_of(text: str | None) -> int | None:
    return int(text) if text else None


Builder = Callable[[re.Match[str], datetime], Ref | None]


def _ref(
    m: re.Match[str],
    kind: str,
    *,
    year: int | None = None,
    month: int | None = None,
    day: int | None = None,
    name: str | None = None,
    qualifier: str | None = None,
    span: Span | None = None,
    direction: Direction | None = None,
    generic: bool = False,
) -> Ref:
    return Ref(
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


def _iso(m: re.Match[str], now: datetime) -> Ref | None:
    day = date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    return _ref(m, "span", span=Span(day, day))


def _day_month(m: re.Match[str], now: datetime) -> Ref | None:
    return _ref(
        m,
        "month_day",
        day=_day_of(m.group(1)),
        month=_month_of(m.group(2)),
        year=_year_of(m.group(3)),
    )


def _month_day(m: re.Match[str], now: datetime) -> Ref | None:
    return _ref(
        m,
        "month_day",
        month=_month_of(m.group(1)),
        day=_day_of(m.group(2) or m.group(3)),
        year=_year_of(m.group(4)),
    )


def _holiday(m: re.Match[str], now: datetime) -> Ref | None:
    month, day = HOLIDAYS[m.group(2)]
    qualifier = m.group(1)
    if qualifier is None and _word_before(m.string, m.start()) not in HOLIDAY_PREPOSITIONS:
        return None  # "I love Christmas" names no occurrence
    return _ref(m, "month_day", month=month, day=day, qualifier=qualifier, generic=not qualifier)


def _month_year(m: re.Match[str], now: datetime) -> Ref | None:
    return _ref(m, "month", month=_month_of(m.group(1)), year=int(m.group(2)))


def _month_only(m: re.Match[str], now: datetime) -> Ref | None:
    qualifier = m.group(1)
    if qualifier is None and _word_before(m.string, m.start()) not in MONTH_PREPOSITIONS:
        return None  # "I may go", "we march on": not a month
    return _ref(m, "month", month=_month_of(m.group(2)), qualifier=qualifier)


def _year_only(m: re.Match[str], now: datetime) -> Ref | None:
    before = _word_before(m.string, m.start())
    if before not in MONTH_PREPOSITIONS | {"year"}:
        return None  # "I have 2000 books"
    if before in RANGE_END_WORDS and not re.search(r"\b(?:from|between|since)\b", m.string):
        return None  # "two dogs and 2000 books": "and" ends a range only after "from"
    return _ref(m, "year", year=int(m.group(1)))


def _day_only(m: re.Match[str], now: datetime) -> Ref | None:
    return _ref(m, "day_only", day=_day_of(m.group(1)))


def _relative_day(m: re.Match[str], now: datetime) -> Ref | None:
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
    return _ref(m, "span", span=Span(day, day), direction=direction)


def _relative_period(m: re.Match[str], now: datetime) -> Ref | None:
    qualifier, unit = m.group(1), m.group(2)
    today = now.date()
    step = {"next": 1, "last": -1, "this": 0}[qualifier]
    direction: Direction = "past" if step < 0 else "future"
    if unit == "weekend":
        saturday = week_start(today) + timedelta(days=5 + 7 * step)
        return _ref(
            m,
            "span",
            span=Span(saturday, saturday + timedelta(days=1)),
            direction=direction,
        )
    if step == 0:
        return None  # "this week / month / year": a "for now" cue, read separately
    if unit == "week":
        monday = week_start(today) + timedelta(weeks=step)
        span = Span(monday, monday + timedelta(days=6))
    elif unit == "month":
        first = add_months(today.replace(day=1), step)
        span = month_span(first.year, first.month)
    else:
        span = year_span(today.year + step)
    return _ref(m, "span", span=span, direction=direction)


def _offset_future(m: re.Match[str], now: datetime) -> Ref | None:
    return _ref(
        m, "span", span=shift_span(now, count_of(m.group(1)), m.group(2)), direction="future"
    )


def _offset_past(m: re.Match[str], now: datetime) -> Ref | None:
    return _ref(
        m, "span", span=shift_span(now, -count_of(m.group(1)), m.group(2)), direction="past"
    )


def _weekday(m: re.Match[str], now: datetime) -> Ref | None:
    before = _word_before(m.string, m.start())
    if before in ("every", "each", "most", "some", "other"):
        return None  # a routine, not a date
    qualifier = (m.group(1) or "").replace("coming", "").strip() or None
    return _ref(m, "weekday", name=m.group(2), qualifier=qualifier or None)


def _season(m: re.Match[str], now: datetime) -> Ref | None:
    qualifier, name, year = m.group(1), m.group(2), m.group(3)
    if qualifier is None and year is None:
        return None
    return _ref(m, "season", name=name, qualifier=qualifier, year=_year_of(year))


def _generic_season(m: re.Match[str], now: datetime) -> Ref | None:
    return _ref(m, "season", name=m.group(1), generic=True)


_ON = r"(?:on\s+)?"

PATTERNS: tuple[tuple[re.Pattern[str], Builder], ...] = (
    (compiled(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b"), _iso),
    (
        compiled(
            rf"\b{_ON}(?:the\s+)?({DAYNUM})\s+(?:of\s+)?({MONTH_ANY})\b"
            r"(?:,?\s+(\d{4})\b)?"
        ),
        _day_month,
    ),
    (
        compiled(
            rf"\b{_ON}({MONTH_ANY})\.?\s+(?:(\d{{1,2}}(?:st|nd|rd|th)?)|the\s+({DAYNUM}))\b(?!:)"
            r"(?:,?\s+(\d{4})\b)?"
        ),
        _month_day,
    ),
    (compiled(rf"\b(?:(this|next|last)\s+)?({HOLIDAY})\b"), _holiday),
    (compiled(rf"\b({MONTH})\s+(?:of\s+)?(\d{{4}})\b"), _month_year),
    (
        compiled(
            r"\b(?:the\s+)?(?:day\s+after\s+tomorrow|day\s+before\s+yesterday)\b"
            r"|\b(?:tomorrow|yesterday|today|tonight|last night|later today)\b"
            r"|\bthis (?:morning|afternoon|evening)\b"
        ),
        _relative_day,
    ),
    (compiled(r"\b(this|next|last)\s+(weekend|week|month|year)\b"), _relative_period),
    (compiled(rf"\bin\s+({NUM})\s+({UNIT})(?:'s|')?(?:\s+time)?\b"), _offset_future),
    (compiled(rf"\b({NUM})\s+({UNIT})\s+from\s+(?:now|today)\b"), _offset_future),
    (compiled(rf"\b({NUM})\s+({UNIT})\s+ago\b"), _offset_past),
    (compiled(rf"\b(?:(this|next|last)\s+)?({SEASON})(?:\s+(?:of\s+)?(\d{{4}}))?\b"), _season),
    (
        compiled(
            rf"\b(?:in|during|over)\s+(?:the\s+)?({SEASON})(?:time)?s?\b"
            r"(?!\s+(?:of\s+)?\d)"
        ),
        _generic_season,
    ),
    (
        compiled(
            rf"\b((?:this\s+coming|next|this|last|on|coming)\s+)?({WEEKDAY})\b"
            r"(?!\s+(?:nights|mornings|evenings|afternoons)\b)"
        ),
        _weekday,
    ),
    (
        compiled(rf"\b(?:(this|next|last|early|late|mid|mid-)\s*)?({MONTH})\b(?!\s+\d)"),
        _month_only,
    ),
    (compiled(r"\b((?:19|20|21)\d{2})\b"), _year_only),
    (compiled(r"\bthe\s+(\d{1,2}(?:st|nd|rd|th))\b"), _day_only),
)


def _word_before(text: str, pos: int) -> str:
    m = _LAST_WORD.search(text[:pos])
    return m.group(1) if m else ""


_LAST_WORD = re.compile(r"([a-z']+)[\s,]*$")

_CUE_WORDS = MONTH_PREPOSITIONS | HOLIDAY_PREPOSITIONS - {"this", "next", "last"}


def find_refs(text: str, now: datetime) -> list[Ref]:
    taken: list[tuple[int, int]] = []
    refs: list[Ref] = []
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


def _assign_roles(text: str, refs: list[Ref]) -> list[Ref]:
    out: list[Ref] = []
    seen_since = False
    for ref in refs:
        before = _word_before(text, ref.start)
        if before in _CUE_WORDS:  # the cue reads "since 2015", not "2015"
            word = _LAST_WORD.search(text[: ref.start])
            if word is not None:
                ref = replace(ref, cue=text[word.start(1) : ref.end], start=word.start(1))
        role: Role = "anchor"
        if before in SINCE_WORDS:
            role = "since"
            seen_since = True
        elif before in UNTIL_WORDS or (before in RANGE_END_WORDS and seen_since):
            role = "until"
        out.append(replace(ref, role=role))
    return out
