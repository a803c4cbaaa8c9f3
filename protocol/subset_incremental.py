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
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Mapping
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
        return len(touched)

    # --- reading it -------------------------------------------------------------------

    def choice(self) -> Choice:
        """What ``choose`` would choose now: walk the candidates in order until the
        record budget is full; the rest are left out."""
        budget = self.policy.budget
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
        )
