"""The device subset: which records one device keeps, within its budget.

Invariants:
- ``choose`` is a pure function of the records' facts, the policy, the pins and the
  time it is handed: the same inputs choose the same subset, in the same order, on
  the cloud (which decides) and anywhere else that wants to explain a decision.
- Permanently forgotten records are never chosen; a record "only for" an area the
  device is not for is never chosen, pinned or not.
- Pins come first, then the rule classes in ``CLASS_ORDER``; within a class, the
  record touched most recently first (ties by id). A record that would take the
  subset past either budget (records or bytes) is left out and counted, never
  half-kept; records fill the budget in that order, so a lower class never pushes out
  a higher one.
- Sensitive classes a user keeps on one device never reach the cloud, so no policy
  can choose or remove them: the device keeps them whatever the policy says.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Annotated

from pydantic import Field

from protocol.ids import RecordId
from protocol.model import ContentType, Layer, LifeArea, LifecycleState, TimeKind
from protocol.wire import UtcDatetime, WireModel

MAX_DAYS = 3650
MAX_BUDGET_RECORDS = 10_000_000
MAX_BUDGET_BYTES = 1 << 40
MAX_PINS = 10_000


class Reason(StrEnum):
    """Why a record is in a device's subset (the first class that holds it)."""

    PINNED = "pinned"
    RULE = "behaviour_rule"  # a behaviour rule in force
    PREFERENCE = "preference"  # a preference (or constraint, routine) in force
    UPCOMING = "upcoming_event"  # an event starting within ``upcoming_days``
    FOR_NOW = "for_now"  # a "for now" record still in force
    PEOPLE = "people"  # people and the user's relationships with them
    FREQUENT = "frequent"  # used at least ``frequent_uses`` times
    RECENT = "recent"  # learned, changed or used within ``recent_days``


CLASS_ORDER: tuple[Reason, ...] = tuple(Reason)
# the on/off rules of ``SubsetRules``, as the CLI's flags name them
RULE_FLAGS = ("behaviour_rules", "preferences", "for_now", "people")


class SubsetRules(WireModel):
    """The rules of one device's subset, which the user and the app can see and change.

    Each rule adds a class of records; ``areas`` (when set) names the life areas the
    device is for, and a record whose usage is restricted to another area is left out.
    """

    behaviour_rules: bool = True
    preferences: bool = True
    upcoming_days: Annotated[int, Field(ge=0, le=MAX_DAYS)] = 14
    for_now: bool = True
    people: bool = True
    frequent_uses: Annotated[int, Field(ge=0, le=1_000_000)] = 3  # 0: the rule is off
    recent_days: Annotated[int, Field(ge=0, le=MAX_DAYS)] = 30  # 0: the rule is off
    areas: Annotated[list[LifeArea], Field(max_length=len(LifeArea))] | None = None


class SubsetBudget(WireModel):
    """At most this many records and this many bytes of sealed content on the device."""

    max_records: Annotated[int, Field(ge=0, le=MAX_BUDGET_RECORDS)] = 5000
    max_bytes: Annotated[int, Field(ge=0, le=MAX_BUDGET_BYTES)] = 64 * 1024 * 1024


class SubsetPolicy(WireModel):
    rules: SubsetRules = SubsetRules()
    budget: SubsetBudget = SubsetBudget()


DEFAULT_POLICY = SubsetPolicy()


@dataclass(frozen=True, slots=True)
class SubsetFacts:
    """What the policy reads of one record (no text): its shape, its times, its size."""

    record_id: str
    lifecycle: LifecycleState
    content_type: ContentType
    layer: Layer
    time_kind: TimeKind
    learned_at: datetime
    changed_at: datetime
    size_bytes: int
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    life_areas: tuple[LifeArea, ...] = ()
    usage_area: LifeArea | None = None  # "only use for" this area


# record id -> (how many times retrieval returned it, when it last did)
Uses = Mapping[str, tuple[int, datetime]]


def touched_at(f: SubsetFacts, uses: Uses) -> datetime:
    """The latest of learned, changed and used."""
    used = uses.get(f.record_id)
    if used is not None and used[1] > f.changed_at:
        return used[1]
    return f.changed_at


@dataclass(frozen=True, slots=True)
class Choice:
    """A chosen subset: each member with its reason, in the order it was chosen."""

    members: dict[str, Reason]
    size_bytes: int
    left_out: int  # records the rules wanted that did not fit the budget
    left_out_pins: tuple[str, ...] = ()  # pinned records that did not fit
    excluded_pins: tuple[str, ...] = ()  # pinned, but "only for" an area this device is not for
    by_reason: dict[Reason, int] = field(default_factory=dict)


def _in_force(f: SubsetFacts) -> bool:
    return f.lifecycle is LifecycleState.ACTIVE


