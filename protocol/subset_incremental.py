"""The device subset, kept up to date from changes instead of chosen again from scratch.

Invariants:
- After any sequence of ``update`` calls, ``choice()`` equals
  ``protocol.subset.choose`` over the same facts, policy, pins, uses and time (the
  reference; a Hypothesis test holds them equal). Pure: no I/O, no clock reads.
- A record's class is recomputed only when something it depends on moved: its facts,
  its pin, its uses, or the clock crossing one of its own breakpoints (the end of its
  recent window, its event's upcoming window opening or closing, its ``valid_until``).
  Between breakpoints ``reason_for`` is constant in ``now``; a breakpoint at or before
  ``now`` is due, and a record is kept due at its breakpoint until an update past it.
- The candidates (records some class holds) are kept sorted by the key ``choose``
  sorts by; filling the budget walks them in that order and stops once the record
  budget is full, so a choice costs the records chosen, not the records of the space.
- Time never runs backwards here: an update at an earlier ``now`` rebuilds everything.
- ``delta()`` says what entered and left since the last ``delta()`` (the first: since
  nothing), with the choice's counts; applied to the previous members it gives
  ``choice()``'s members, the entered ones in ``choice()``'s order. While the choice is
  the head of the candidates (no record skipped for the byte budget, before and after)
  it looks only at the records placed again and the ones around the record budget's
  edge, so it costs what changed, not the subset; otherwise it walks (``choice()``).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

from protocol.model import ContentType, LifecycleState
from protocol.subset import (
    CLASS_ORDER,
    Choice,
    Reason,
    SubsetFacts,
    SubsetPolicy,
    Uses,
    excluded,
    reason_for,
    touched_at,
)

_Key = tuple[int, float, str]


@dataclass(frozen=True, slots=True)
class ChoiceDelta:
    """What entered and left a device's choice since the last ``delta()``, and the
    choice's counts as ``Choice`` has them."""

    entered: dict[str, Reason]  # in the order ``choose`` chose them
    left: frozenset[str]
    records: int
    size_bytes: int
    left_out: int
    left_out_pins: tuple[str, ...]
    excluded_pins: tuple[str, ...]
    by_reason: dict[Reason, int]


