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

The words are in ``timewords``, the grammar of date references in ``timerefs``,
calendar arithmetic and resolution in ``timespans`` (all in this package).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta

from protocol.consolidation.lexicon import fold
from protocol.consolidation.timerefs import find_refs
from protocol.consolidation.timespans import (
    Direction,
    Ref,
    Span,
    count_of,
    end_of_day,
    midnight,
    month_span,
    resolve,
    shift,
    week_start,
)
from protocol.consolidation.timewords import (
    BORN,
    CHILDHOOD,
    FOR_NEXT,
    FOR_NOW,
    FOR_PAST,
    FOR_PLAIN,
    FUTURE,
    PAST_PERFECT,
    PAST_VERB,
    PERFECT,
    RECURRING_DATE,
    ROUTINE,
    SEASONAL,
    SINCE_CLAUSE,
    THIS_PERIOD,
    USED_TO,
)
from protocol.model import MAX_TEXT_CHARS, TimeKind
from protocol.timeline import DEFAULT_FOR_NOW


@dataclass(frozen=True, slots=True)
class TimeReading:
    time_kind: TimeKind
    valid_from: datetime | None
    valid_until: datetime | None
    expected_end: datetime | None
    cue: str | None  # the words that decided it, for "how do you know this?"


@dataclass(frozen=True, slots=True)
class _Bounds:
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    expected_end: datetime | None = None


