"""The subset policy (``protocol.subset.choose``): what a device keeps, within a budget."""

from __future__ import annotations

import itertools
import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.model import ContentType, Layer, LifeArea, LifecycleState, TimeKind
from protocol.subset import (
    CLASS_ORDER,
    Reason,
    SubsetBudget,
    SubsetFacts,
    SubsetPolicy,
    SubsetRules,
    choose,
    reason_for,
    touched_at,
)

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def fact(n: int, **over: object) -> SubsetFacts:
    base: dict[str, object] = {
        "record_id": f"rec_{n:016d}",
        "lifecycle": LifecycleState.ACTIVE,
        "content_type": ContentType.PERSONAL_FACT,
        "layer": Layer.CONSOLIDATED_FACT,
        "time_kind": TimeKind.PERMANENT,
        "learned_at": NOW - timedelta(days=400),
        "changed_at": NOW - timedelta(days=400),
        "size_bytes": 100,
    }
    base.update(over)
    return SubsetFacts(**base)  # type: ignore[arg-type]


def test_each_rule_class_holds_what_it_names_and_nothing_when_off() -> None:
    rules = SubsetRules()
    cases = {
        Reason.RULE: fact(1, layer=Layer.BEHAVIOUR_RULE),
        Reason.PREFERENCE: fact(2, content_type=ContentType.PREFERENCE),
        Reason.UPCOMING: fact(
            3, content_type=ContentType.EVENT, valid_from=NOW + timedelta(days=3)
        ),
        Reason.FOR_NOW: fact(4, time_kind=TimeKind.FOR_NOW),
        Reason.PEOPLE: fact(5, content_type=ContentType.RELATIONSHIP),
        Reason.RECENT: fact(6, learned_at=NOW, changed_at=NOW - timedelta(days=2)),
    }
    for reason, f in cases.items():
        assert reason_for(f, rules, NOW) is reason, reason
    assert (
        reason_for(fact(7), rules, NOW, {"rec_0000000000000007": (3, NOW - timedelta(days=90))})
        is Reason.FREQUENT
    )
    assert reason_for(fact(8), rules, NOW) is None  # old, unused, a plain fact
    off = SubsetRules(
        behaviour_rules=False,
        preferences=False,
        upcoming_days=0,
        for_now=False,
        people=False,
        frequent_uses=0,
        recent_days=0,
    )
    assert all(reason_for(f, off, NOW) is None for f in cases.values())


def test_what_is_not_in_force_is_not_kept_for_its_class() -> None:
    rules = SubsetRules(recent_days=0)
    not_in_use = fact(1, content_type=ContentType.PREFERENCE, lifecycle=LifecycleState.NOT_IN_USE)
    expired = fact(2, time_kind=TimeKind.FOR_NOW, valid_until=NOW - timedelta(days=1))
    past_event = fact(3, content_type=ContentType.EVENT, valid_from=NOW - timedelta(days=10))
    far_event = fact(4, content_type=ContentType.EVENT, valid_from=NOW + timedelta(days=60))
    for f in (not_in_use, expired, past_event, far_event):
        assert reason_for(f, rules, NOW) is None, f


def test_forgotten_and_other_area_records_are_never_kept_even_pinned() -> None:
    forgotten = fact(1, lifecycle=LifecycleState.FORGOTTEN, content_type=ContentType.PREFERENCE)
    work_only = fact(2, content_type=ContentType.PREFERENCE, usage_area=LifeArea.WORK)
    home = fact(3, content_type=ContentType.PREFERENCE, usage_area=LifeArea.HOME)
    policy = SubsetPolicy(rules=SubsetRules(areas=[LifeArea.HOME, LifeArea.GENERAL]))
    pins = [forgotten.record_id, work_only.record_id]
    choice = choose([forgotten, work_only, home], policy, pins, NOW)
    assert list(choice.members) == [home.record_id]
    assert choice.excluded_pins == (work_only.record_id,)
    everywhere = choose([work_only], SubsetPolicy(), [], NOW)  # no areas named: all areas
    assert list(everywhere.members) == [work_only.record_id]


def test_pins_come_first_then_classes_in_order_then_the_most_recently_touched() -> None:
    facts = [
        fact(1, learned_at=NOW, changed_at=NOW - timedelta(days=1)),  # recent
        fact(2, content_type=ContentType.PREFERENCE, changed_at=NOW - timedelta(days=50)),
        fact(3, content_type=ContentType.PREFERENCE, changed_at=NOW - timedelta(days=5)),
        fact(4, layer=Layer.BEHAVIOUR_RULE),
        fact(5),  # kept only because it is pinned
    ]
    choice = choose(facts, SubsetPolicy(), ["rec_0000000000000005"], NOW)
    assert list(choice.members) == [
        "rec_0000000000000005",
        "rec_0000000000000004",
        "rec_0000000000000003",
        "rec_0000000000000002",
        "rec_0000000000000001",
    ]
    assert [choice.members[r] for r in choice.members] == [
        Reason.PINNED,
        Reason.RULE,
        Reason.PREFERENCE,
        Reason.PREFERENCE,
        Reason.RECENT,
    ]


