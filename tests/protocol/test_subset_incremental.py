"""The incremental subset (``protocol.subset_incremental``) always equals a full choose.

The key invariant of issue 21 item 3: after any sequence of changes (records new,
changed or gone, pins, uses, the clock moving, often exactly onto a record's window
edge, sometimes backwards), the kept subset is ``protocol.subset.choose`` over the
same inputs, members, reasons, counts and left-out lists alike.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from protocol.model import ContentType, Layer, LifeArea, LifecycleState, TimeKind
from protocol.subset import SubsetBudget, SubsetFacts, SubsetPolicy, SubsetRules, choose
from protocol.subset_incremental import IncrementalChooser

START = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
IDS = [f"rec_{n:04d}" for n in range(14)]

ids = st.sampled_from(IDS)
day_offsets = st.integers(-40, 40)


@st.composite
def facts(draw: st.DrawFn) -> SubsetFacts:
    age = draw(st.integers(0, 60))
    frm = draw(st.none() | day_offsets)
    until = draw(st.none() | day_offsets)
    return SubsetFacts(
        record_id=draw(ids),
        lifecycle=draw(st.sampled_from(list(LifecycleState))),
        content_type=draw(st.sampled_from(list(ContentType))),
        layer=draw(st.sampled_from(list(Layer))),
        time_kind=draw(st.sampled_from(list(TimeKind))),
        learned_at=START - timedelta(days=age + 1),
        changed_at=START - timedelta(days=age, hours=draw(st.sampled_from([0, 0, 6, 12]))),
        size_bytes=draw(st.integers(1, 3000)),
        valid_from=None if frm is None else START + timedelta(days=frm),
        valid_until=None if until is None else START + timedelta(days=until),
        life_areas=draw(st.sampled_from([(), (LifeArea.RELATIONSHIPS,), (LifeArea.WORK,)])),
        usage_area=draw(st.none() | st.sampled_from([LifeArea.WORK, LifeArea.HEALTH])),
    )


policies = st.builds(
    SubsetPolicy,
    rules=st.builds(
        SubsetRules,
        behaviour_rules=st.booleans(),
        preferences=st.booleans(),
        upcoming_days=st.integers(0, 20),
        for_now=st.booleans(),
        people=st.booleans(),
        frequent_uses=st.integers(0, 4),
        recent_days=st.integers(0, 30),
        areas=st.none() | st.lists(st.sampled_from(list(LifeArea)), unique=True),
    ),
    budget=st.builds(
        SubsetBudget, max_records=st.integers(0, 10), max_bytes=st.integers(0, 20_000)
    ),
)


class IncrementalEqualsFullChoose(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.facts: dict[str, SubsetFacts] = {}
        self.pins: set[str] = set()
        self.uses: dict[str, tuple[int, datetime]] = {}
        self.now = START
        self.policy = SubsetPolicy()
        self.chooser = IncrementalChooser([], self.policy, [], self.now)
        self.held: set[str] = set()  # the members the deltas so far add up to

    @rule(policy=policies, start=st.lists(facts(), max_size=10))
    def new_policy(self, policy: SubsetPolicy, start: list[SubsetFacts]) -> None:
        """A policy change (or the first choice): the cloud builds a chooser afresh."""
        for f in start:
            self.facts[f.record_id] = f
        self.policy = policy
        self.chooser = IncrementalChooser(
            self.facts.values(), policy, self.pins, self.now, self.uses
        )
        self.held = set()  # a new chooser's first delta is against nothing

    @rule(f=facts())
    def record_changed(self, f: SubsetFacts) -> None:
        self.facts[f.record_id] = f
        self.chooser.update(self.now, {f.record_id: f})

    @rule(record_id=ids)
    def record_gone(self, record_id: str) -> None:
        self.facts.pop(record_id, None)
        self.chooser.update(self.now, {record_id: None})

    @rule(pins=st.sets(ids, max_size=5))
    def pins_changed(self, pins: set[str]) -> None:
        self.pins = pins
        self.chooser.update(self.now, pins=pins)

    @rule(record_id=ids, count=st.integers(1, 6), days_ago=st.integers(-2, 40))
    def used(self, record_id: str, count: int, days_ago: int) -> None:
        self.uses[record_id] = (count, self.now - timedelta(days=days_ago))
        self.chooser.update(self.now, uses=self.uses)

    @rule(hours=st.sampled_from([0, 1, 6, 12, 24, 24, 48, 24 * 7, 24 * 15, -24]))
    def time_passes(self, hours: int) -> None:
        self.now += timedelta(hours=hours)
        self.chooser.update(self.now)

    @rule(hours=st.integers(0, 24 * 10), changed=st.lists(facts(), max_size=3))
    def pull_after_a_while(self, hours: int, changed: list[SubsetFacts]) -> None:
        """Time passing and changes arriving in one update, as at a pull."""
        self.now += timedelta(hours=hours)
        batch: dict[str, SubsetFacts | None] = {}
        for f in changed:
            self.facts[f.record_id] = f
            batch[f.record_id] = f
        self.chooser.update(self.now, batch, pins=self.pins, uses=self.uses)

    @rule()
    def pulled(self) -> None:
        """A delta, applied to the members the earlier ones added up to, is the full
        choose: members, the entered ones' reasons and order, and every count."""
        delta = self.chooser.delta()
        expected = choose(self.facts.values(), self.policy, self.pins, self.now, self.uses)
        assert delta.left <= self.held
        assert self.held.isdisjoint(delta.entered)
        self.held = (self.held - delta.left) | set(delta.entered)
        assert self.held == set(expected.members)
        assert list(delta.entered) == [r for r in expected.members if r in delta.entered]
        assert all(expected.members[r] is why for r, why in delta.entered.items())
        assert (delta.records, delta.size_bytes, delta.left_out) == (
            len(expected.members),
            expected.size_bytes,
            expected.left_out,
        )
        assert delta.left_out_pins == expected.left_out_pins
        assert delta.excluded_pins == expected.excluded_pins
        assert delta.by_reason == expected.by_reason

    @invariant()
    def equals_the_full_choose(self) -> None:
        expected = choose(self.facts.values(), self.policy, self.pins, self.now, self.uses)
        got = self.chooser.choice()
        assert got == expected
        assert list(got.members) == list(expected.members)  # the same order too