def _until_boundary(span: Span, now: datetime) -> datetime:
    if span.one_day:
        return end_of_day(span.end)
    start = midnight(span.start)
    end = end_of_day(span.end) + timedelta(seconds=1)
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
    past_tense = PAST_VERB.search(text) is not None or PAST_PERFECT.search(text) is not None
    perfect = PERFECT.search(text)
    future = FUTURE.search(text) is not None
    tense: Direction = "past" if past_tense and not future else "future"
    refs = find_refs(text, now)

    since_from: datetime | None = None
    since_cue: str | None = None
    since_at = 0
    until_at: datetime | None = None
    until_cue: str | None = None
    anchors: list[tuple[Ref, Span]] = []
    for ref in refs:
        if ref.role == "since":
            # "since" looks back; "from June 3" follows the tense.
            looking: Direction = "past" if ref.cue.startswith("since") else tense
            span = resolve(ref, looking, today)
            if span is not None and since_from is None:
                since_from, since_cue, since_at = midnight(span.start), ref.cue, ref.start
        elif ref.role == "until":
            span = resolve(ref, tense, today)
            if span is not None and until_at is None:
                until_at, until_cue = _until_boundary(span, now), ref.cue
                if since_cue is not None:  # "from 2015 to 2019"
                    until_cue = text[since_at : ref.end]
        else:
            span = resolve(ref, tense, today)
            if span is not None:
                anchors.append((ref, span))
    specific = [(r, s) for r, s in anchors if not r.generic]
    generic = [(r, s) for r, s in anchors if r.generic]

    def past(cue: str, spans: list[Span] | None = None) -> TimeReading:
        spans = spans or []
        start = since_from or (midnight(spans[0].start) if spans else None)
        end = until_at or (end_of_day(max(s.end for s in spans)) if spans else None)
        return TimeReading(TimeKind.PAST, start, end, None, cue)

    def for_now(cue: str, end: datetime | None) -> TimeReading:
        return TimeReading(
            TimeKind.FOR_NOW, since_from, None, end or _safe_add(now, DEFAULT_FOR_NOW), cue
        )

    # 1. "used to", "when I was a kid": a state that ended.
    ended = USED_TO.search(text) or CHILDHOOD.search(text)
    if ended is not None:
        past_spans = [s for _, s in specific if end_of_day(s.end) < now]
        return past(ended.group(0), past_spans)

    # 2. "until <date>": over (past) or still going with a known end (for now).
    if until_at is not None and until_cue is not None:
        if since_from is not None and since_from > now:  # "from June 3 to June 10"
            return TimeReading(TimeKind.ONE_OFF, since_from, until_at, None, until_cue)
        if until_at < now:
            past_spans = [s for _, s in specific if end_of_day(s.end) < now]
            return past(until_cue, past_spans)
        return for_now(until_cue, until_at)

    # 3. Durations: "for the next two weeks", "for two weeks" (not routines, not past).
    routine = ROUTINE.search(text) is not None
    ahead = FOR_NEXT.search(text)
    if ahead is not None:
        n, unit = count_of(ahead.group(1) or ahead.group(3)), ahead.group(2) or ahead.group(4)
        return for_now(ahead.group(0), shift(now, n, unit))
    back = FOR_PAST.search(text)
    plain = FOR_PLAIN.search(text)
    if back is None and plain is not None and perfect is not None:
        back = plain
    if back is not None and since_from is None:
        since_from = midnight(shift(now, -count_of(back.group(1)), back.group(2)).date())
        since_cue = back.group(0)
    elif plain is not None and not past_tense and not routine and perfect is None:
        return for_now(plain.group(0), shift(now, count_of(plain.group(1)), plain.group(2)))

    # 4. "for now", "currently", "this month".
    period = THIS_PERIOD.search(text)
    cue = FOR_NOW.search(text)
    if period is not None or cue is not None:
        end = None
        if period is not None:
            end = end_of_day(_this_period_end(period.group(1), today))
        decided = cue or period
        assert decided is not None
        return for_now(decided.group(0), end)

    # 5. "every summer", "in the holidays".
    seasonal = SEASONAL.search(text)
    if seasonal is not None:
        return TimeReading(TimeKind.SEASONAL, since_from, None, None, seasonal.group(0))

    # 6. Facts that hold from a date on: "born in 1990", "my birthday is on March 3".
    born = BORN.search(text) or RECURRING_DATE.search(text)
    if born is not None:
        start = since_from
        dated = [s for r, s in specific if r.year is not None or r.kind == "span"]
        if start is None and dated and BORN.search(text):
            start = midnight(dated[0].start)
        return TimeReading(TimeKind.PERMANENT, start, None, None, born.group(0))

    # 7. "since 2015", "for the past three years": true from then on.
    if since_from is not None and since_cue is not None:
        if PAST_PERFECT.search(text) is not None:
            return past(since_cue)
        kind = hint if hint not in (None, TimeKind.ONE_OFF) else TimeKind.PERMANENT
        assert kind is not None
        end = _safe_add(now, DEFAULT_FOR_NOW) if kind is TimeKind.FOR_NOW else None
        return TimeReading(kind, since_from, None, end, since_cue)

    # 8. A date: over (past) or to come (one-off).
    if specific:
        first_ref, first_span = specific[0]
        is_past = end_of_day(first_span.end) < now
        same_side = [s for _, s in specific if (end_of_day(s.end) < now) == is_past]
        if is_past:
            return past(first_ref.cue, same_side)
        return TimeReading(
            TimeKind.ONE_OFF,
            midnight(min(s.start for s in same_side)),
            end_of_day(max(s.end for s in same_side)),
            None,
            first_ref.cue,
        )

    # 9. "in the summer", "at Christmas": seasonal unless the tense fixes one occurrence.
    if generic:
        ref, span = generic[0]
        if future:
            upcoming = resolve(ref, "future", today) or span
            return TimeReading(
                TimeKind.ONE_OFF,
                midnight(upcoming.start),
                end_of_day(upcoming.end),
                None,
                ref.cue,
            )
        if past_tense:
            last = resolve(ref, "past", today) or span
            return past(ref.cue, [last])
        return TimeReading(TimeKind.SEASONAL, None, None, None, ref.cue)

    # 10. "I have been vegetarian since I was 12": the past tense is in the since-clause.
    clause = SINCE_CLAUSE.search(text)
    if clause is not None and perfect is not None:
        return _default(now, hint, clause.group(0))

    # 11. Past tense with no date: "I lived in Berlin", "I grew up in Duluth".
    verb = PAST_VERB.search(text) or PAST_PERFECT.search(text)
    if verb is not None and not future:
        return past(verb.group(0))

    return _default(now, hint)


def _this_period_end(unit: str, today: date) -> date:
    if unit == "week":
        return week_start(today) + timedelta(days=6)
    if unit == "month":
        return month_span(today.year, today.month).end
    return date(today.year, 12, 31)