class IncrementalChooser:
    """One device's subset over one space's facts, updated change by change."""

    def __init__(
        self,
        facts: Iterable[SubsetFacts],
        policy: SubsetPolicy,
        pins: Iterable[str],
        now: datetime,
        uses: Uses | None = None,
    ) -> None:
        self.policy = policy
        self._facts: dict[str, SubsetFacts] = {f.record_id: f for f in facts}
        self._pins: frozenset[str] = frozenset(pins)
        self._uses: dict[str, tuple[int, datetime]] = dict(uses or {})
        self._now = now
        # the last delta()'s members (reason, size), whether they were the candidates'
        # head, and the records placed again since (None: everything, e.g. rebuilt)
        self._base: dict[str, tuple[Reason, int]] = {}
        self._base_head = False
        self._base_size = 0
        self._base_by_reason: dict[Reason, int] = {}
        self._rebuild()

    # --- what it holds ----------------------------------------------------------------

    @property
    def now(self) -> datetime:
        return self._now

    def _rebuild(self) -> None:
        self._keys: dict[str, tuple[_Key, Reason]] = {}
        self._sorted: list[_Key] = []
        self._excluded_pins: set[str] = set()
        self._due: list[tuple[datetime, str]] = []
        self._pending: set[str] | None = None
        for record_id in self._facts:
            self._place(record_id, sort=False)
        self._sorted.sort()

    def _breakpoints(self, f: SubsetFacts) -> list[datetime]:
        rules = self.policy.rules
        out: list[datetime] = []
        if rules.recent_days:
            out.append(touched_at(f, self._uses) + timedelta(days=rules.recent_days))
        if rules.upcoming_days and f.content_type is ContentType.EVENT and f.valid_from:
            out.append(f.valid_from - timedelta(days=rules.upcoming_days))
            out.append(f.valid_from + timedelta(days=1))
        if f.valid_until is not None:
            out.append(f.valid_until)
        return out

    def _unplace(self, record_id: str) -> None:
        self._excluded_pins.discard(record_id)
        placed = self._keys.pop(record_id, None)
        if placed is not None:
            i = bisect_left(self._sorted, placed[0])
            assert self._sorted[i] == placed[0]
            del self._sorted[i]

    def _place(self, record_id: str, *, sort: bool = True) -> None:
        """Where ``record_id`` stands now (call after ``_unplace``)."""
        f = self._facts.get(record_id)
        if f is None:
            return
        rules = self.policy.rules
        if excluded(f, rules):
            if record_id in self._pins and f.lifecycle is not LifecycleState.FORGOTTEN:
                self._excluded_pins.add(record_id)
            return
        for at in self._breakpoints(f):
            if at >= self._now:
                heapq.heappush(self._due, (at, record_id))
        pinned = record_id in self._pins
        reason = Reason.PINNED if pinned else reason_for(f, rules, self._now, self._uses)
        if reason is None:
            return
        key = (CLASS_ORDER.index(reason), -touched_at(f, self._uses).timestamp(), record_id)
        self._keys[record_id] = (key, reason)
        if sort:
            insort(self._sorted, key)
        else:
            self._sorted.append(key)

    # --- changing it ------------------------------------------------------------------

    def update(
        self,
        now: datetime,
        changed: Mapping[str, SubsetFacts | None] | None = None,
        pins: Iterable[str] | None = None,
        uses: Uses | None = None,
    ) -> int:
        """Bring the subset to ``now``: ``changed`` maps each record whose facts moved to
        its facts (None: gone, e.g. forgotten); ``pins`` and ``uses`` (when given) are
        the device's whole pins and the space's whole uses. Returns how many records
        were placed again."""
        touched: set[str] = set()
        for record_id, f in (changed or {}).items():
            if f is None:
                self._facts.pop(record_id, None)
            else:
                self._facts[record_id] = f
            touched.add(record_id)
        if pins is not None:
            new_pins = frozenset(pins)
            touched |= new_pins ^ self._pins
            self._pins = new_pins
        if uses is not None and uses != self._uses:
            for record_id in self._uses.keys() | uses.keys():
                if self._uses.get(record_id) != uses.get(record_id):
                    touched.add(record_id)
            self._uses = dict(uses)
        if now < self._now:
            self._now = now
            self._rebuild()
            return len(self._facts)
        self._now = now
        if len(self._due) > 4 * len(self._facts) + 1024:  # stale breakpoints: start afresh
            self._rebuild()
            return len(self._facts)
        while self._due and self._due[0][0] <= now:
            touched.add(heapq.heappop(self._due)[1])
        for record_id in touched:
            self._unplace(record_id)
            self._place(record_id)
        if self._pending is not None:
            self._pending |= touched
        return len(touched)

    # --- reading it -------------------------------------------------------------------

    def choice(self) -> Choice:
        """What ``choose`` would choose now: walk the candidates in order until the
        record budget is full; the rest are left out."""
        return self._walk()[0]

    def _walk(self) -> tuple[Choice, bool]:
        """``choice()``, and whether it is the head of the candidates (none skipped)."""
        budget = self.policy.budget
        skipped = 0
        members: dict[str, Reason] = {}
        by_reason: dict[Reason, int] = {}
        size = 0
        left_out = 0
        left_out_pins: list[str] = []
        pinned_rank = CLASS_ORDER.index(Reason.PINNED)
        for i, key in enumerate(self._sorted):
            record_id = key[2]
            if len(members) >= budget.max_records:
                left_out += len(self._sorted) - i
                for rest in self._sorted[i:]:
                    if rest[0] != pinned_rank:
                        break
                    left_out_pins.append(rest[2])
                break
            reason = self._keys[record_id][1]
            f_size = self._facts[record_id].size_bytes
            if size + f_size > budget.max_bytes:
                left_out += 1
                skipped += 1
                if reason is Reason.PINNED:
                    left_out_pins.append(record_id)
                continue
            members[record_id] = reason
            by_reason[reason] = by_reason.get(reason, 0) + 1
            size += f_size
        return Choice(
            members=members,
            size_bytes=size,
            left_out=left_out,
            left_out_pins=tuple(sorted(left_out_pins)),
            excluded_pins=tuple(sorted(self._excluded_pins)),
            by_reason=by_reason,
        ), skipped == 0

    def delta(self) -> ChoiceDelta:
        """What entered and left since the last ``delta()``, and the counts now."""
        if self._pending is not None and self._base_head:
            fast = self._head_delta(self._pending)
            if fast is not None:
                self._pending = set()
                return fast
        choice, head = self._walk()
        base = self._base
        self._base = {
            r: (reason, self._facts[r].size_bytes) for r, reason in choice.members.items()
        }
        self._base_head = head
        self._base_size = choice.size_bytes
        self._base_by_reason = dict(choice.by_reason)
        self._pending = set()
        return ChoiceDelta(
            entered={r: why for r, why in choice.members.items() if r not in base},
            left=frozenset(r for r in base if r not in choice.members),
            records=len(choice.members),
            size_bytes=choice.size_bytes,
            left_out=choice.left_out,
            left_out_pins=choice.left_out_pins,
            excluded_pins=choice.excluded_pins,
            by_reason=choice.by_reason,
        )

    def _head_delta(self, touched: set[str]) -> ChoiceDelta | None:
        """The delta when the last one was the candidates' head and the new choice is
        too: the members are the first ``max_records`` candidates, so only a record
        placed again or one within ``len(touched)`` places of that edge can change
        sides. None when the new head does not fit the byte budget (a walk decides)."""
        budget = self.policy.budget
        edge = budget.max_records
        n = len(self._sorted)
        near = {
            key[2]
            for key in self._sorted[max(0, edge - len(touched) - 1) : edge + len(touched) + 1]
        }
        base = self._base
        entered: dict[str, Reason] = {}
        left: set[str] = set()
        moved: dict[str, tuple[Reason, int]] = {}  # members staying, placed again
        for record_id in touched | near:
            placed = self._keys.get(record_id)
            member = placed is not None and bisect_left(self._sorted, placed[0]) < edge
            if member:
                assert placed is not None
                now_is = (placed[1], self._facts[record_id].size_bytes)
                if record_id not in base:
                    entered[record_id] = placed[1]
                    moved[record_id] = now_is
                elif base[record_id] != now_is:
                    moved[record_id] = now_is
            elif record_id in base:
                left.add(record_id)
        return self._apply_head(entered, left, moved, n)

    def _apply_head(
        self,
        entered: dict[str, Reason],
        left: set[str],
        moved: dict[str, tuple[Reason, int]],
        candidates: int,
    ) -> ChoiceDelta | None:
        """Move the base by a head delta (unless the new head is over the byte budget)."""
        base, budget = self._base, self.policy.budget
        size = self._base_size - sum(base[r][1] for r in left)
        size += sum(now_is[1] - (base[r][1] if r in base else 0) for r, now_is in moved.items())
        if size > budget.max_bytes:
            return None
        counts = self._base_by_reason
        for record_id in left:
            self._count(counts, base.pop(record_id)[0], -1)
        for record_id, now_is in moved.items():
            if record_id in base:
                self._count(counts, base[record_id][0], -1)
            base[record_id] = now_is
            self._count(counts, now_is[0], 1)
        self._base_size = size
        edge = budget.max_records
        pinned_rank = CLASS_ORDER.index(Reason.PINNED)
        left_out_pins: list[str] = []
        for rest in self._sorted[edge:]:
            if rest[0] != pinned_rank:
                break
            left_out_pins.append(rest[2])
        return ChoiceDelta(
            entered={r: entered[r] for r in sorted(entered, key=lambda r: self._keys[r][0])},
            left=frozenset(left),
            records=len(base),
            size_bytes=size,
            left_out=max(0, candidates - edge),
            left_out_pins=tuple(sorted(left_out_pins)),
            excluded_pins=tuple(sorted(self._excluded_pins)),
            by_reason=dict(counts),
        )

    @staticmethod
    def _count(counts: dict[Reason, int], reason: Reason, by: int) -> None:
        n = counts.get(reason, 0) + by
        if n:
            counts[reason] = n
        else:
            counts.pop(reason, None)