def reason_for(
    f: SubsetFacts, rules: SubsetRules, now: datetime, uses: Uses | None = None
) -> Reason | None:
    """The first rule class that holds ``f`` (pins aside), or None."""
    if rules.behaviour_rules and f.layer is Layer.BEHAVIOUR_RULE and _in_force(f):
        return Reason.RULE
    if (
        rules.preferences
        and f.content_type in (ContentType.PREFERENCE, ContentType.CONSTRAINT, ContentType.ROUTINE)
        and _in_force(f)
        and (f.valid_until is None or f.valid_until > now)
    ):
        return Reason.PREFERENCE
    if (
        rules.upcoming_days
        and f.content_type is ContentType.EVENT
        and f.lifecycle is not LifecycleState.NOT_IN_USE
        and f.valid_from is not None
        and now - timedelta(days=1) <= f.valid_from <= now + timedelta(days=rules.upcoming_days)
    ):
        return Reason.UPCOMING
    if (
        rules.for_now
        and f.time_kind is TimeKind.FOR_NOW
        and _in_force(f)
        and (f.valid_until is None or f.valid_until > now)
    ):
        return Reason.FOR_NOW
    if (
        rules.people
        and _in_force(f)
        and (f.content_type is ContentType.RELATIONSHIP or LifeArea.RELATIONSHIPS in f.life_areas)
    ):
        return Reason.PEOPLE
    used = (uses or {}).get(f.record_id)
    if rules.frequent_uses and used is not None and used[0] >= rules.frequent_uses:
        return Reason.FREQUENT
    if rules.recent_days and touched_at(f, uses or {}) >= now - timedelta(days=rules.recent_days):
        return Reason.RECENT
    return None


def excluded(f: SubsetFacts, rules: SubsetRules) -> bool:
    """Forgotten, or "only for" an area this device is not for."""
    if f.lifecycle is LifecycleState.FORGOTTEN:
        return True
    return rules.areas is not None and f.usage_area is not None and f.usage_area not in rules.areas


def choose(
    facts: Iterable[SubsetFacts],
    policy: SubsetPolicy,
    pins: Iterable[str],
    now: datetime,
    uses: Uses | None = None,
) -> Choice:
    """The subset ``policy`` keeps of ``facts`` for a device with ``pins``, at ``now``,
    given how often and when each record was ``used``."""
    used = uses or {}
    rules, budget = policy.rules, policy.budget
    pinned = set(pins)
    ranked: list[tuple[int, float, str, Reason, SubsetFacts]] = []
    excluded_pins: list[str] = []
    for f in facts:
        if excluded(f, rules):
            if f.record_id in pinned and f.lifecycle is not LifecycleState.FORGOTTEN:
                excluded_pins.append(f.record_id)
            continue
        reason = Reason.PINNED if f.record_id in pinned else reason_for(f, rules, now, used)
        if reason is None:
            continue
        rank = CLASS_ORDER.index(reason)
        ranked.append((rank, -touched_at(f, used).timestamp(), f.record_id, reason, f))
    ranked.sort(key=lambda item: item[:3])
    members: dict[str, Reason] = {}
    by_reason: dict[Reason, int] = {}
    size = 0
    left_out = 0
    left_out_pins: list[str] = []
    for _rank, _age, record_id, reason, f in ranked:
        if len(members) >= budget.max_records or size + f.size_bytes > budget.max_bytes:
            left_out += 1
            if reason is Reason.PINNED:
                left_out_pins.append(record_id)
            continue
        members[record_id] = reason
        by_reason[reason] = by_reason.get(reason, 0) + 1
        size += f.size_bytes
    return Choice(
        members=members,
        size_bytes=size,
        left_out=left_out,
        left_out_pins=tuple(sorted(left_out_pins)),
        excluded_pins=tuple(sorted(excluded_pins)),
        by_reason=by_reason,
    )


# --- the wire: what a device reads and changes of its subset ------------------------


class SubsetEntry(WireModel):
    """How many records of one class a device's subset holds."""

    reason: Reason
    records: int


class SubsetView(WireModel):
    """One device's subset as the cloud last chose it: the policy, the pins, the counts."""

    device_id: str
    policy: SubsetPolicy
    pins: list[RecordId]
    records: int
    size_bytes: int
    by_reason: list[SubsetEntry]
    left_out: int
    left_out_pins: list[RecordId] = []
    excluded_pins: list[RecordId] = []
    chosen_at: UtcDatetime | None = None


def by_reason_entries(counts: Mapping[Reason, int]) -> list[SubsetEntry]:
    return [SubsetEntry(reason=r, records=counts[r]) for r in CLASS_ORDER if counts.get(r)]
