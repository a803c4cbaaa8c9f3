"""Time: what a record means now, what it said at time T, and how its priority decays.

Invariants: every function takes the time it is asked at (the caller's injected clock);
decay only lowers retrieval priority, it never removes or hides a record, and only a
record whose time has passed decays (a past event, a one-off whose day went by, a "for
now" whose question went unanswered): a permanent fact does not age; a "for now"
record past its expected end keeps its content and drops to "I'm not sure" only after
its question went unanswered for ``UNANSWERED_AFTER``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from protocol.model import Layer, LifecycleState, RecordContent, TimeKind

DEFAULT_FOR_NOW = timedelta(days=90)
UNANSWERED_AFTER = timedelta(days=14)
DECAY_HALF_LIFE = timedelta(days=365)
PRIORITY_FLOOR = 0.2
STALE_PRIORITY = 0.3


def expected_end(content: RecordContent, learned_at: datetime) -> datetime | None:
    """When a "for now" record is expected to end (given, or 90 days after learning it)."""
    if content.time_kind is not TimeKind.FOR_NOW:
        return None
    return content.expected_end or (learned_at + DEFAULT_FOR_NOW)


def effective_time_kind(content: RecordContent, now: datetime) -> TimeKind:
    """Future-tense records turn into past ones once their date has passed."""
    if content.time_kind is TimeKind.PAST:
        return TimeKind.PAST
    if content.valid_until is not None and content.valid_until < now:
        return TimeKind.PAST
    if (
        (content.time_kind is TimeKind.ONE_OFF or content.layer is Layer.EVENT)
        and content.valid_from is not None
        and content.valid_from < now
        and content.valid_until is None
    ):
        return TimeKind.PAST
    return content.time_kind


def question_due(content: RecordContent, learned_at: datetime, now: datetime) -> bool:
    """Whether "Still doing this?" should be asked for this record now."""
    end = expected_end(content, learned_at)
    return end is not None and now >= end and content.time_kind is TimeKind.FOR_NOW


def is_stale(content: RecordContent, learned_at: datetime, now: datetime) -> bool:
    """A "for now" record whose question has gone unanswered long enough."""
    end = expected_end(content, learned_at)
    return end is not None and now >= end + UNANSWERED_AFTER


def priority(content: RecordContent, learned_at: datetime, now: datetime) -> float:
    """Retrieval priority in (0, 1], never zero. 1 for a record whose time has not
    passed (a permanent fact, a seasonal one, a "for now" still current, a one-off
    ahead): it does not age. A past event decays with its age (half-life a year), one
    whose date went by meanwhile is at most 0.5, and a stale "for now" at most 0.3."""
    if is_stale(content, learned_at, now):
        return STALE_PRIORITY
    if effective_time_kind(content, now) is not TimeKind.PAST:
        return 1.0
    age = max(timedelta(0), now - learned_at)
    decayed: float = max(PRIORITY_FLOOR, float(0.5 ** (age / DECAY_HALF_LIFE)))
    if content.time_kind is not TimeKind.PAST:
        return min(decayed, 0.5)
    return decayed


@dataclass(frozen=True, slots=True)
class VersionTime:
    version: int
    recorded_at: datetime


@dataclass(frozen=True, slots=True)
class StateChange:
    at: datetime
    lifecycle: LifecycleState


def version_as_of(versions: Sequence[VersionTime], when: datetime) -> int | None:
    """The version that was current at ``when`` (None if the record was not yet known)."""
    current: int | None = None
    for v in sorted(versions, key=lambda v: (v.recorded_at, v.version)):
        if v.recorded_at <= when:
            current = v.version
    return current


def lifecycle_as_of(changes: Sequence[StateChange], when: datetime) -> LifecycleState | None:
    state: LifecycleState | None = None
    for change in sorted(changes, key=lambda c: c.at):
        if change.at <= when:
            state = change.lifecycle
    return state
