"""Calendar arithmetic, and resolving a date reference to the whole days it names.

Invariants:
- Pure: a reference is resolved relative to ``today`` (the day the sentence was said,
  in UTC) and a direction ("future"/"past"); nothing reads a clock.
- A date that cannot be built (the 31st of February, a year out of range) resolves to
  None, never an error; a span's ``end`` is its last day, inclusive.
"""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from protocol.consolidation.timewords import NUMBER_WORDS, WEEKDAYS

Direction = Literal["future", "past"]

Role = Literal["anchor", "since", "until"]


@dataclass(frozen=True, slots=True)
class Span:
    start: date
    end: date  # the last day, inclusive

    @property
    def one_day(self) -> bool:
        return self.start == self.end


def midnight(d: date) -> datetime:
    return datetime.combine(d, time(0, 0), tzinfo=UTC)


def end_of_day(d: date) -> datetime:
    return datetime.combine(d, time(23, 59, 59), tzinfo=UTC)


def month_span(year: int, month: int) -> Span:
    return Span(date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1]))


def year_span(year: int) -> Span:
    return Span(date(year, 1, 1), date(year, 12, 31))


def add_months(d: date, months: int) -> date:
    index = d.year * 12 + d.month - 1 + months
    year, month = divmod(index, 12)
    return date(year, month + 1, min(d.day, calendar.monthrange(year, month + 1)[1]))


def week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _season_span(year: int, season: str) -> Span:
    if season == "winter":
        feb_end = calendar.monthrange(year + 1, 2)[1]
        return Span(date(year, 12, 1), date(year + 1, 2, feb_end))
    first = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9}[season]
    return Span(date(year, first, 1), month_span(year, first + 2).end)


def count_of(word: str | None) -> int:
    if not word:
        return 1
    word = word.strip()
    return int(word) if word.isdigit() else NUMBER_WORDS.get(word, 1)


def shift(at: datetime, n: int, unit: str) -> datetime:
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
    shifted = add_months(at.date(), months)
    return datetime.combine(shifted, at.timetz())


def shift_span(at: datetime, n: int, unit: str) -> Span:
    """The day, month or year that lies ``n`` units from ``at`` (precision by unit)."""
    d = shift(at, n, unit).date()
    unit = unit.rstrip("s")
    if unit == "month":
        return month_span(d.year, d.month)
    if unit == "year":
        return year_span(d.year)
    return Span(d, d)


@dataclass(frozen=True, slots=True)
class Ref:
    start: int
    end: int
    cue: str
    kind: str  # day | month_day | day_only | month | year | weekday | season | span
    year: int | None = None
    month: int | None = None
    day: int | None = None
    name: str | None = None  # weekday or season
    qualifier: str | None = None  # this | next | last | on | None
    span: Span | None = None  # already resolved (relative days, offsets)
    direction: Direction | None = None  # fixed by the words ("ago", "yesterday")
    generic: bool = False  # "in the summer", "at Christmas": seasonal unless tensed
    role: Role = "anchor"


def resolve(ref: Ref, direction: Direction, today: date) -> Span | None:
    """The span ``ref`` names, looking ``direction`` from ``today`` when it is ambiguous
    (None when the calendar has no such day, e.g. the 31st of February)."""
    try:
        return _resolve_unsafe(ref, ref.direction or direction, today)
    except (ValueError, OverflowError, StopIteration, IndexError):
        return None


def _resolve_unsafe(ref: Ref, direction: Direction, today: date) -> Span | None:
    if ref.span is not None:
        return ref.span
    if ref.kind == "year" and ref.year is not None:
        return year_span(ref.year)
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


def _resolve_month_day(ref: Ref, direction: Direction, today: date) -> Span | None:
    assert ref.month is not None and ref.day is not None
    if ref.year is not None:
        day = date(ref.year, ref.month, ref.day)
        return Span(day, day)
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
    return Span(pick[0], pick[0]) if pick else None


def _valid_days(years: range, month: int, day: int) -> list[date]:
    found = []
    for year in years:
        if 1 <= year <= 9999 and day <= calendar.monthrange(year, month)[1]:
            found.append(date(year, month, day))
    return found


def _resolve_day_only(day: int, direction: Direction, today: date) -> Span | None:
    step = 1 if direction == "future" else -1
    first = today.replace(day=1)
    for i in range(13):
        month = add_months(first, step * i)
        if day <= calendar.monthrange(month.year, month.month)[1]:
            candidate = month.replace(day=day)
            if (direction == "future" and candidate >= today) or (
                direction == "past" and candidate <= today
            ):
                return Span(candidate, candidate)
    return None


def _resolve_month(ref: Ref, direction: Direction, today: date) -> Span | None:
    assert ref.month is not None
    if ref.year is not None:
        return month_span(ref.year, ref.month)
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
    return month_span(year, month)


def _resolve_weekday(ref: Ref, direction: Direction, today: date) -> Span | None:
    assert ref.name is not None
    target = WEEKDAYS.index(ref.name)
    if ref.qualifier == "next":
        # The weekday of the following calendar week (Monday to Sunday).
        day = week_start(today) + timedelta(weeks=1, days=target)
    elif ref.qualifier == "last" or (ref.qualifier != "this" and direction == "past"):
        back = (today.weekday() - target) % 7 or 7
        day = today - timedelta(days=back)
    elif ref.qualifier == "this":
        day = today + timedelta(days=(target - today.weekday()) % 7)
    else:
        day = today + timedelta(days=(target - today.weekday()) % 7 or 7)
    return Span(day, day)


def _resolve_season(ref: Ref, direction: Direction, today: date) -> Span | None:
    assert ref.name is not None
    if ref.year is not None:
        return _season_span(ref.year, ref.name)
    spans = [_season_span(y, ref.name) for y in range(today.year - 2, today.year + 2)]
    if ref.qualifier == "next":
        return next(s for s in spans if s.start > today)
    if ref.qualifier == "last" or (ref.qualifier != "this" and direction == "past"):
        return [s for s in spans if s.end < today][-1]
    return next(s for s in spans if s.end >= today)