def test_a_record_that_does_not_fit_is_left_out_and_counted() -> None:
    big = fact(1, content_type=ContentType.PREFERENCE, size_bytes=900)
    small = fact(
        2, content_type=ContentType.PREFERENCE, size_bytes=50, changed_at=NOW - timedelta(days=500)
    )
    pinned_big = fact(3, size_bytes=2000)
    policy = SubsetPolicy(budget=SubsetBudget(max_records=10, max_bytes=1000))
    choice = choose([big, small, pinned_big], policy, [pinned_big.record_id], NOW)
    assert set(choice.members) == {big.record_id, small.record_id}
    assert choice.size_bytes == 950
    assert choice.left_out == 1 and choice.left_out_pins == (pinned_big.record_id,)


# --- properties -------------------------------------------------------------------------

content_types = st.sampled_from(list(ContentType))
facts_strategy = st.lists(
    st.builds(
        lambda n, ct, layer, tk, life, age, size, frm, area, rel: fact(
            n,
            content_type=ct,
            layer=layer,
            time_kind=tk,
            lifecycle=life,
            learned_at=NOW - timedelta(days=age + 1),
            changed_at=NOW - timedelta(days=age),
            size_bytes=size,
            valid_from=None if frm is None else NOW + timedelta(days=frm),
            usage_area=area,
            life_areas=(LifeArea.RELATIONSHIPS,) if rel else (LifeArea.GENERAL,),
        ),
        st.integers(0, 10**6),
        content_types,
        st.sampled_from(list(Layer)),
        st.sampled_from(list(TimeKind)),
        st.sampled_from(list(LifecycleState)),
        st.integers(0, 800),
        st.integers(1, 5000),
        st.none() | st.integers(-30, 60),
        st.none() | st.sampled_from(list(LifeArea)),
        st.booleans(),
    ),
    max_size=60,
    unique_by=lambda f: f.record_id,
)
policies = st.builds(
    SubsetPolicy,
    rules=st.builds(
        SubsetRules,
        behaviour_rules=st.booleans(),
        preferences=st.booleans(),
        upcoming_days=st.integers(0, 30),
        for_now=st.booleans(),
        people=st.booleans(),
        frequent_uses=st.integers(0, 5),
        recent_days=st.integers(0, 400),
        areas=st.none() | st.lists(st.sampled_from(list(LifeArea)), unique=True),
    ),
    budget=st.builds(
        SubsetBudget, max_records=st.integers(0, 40), max_bytes=st.integers(0, 100_000)
    ),
)


@settings(max_examples=200, deadline=None)
@given(facts=facts_strategy, policy=policies, data=st.data())
def test_choose_keeps_the_budget_and_the_walls_and_is_deterministic(
    facts: list[SubsetFacts], policy: SubsetPolicy, data: st.DataObject
) -> None:
    ids = [f.record_id for f in facts]
    pins = data.draw(st.lists(st.sampled_from(ids), unique=True) if ids else st.just([]))
    uses = {
        r: (data.draw(st.integers(1, 9)), NOW - timedelta(days=data.draw(st.integers(0, 90))))
        for r in data.draw(st.lists(st.sampled_from(ids), unique=True) if ids else st.just([]))
    }
    choice = choose(facts, policy, pins, NOW, uses)
    by_id = {f.record_id: f for f in facts}
    # the budget holds
    assert len(choice.members) <= policy.budget.max_records
    assert choice.size_bytes == sum(by_id[r].size_bytes for r in choice.members)
    assert choice.size_bytes <= policy.budget.max_bytes
    # the walls hold: nothing forgotten, nothing "only for" an area the device is not for
    for record_id, reason in choice.members.items():
        f = by_id[record_id]
        assert f.lifecycle is not LifecycleState.FORGOTTEN
        areas = policy.rules.areas
        assert areas is None or f.usage_area is None or f.usage_area in areas
        assert (reason is Reason.PINNED) == (record_id in pins)
        if reason is not Reason.PINNED:
            assert reason_for(f, policy.rules, NOW, uses) is reason
    # classes in order: a record left out ranks after every member of a higher class
    order = [CLASS_ORDER.index(r) for r in choice.members.values()]
    assert order == sorted(order)
    # the same inputs in another order choose the same subset, in the same order
    shuffled = list(facts)
    random.Random(len(facts)).shuffle(shuffled)
    again = choose(shuffled, policy, list(reversed(pins)), NOW, uses)
    assert list(again.members.items()) == list(choice.members.items())


@settings(max_examples=100, deadline=None)
@given(facts=facts_strategy)
def test_with_room_to_spare_every_wanted_record_is_kept(facts: list[SubsetFacts]) -> None:
    policy = SubsetPolicy(budget=SubsetBudget(max_records=1000, max_bytes=10**9))
    choice = choose(facts, policy, [], NOW)
    wanted = {f.record_id for f in facts if reason_for(f, policy.rules, NOW) is not None}
    wanted -= {f.record_id for f in facts if f.lifecycle is LifecycleState.FORGOTTEN}
    assert set(choice.members) == wanted and choice.left_out == 0
    # within a class, the most recently touched first
    by_id = {f.record_id: f for f in facts}
    kept = list(choice.members)
    for a, b in itertools.pairwise(kept):
        if choice.members[a] is choice.members[b]:
            assert touched_at(by_id[a], {}) >= touched_at(by_id[b], {})
