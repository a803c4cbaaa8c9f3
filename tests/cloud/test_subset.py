"""The device subset on the cloud, run against every record store (SQLite and
PostgreSQL): what each device is sent, what leaves, and that leaving is not forgetting."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cloud.errors import NotFound, PinRefused
from cloud.service import CloudService, decode_cursor, decode_subset_gen
from protocol.messages import (
    KeyDestruction,
    PinRequest,
    PullRequest,
    RecordUse,
    RecordVersionChange,
    SubsetChange,
    SubsetPolicyRequest,
)
from protocol.subset import Reason, SubsetBudget, SubsetPolicy, SubsetRules
from tests.cloud.conftest import Device, FakeClock, Ops, applied, new_user, push


def pull(
    service: CloudService, device: Device, cursor: str | None, **extra: Any
) -> tuple[list[Any], str]:
    changes: list[Any] = []
    while True:
        page = service.pull(device.space_id, device.device_id, PullRequest(cursor=cursor, **extra))
        changes.extend(page.changes)
        cursor = page.cursor
        extra = {}
        if not page.has_more:
            return changes, cursor


def entered(changes: list[Any]) -> list[str]:
    return [c.record_id for c in changes if isinstance(c, SubsetChange) and c.entered]


def left(changes: list[Any]) -> list[SubsetChange]:
    return [c for c in changes if isinstance(c, SubsetChange) and not c.entered]


def versions(changes: list[Any]) -> set[str]:
    return {c.record_id for c in changes if isinstance(c, RecordVersionChange)}


def set_policy(service: CloudService, device: Device, policy: SubsetPolicy) -> None:
    service.set_subset_policy(device.space_id, device.device_id, SubsetPolicyRequest(policy=policy))


PREFS_ONLY = SubsetRules(
    behaviour_rules=False,
    upcoming_days=0,
    for_now=False,
    people=False,
    frequent_uses=0,
    recent_days=0,
)


@pytest.fixture
def space(service: CloudService, ops: Ops, clock: FakeClock) -> tuple[Device, Device, list[str]]:
    """A laptop that wrote 6 records (3 preferences, 3 plain facts, oldest first), and
    a phone that has not pulled yet."""
    laptop, phone = new_user(service, "ada", "laptop", "phone")
    made = []
    for n in range(6):
        kind = "preference" if n % 2 == 0 else "personal_fact"
        episode, record = f"ep_{n:016d}", f"rec_{n:016d}"
        applied(
            push(
                service,
                laptop,
                ops.episode(episode, f"Sentence number {n} is here."),
                ops.remember(record, f"Sentence number {n} is here.", [episode], content_type=kind),
            )
        )
        made.append(record)
        clock.now += timedelta(minutes=1)
    return laptop, phone, made


def test_a_new_device_gets_its_subset_whole_and_once(
    service: CloudService, space: tuple[Device, Device, list[str]]
) -> None:
    _laptop, phone, made = space
    changes, cursor = pull(service, phone, None)
    # every record is recent: the default policy keeps them all, each sent once
    assert sorted(entered(changes)) == sorted(made)
    versions_sent = [c.record_id for c in changes if isinstance(c, RecordVersionChange)]
    assert sorted(versions_sent) == sorted(made)
    assert decode_subset_gen(cursor) == len(made)
    again, _ = pull(service, phone, cursor)
    assert again == []


def test_a_smaller_policy_evicts_the_rest_and_a_pin_brings_one_back(
    service: CloudService, space: tuple[Device, Device, list[str]]
) -> None:
    _laptop, phone, made = space
    changes, cursor = pull(service, phone, None)
    set_policy(
        service,
        phone,
        SubsetPolicy(rules=PREFS_ONLY, budget=SubsetBudget(max_records=2)),
    )
    changes, cursor = pull(service, phone, cursor)
    # the two newest preferences stay; everything else leaves, with its own episode
    gone = left(changes)
    assert sorted(c.record_id for c in gone) == sorted([made[0], made[1], made[3], made[5]])
    for change in gone:
        assert change.episode_ids == [change.record_id.replace("rec_", "ep_")]
    view = service.subset(phone.space_id, phone.device_id).subset
    assert view.records == 2 and view.left_out == 1
    assert [(e.reason, e.records) for e in view.by_reason] == [(Reason.PREFERENCE, 2)]
    # the record is still in the cloud, live: leaving is not forgetting
    assert service.record_status(phone.space_id, made[1]).lifecycle_state.value == "active"
    # the next pull confirms the leaves: the cloud no longer counts them as held
    pull(service, phone, cursor)
    with service.store.session(phone.space_id) as s:
        held = s.holdings_of(phone.space_id, phone.device_id, "record")
    assert held == {made[2], made[4]}
    # a pin brings one back whole, within the budget (it takes the older preference's place)
    service.pin(phone.space_id, phone.device_id, PinRequest(record_id=made[1]))
    changes, cursor = pull(service, phone, cursor)
    assert entered(changes) == [made[1]] and versions(changes) == {made[1]}
    assert [c.record_id for c in left(changes)] == [made[2]]


def test_pins_are_refused_clearly_for_unknown_and_forgotten_records(
    service: CloudService, ops: Ops, space: tuple[Device, Device, list[str]]
) -> None:
    laptop, phone, made = space
    with pytest.raises(NotFound, match="rec_9999999999999999 does not exist"):
        service.pin(phone.space_id, phone.device_id, PinRequest(record_id="rec_9999999999999999"))
    applied(push(service, laptop, ops.forget(made[0])))
    with pytest.raises(PinRefused, match=f"{made[0]} is permanently forgotten"):
        service.pin(phone.space_id, phone.device_id, PinRequest(record_id=made[0]))
    assert service.subset(phone.space_id, phone.device_id).subset.pins == []


def test_a_forgotten_member_is_announced_as_a_forget_never_as_a_leave(
    service: CloudService, ops: Ops, space: tuple[Device, Device, list[str]]
) -> None:
    laptop, phone, made = space
    _changes, cursor = pull(service, phone, None)
    applied(push(service, laptop, ops.forget(made[0])))
    changes, _ = pull(service, phone, cursor)
    assert left(changes) == []
    assert [c.record_id for c in changes if isinstance(c, KeyDestruction)] == [made[0]]


def test_a_device_gets_changes_only_of_what_it_keeps_and_every_forget(
    service: CloudService, ops: Ops, clock: FakeClock, space: tuple[Device, Device, list[str]]
) -> None:
    laptop, phone, made = space
    set_policy(service, phone, SubsetPolicy(rules=PREFS_ONLY))
    changes, cursor = pull(service, phone, None)
    assert sorted(entered(changes)) == [made[0], made[2], made[4]]
    assert versions(changes) == {made[0], made[2], made[4]}
    # offline a long time while the laptop corrects a kept and an unkept record and
    # forgets an unkept one: the phone gets the difference, not the space
    clock.now += timedelta(days=90)
    applied(
        push(
            service,
            laptop,
            ops.episode("ep_1000000000000000", "Sentence number 0 is there."),
            ops.correct(made[0], "Sentence number 0 is there.", ["ep_1000000000000000"]),
            ops.episode("ep_1000000000000001", "Sentence number 1 is there."),
            ops.correct(made[1], "Sentence number 1 is there.", ["ep_1000000000000001"]),
            ops.forget(made[3]),
        )
    )
    changes, _ = pull(service, phone, cursor)
    assert versions(changes) == {made[0]}
    assert {c.record_id for c in changes if isinstance(c, KeyDestruction)} == {made[3]}
    assert entered(changes) == [] and left(changes) == []


def test_an_area_the_device_is_not_for_leaves_and_a_protocol_2_device_mirrors_all(
    service: CloudService, ops: Ops, space: tuple[Device, Device, list[str]]
) -> None:
    laptop, phone, made = space
    _changes, cursor = pull(service, phone, None)
    set_policy(service, phone, SubsetPolicy(rules=SubsetRules(areas=["home", "general"])))
    applied(
        push(service, laptop, ops.simple("restrict_usage", made[0], restriction={"area": "work"}))
    )
    changes, _ = pull(service, phone, cursor)
    assert [c.record_id for c in left(changes)] == [made[0]]
    # a device speaking protocol 2 has no subset: it is sent the whole space, as before
    old = service.pull(
        laptop.space_id, laptop.device_id, PullRequest(protocol_version=2, limit=500)
    )
    assert not any(isinstance(c, SubsetChange) for c in old.changes)
    assert versions(old.changes) == set(made)


def test_uses_a_pull_reports_bring_a_record_used_often(
    service: CloudService, clock: FakeClock, space: tuple[Device, Device, list[str]]
) -> None:
    _laptop, phone, made = space
    rules = PREFS_ONLY.model_copy(update={"frequent_uses": 3})
    set_policy(service, phone, SubsetPolicy(rules=rules))
    _changes, cursor = pull(service, phone, None)
    used = [RecordUse(record_id=made[1], uses=3, last_used_at=clock.now)]
    changes, _ = pull(service, phone, cursor, used=used)
    assert entered(changes) == [made[1]]
    assert service.subset(phone.space_id, phone.device_id).subset.by_reason[-1].reason is (
        Reason.FREQUENT
    )


def test_use_counts_are_running_totals_a_repeated_report_counts_nothing_twice(
    service: CloudService, clock: FakeClock, space: tuple[Device, Device, list[str]]
) -> None:
    laptop, phone, made = space
    _changes, cursor = pull(service, phone, None)
    _changes, laptop_cursor = pull(service, laptop, None)
    report = [RecordUse(record_id=made[1], uses=2, last_used_at=clock.now)]
    for _ in range(3):  # sent again (a lost answer, or a replay): still 2
        pull(service, phone, cursor, used=report)
    pull(
        service, phone, cursor, used=[RecordUse(record_id=made[1], uses=1, last_used_at=clock.now)]
    )
    with service.store.session(phone.space_id) as s:
        assert s.record_uses(phone.space_id)[made[1]][0] == 2
    # another device's count adds up with it
    pull(
        service,
        laptop,
        laptop_cursor,
        used=[RecordUse(record_id=made[1], uses=1, last_used_at=clock.now)],
    )
    with service.store.session(phone.space_id) as s:
        assert s.record_uses(phone.space_id)[made[1]][0] == 3


def test_a_pull_from_the_start_is_sent_every_members_content_once(
    service: CloudService, space: tuple[Device, Device, list[str]]
) -> None:
    _laptop, phone, made = space
    first, cursor = pull(service, phone, None)
    assert sorted(versions(first)) == sorted(made)
    # bare enters: the content came once, from the feed
    assert [c.record_id for c in first if isinstance(c, RecordVersionChange)].count(made[0]) == 1
    # a pull from the start again (a resync) gets every member's content again, and no
    # enter twice: the first ones were confirmed
    pull(service, phone, cursor)
    again, _ = pull(service, phone, None)
    assert versions(again) == set(made) and entered(again) == []


def test_a_live_pull_does_not_wait_while_enters_or_leaves_wait_for_it(
    service: CloudService, space: tuple[Device, Device, list[str]]
) -> None:
    _laptop, phone, _made = space
    _changes, cursor = pull(service, phone, None)
    waiting = PullRequest(cursor=cursor, wait=20.0)
    assert not service.subset_news(phone.space_id, phone.device_id, waiting)
    set_policy(service, phone, SubsetPolicy(rules=PREFS_ONLY))
    assert service.subset_news(phone.space_id, phone.device_id, waiting)
    old = PullRequest(protocol_version=2, cursor=cursor, wait=20.0)
    assert not service.subset_news(phone.space_id, phone.device_id, old)  # no subset at 2
    _changes, cursor = pull(service, phone, cursor)
    waiting = PullRequest(cursor=cursor, wait=20.0)
    assert not service.subset_news(phone.space_id, phone.device_id, waiting)


def test_a_subset_page_reads_past_rows_of_records_the_device_does_not_keep(
    service: CloudService, ops: Ops, space: tuple[Device, Device, list[str]]
) -> None:
    laptop, phone, made = space
    batch = []
    for n in range(100, 400):
        episode, record = f"ep_{n:016d}", f"rec_{n:016d}"
        batch += [
            ops.episode(episode, f"Fact number {n} is here."),
            ops.remember(record, f"Fact number {n} is here.", [episode]),
        ]
    for start in range(0, len(batch), 400):
        applied(push(service, laptop, *batch[start : start + 400]))
    set_policy(service, phone, SubsetPolicy(rules=PREFS_ONLY))
    pages = 0
    cursor: str | None = None
    kept: set[str] = set()
    while True:
        page = service.pull(phone.space_id, phone.device_id, PullRequest(cursor=cursor, limit=100))
        pages += 1
        kept |= versions(page.changes)
        cursor = page.cursor
        if not page.has_more:
            break
    # about 920 feed rows, 100 a page: one round trip, not ten, for the 3 it keeps
    assert kept == {made[0], made[2], made[4]} and pages == 1


def test_a_commit_between_the_choice_and_the_read_waits_for_the_next_choice(
    service: CloudService,
    ops: Ops,
    space: tuple[Device, Device, list[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pull chooses the subset, then reads the feed in another transaction. A record
    committed in between is not in the choice: the page must stop at the position the
    choice saw and say "more to come", not move the cursor past the record's rows as if
    the device did not keep it (a live pull at that cursor would then sleep through it)."""
    laptop, phone, _made = space
    _changes, cursor = pull(service, phone, None)
    before = service.last_seq(phone.space_id)
    original = service._choose_subset

    def choose_then_another_device_commits(*args: Any) -> int:
        as_of = original(*args)
        episode, record = "ep_between000001", "rec_between000001"
        applied(
            push(
                service,
                laptop,
                ops.episode(episode, "I moved to Porto in May."),
                ops.remember(record, "I moved to Porto in May.", [episode]),
            )
        )
        return as_of

    monkeypatch.setattr(service, "_choose_subset", choose_then_another_device_commits)
    page = service.pull(phone.space_id, phone.device_id, PullRequest(cursor=cursor))
    monkeypatch.undo()
    assert service.last_seq(phone.space_id) > before  # the commit came in between
    assert page.changes == [] and page.has_more  # nothing skipped; the device asks again
    assert decode_cursor(page.cursor) == before  # at the position the choice saw
    changes, _ = pull(service, phone, page.cursor)
    assert entered(changes) == ["rec_between000001"]
    assert versions(changes) == {"rec_between000001"}


