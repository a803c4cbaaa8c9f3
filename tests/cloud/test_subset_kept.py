"""The cloud keeps each device's choice and updates it from changes (issue 21 item 3),
against every record store: a pull after one change places that one record again,
and after pushes, pins, a policy change, forgets and the clock passing, the kept
choice still equals ``protocol.subset.choose`` over the whole space's facts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from cloud.service import CloudService
from cloud.subset import FactsCache
from protocol.messages import PinRequest, PullRequest, SubsetPolicyRequest
from protocol.subset import SubsetBudget, SubsetPolicy, SubsetRules, choose
from tests.cloud.conftest import Device, FakeClock, Ops, applied, new_user, push


def pull_all(service: CloudService, device: Device, cursor: str | None) -> str | None:
    while True:
        page = service.pull(device.space_id, device.device_id, PullRequest(cursor=cursor))
        cursor = page.cursor
        if not page.has_more:
            return cursor


def remember(service: CloudService, ops: Ops, writer: Device, n: int, **extra: Any) -> str:
    episode, record = f"ep_{n:016d}", f"rec_{n:016d}"
    text = f"Sentence number {n} is here."
    applied(
        push(
            service,
            writer,
            ops.episode(episode, text),
            ops.remember(record, text, [episode], **extra),
        )
    )
    return record


def full_choose(service: CloudService, device: Device, clock: FakeClock) -> Any:
    keeper = service.subsets
    with service.store.session(device.space_id) as s:
        facts = keeper.facts.facts(s, device.space_id)
        policy = keeper.policy(s, device.space_id, device.device_id)
        pins = s.pins(device.space_id, device.device_id)
        uses = s.record_uses(device.space_id)
    return choose(facts.values(), policy, pins, clock(), uses)


def kept_choice(service: CloudService, device: Device) -> Any:
    with service.store.session(device.space_id, lock=True) as s:
        return service.subsets.evaluate(s, device.space_id, device.device_id, force=True).choice


def test_one_change_places_one_record_and_the_kept_choice_equals_a_full_choose(
    service: CloudService, ops: Ops, clock: FakeClock
) -> None:
    laptop, phone = new_user(service, "ada", "laptop", "phone")
    records = [remember(service, ops, laptop, n) for n in range(30)]
    cursor = pull_all(service, phone, None)
    assert service.subsets.placed(phone.space_id, phone.device_id) == 30  # built once

    clock.advance(timedelta(minutes=5))
    remember(service, ops, laptop, 30)
    cursor = pull_all(service, phone, cursor)
    assert service.subsets.placed(phone.space_id, phone.device_id) == 1

    # pins, a smaller budget, forgets, the clock past the recent window: still equal
    service.pin(phone.space_id, phone.device_id, PinRequest(record_id=records[3], pinned=True))
    assert kept_choice(service, phone) == full_choose(service, phone, clock)
    small = SubsetPolicy(rules=SubsetRules(recent_days=10), budget=SubsetBudget(max_records=12))
    service.set_subset_policy(phone.space_id, phone.device_id, SubsetPolicyRequest(policy=small))
    clock.advance(timedelta(days=9))
    remember(service, ops, laptop, 31)
    cursor = pull_all(service, phone, cursor)
    assert kept_choice(service, phone) == full_choose(service, phone, clock)
    clock.advance(timedelta(days=2))  # the first 31 leave the recent window, the pin stays
    cursor = pull_all(service, phone, cursor)
    choice = full_choose(service, phone, clock)
    assert set(choice.members) == {records[3], "rec_0000000000000031"}
    assert kept_choice(service, phone) == choice
    with service.store.session(phone.space_id) as s:
        assert s.subset_members(phone.space_id, phone.device_id) == set(choice.members)
    applied(push(service, laptop, ops.forget(records[3])))  # the pinned member is forgotten
    cursor = pull_all(service, phone, cursor)
    assert kept_choice(service, phone) == full_choose(service, phone, clock)


def test_a_forgotten_record_leaves_the_kept_facts_and_choice_at_once(
    service: CloudService, ops: Ops, clock: FakeClock
) -> None:
    """The oracle is a cache read from the store afresh: the kept facts are not allowed
    to keep a forgotten record live (it would hold a budget slot a true fact needs)."""
    laptop, phone = new_user(service, "ada", "laptop", "phone")
    records = [remember(service, ops, laptop, n) for n in range(5)]
    cursor = pull_all(service, phone, None)
    tight = SubsetPolicy(budget=SubsetBudget(max_records=4))
    service.set_subset_policy(phone.space_id, phone.device_id, SubsetPolicyRequest(policy=tight))
    cursor = pull_all(service, phone, cursor)
    applied(push(service, laptop, ops.forget(records[2])))
    pull_all(service, phone, cursor)
    with service.store.session(phone.space_id) as s:
        kept = service.subsets.facts.facts(s, phone.space_id)
        fresh = FactsCache(service.vault).facts(s, phone.space_id)
        policy = service.subsets.policy(s, phone.space_id, phone.device_id)
        members = s.subset_members(phone.space_id, phone.device_id)
    assert kept == fresh and records[2] not in kept
    choice = choose(fresh.values(), policy, set(), clock(), {})
    assert kept_choice(service, phone) == choice
    assert members == set(choice.members) and len(members) == 4
    assert records[2] not in members
