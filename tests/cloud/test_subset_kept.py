"""The cloud keeps each device's choice and updates it from changes (issue 21 item 3),
against every record store: a pull after one change places that one record again,
and after pushes, pins, a policy change, forgets and the clock passing, the kept
choice still equals ``protocol.subset.choose`` over the whole space's facts."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import event

from cloud.service import CloudService
from cloud.store.sql_subset import SubsetQueries
from cloud.subset import FactsCache
from protocol.messages import PinRequest, PullRequest, SubsetChange, SubsetPolicyRequest
from protocol.subset import SubsetBudget, SubsetPolicy, SubsetRules, choose
from protocol.subset_incremental import IncrementalChooser
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


def test_a_one_change_pull_reads_no_whole_membership_and_walks_no_choice(
    service: CloudService, ops: Ops, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pull after pushes brings the kept choice up to date from what changed: it
    neither reads every member from the store nor walks the whole choice, and what it
    logs, keeps and reports equals a full choice over the whole space (a record the
    device pushed itself is a member already, so it is not logged as entering)."""
    laptop, phone = new_user(service, "ada", "laptop", "phone")
    records = [remember(service, ops, laptop, n) for n in range(32)]
    tight = SubsetPolicy(budget=SubsetBudget(max_records=30))
    service.set_subset_policy(phone.space_id, phone.device_id, SubsetPolicyRequest(policy=tight))
    cursor = pull_all(service, phone, None)
    clock.advance(timedelta(minutes=5))
    cursor = pull_all(service, phone, cursor)  # the chooser's base is the saved choice
    clock.advance(timedelta(minutes=5))
    theirs = remember(service, ops, laptop, 40)
    clock.advance(timedelta(minutes=1))
    own = remember(service, ops, phone, 41)
    with service.store.session(phone.space_id) as s:
        before = s.subset_members(phone.space_id, phone.device_id)  # with its own record

    def refuse(*_args: Any) -> Any:
        pytest.fail("a one-change pull read or walked the whole subset")

    with monkeypatch.context() as patch:
        patch.setattr(SubsetQueries, "subset_members", refuse)
        patch.setattr(IncrementalChooser, "choice", refuse)
        patch.setattr(IncrementalChooser, "_walk", refuse)
        page = service.pull(phone.space_id, phone.device_id, PullRequest(cursor=cursor))
    subset = [c for c in page.changes if isinstance(c, SubsetChange)]
    choice = full_choose(service, phone, clock)
    left = sorted(before - set(choice.members))
    assert len(left) == 2 and set(left) <= set(records)
    assert [(c.record_id, c.entered) for c in subset] == [
        *((r, False) for r in left),
        (theirs, True),
    ]
    assert {theirs, own} <= set(choice.members) and len(choice.members) == 30
    with service.store.session(phone.space_id) as s:
        assert s.subset_members(phone.space_id, phone.device_id) == set(choice.members)
    assert kept_choice(service, phone) == choice


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)  # the plan read is SQLite's
def test_the_facts_refresh_reads_changed_records_by_index(service: CloudService) -> None:
    """ "Records changed since seq" reads each side through its own index (migration 16,
    ``records_state``; ``records_created``), never every record of the space."""
    assert service.store.dialect == "sqlite"
    seen: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cur: Any, statement: str, params: Any, *_rest: Any) -> None:
        seen.append((statement, params))

    event.listen(service.store.engine, "before_cursor_execute", capture)
    try:
        with service.store.session() as s:
            s.records_changed_since("space_x", 7)
    finally:
        event.remove(service.store.engine, "before_cursor_execute", capture)
    statement, params = next((st, p) for st, p in seen if "FROM records" in st)
    with service.store.engine.connect() as conn:
        plan = " | ".join(
            str(row[-1]) for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", params)
        )
    assert "records_state" in plan and "records_created" in plan, plan
    assert "SCAN records" not in plan, plan