def test_a_pull_never_waits_long_for_a_cold_spaces_facts(
    config: Any, space: tuple[Device, Device, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new cloud process reads a space's facts once, in a thread: a pull that would
    wait for it past a device's timeout answers "more to come" at the same place."""
    import threading

    from cloud import service as service_module
    from cloud.subset import FactsCache

    _laptop, phone, made = space
    release = threading.Event()
    original = FactsCache._update

    def slow(self: FactsCache, *args: Any) -> None:
        release.wait(30)
        original(self, *args)

    monkeypatch.setattr(FactsCache, "_update", slow)
    monkeypatch.setattr(service_module, "FACTS_WAIT", 0.05)
    fresh = CloudService(config)  # another process: its facts cache is cold
    try:
        page = fresh.pull(phone.space_id, phone.device_id, PullRequest())
        assert page.changes == [] and page.has_more
        again = fresh.pull(phone.space_id, phone.device_id, PullRequest(cursor=page.cursor))
        assert again.changes == [] and again.has_more and again.cursor == page.cursor
        release.set()
        changes, _ = pull(fresh, phone, page.cursor)
        assert sorted(entered(changes)) == sorted(made)
    finally:
        release.set()
        fresh.close()


def test_the_subset_routes_refuse_an_older_protocol_version_and_change_nothing(
    config: Any, space: tuple[Device, Device, list[str]]
) -> None:
    from fastapi.testclient import TestClient

    from cloud.app import create_app

    _laptop, phone, made = space
    auth = {"Authorization": f"Bearer {phone.credential}"}
    with TestClient(create_app(config)) as client:
        for path, body in (
            ("/v1/subset/policy", {"policy": {"budget": {"max_records": 0}}}),
            ("/v1/subset/pins", {"record_id": made[0]}),
        ):
            answer = client.post(path, headers=auth, json={"protocol_version": 2, **body})
            assert answer.status_code == 400, answer.text
            assert "is new in protocol version 3" in answer.json()["message"]
        view = client.get("/v1/subset", headers=auth).json()["subset"]
        assert view["pins"] == [] and view["policy"]["budget"]["max_records"] == 5000