IncrementalEqualsFullChoose.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
test_incremental_equals_full_choose = IncrementalEqualsFullChoose.TestCase


def test_one_change_places_one_record_in_a_big_space() -> None:
    """The point of it: a change in a space of 20k records re-places that one record."""
    base = SubsetFacts(
        record_id="x",
        lifecycle=LifecycleState.ACTIVE,
        content_type=ContentType.PERSONAL_FACT,
        layer=Layer.CONSOLIDATED_FACT,
        time_kind=TimeKind.PERMANENT,
        learned_at=START - timedelta(days=400),
        changed_at=START - timedelta(days=400),
        size_bytes=100,
    )
    space = [replace(base, record_id=f"rec_{i:06d}") for i in range(20_000)]
    chooser = IncrementalChooser(space, SubsetPolicy(), [], START)
    new = replace(base, record_id="rec_new", changed_at=START)
    placed = chooser.update(START + timedelta(minutes=1), {"rec_new": new})
    assert placed == 1
    assert set(chooser.choice().members) == {"rec_new"}


def test_one_change_delta_does_not_walk_the_subset(monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-change pull's delta in a space whose 5,000-record choice is the head of its
    candidates looks at the change and the budget's edge, never walks the subset."""
    base = SubsetFacts(
        record_id="x",
        lifecycle=LifecycleState.ACTIVE,
        content_type=ContentType.PERSONAL_FACT,
        layer=Layer.CONSOLIDATED_FACT,
        time_kind=TimeKind.PERMANENT,
        learned_at=START - timedelta(days=400),
        changed_at=START - timedelta(days=1),
        size_bytes=100,
    )
    space = [
        replace(base, record_id=f"rec_{i:06d}", changed_at=START - timedelta(minutes=i))
        for i in range(20_000)
    ]
    policy = SubsetPolicy(rules=SubsetRules(recent_days=30))
    chooser = IncrementalChooser(space, policy, [], START)
    assert len(chooser.delta().entered) == 5000
    monkeypatch.setattr(chooser, "_walk", lambda: pytest.fail("delta() walked the subset"))
    new = replace(base, record_id="rec_new", changed_at=START)
    chooser.update(START + timedelta(minutes=1), {"rec_new": new})
    delta = chooser.delta()
    assert list(delta.entered) == ["rec_new"]
    assert delta.left == {"rec_004999"}
    assert delta.records == 5000 and delta.left_out == 15_001
