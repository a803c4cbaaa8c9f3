"""End to end (real uvicorn on loopback, devices on SQLCipher): a held-back space with a
phone and a laptop under different budgets. Each holds what its policy says and
nothing else (read from its database); eviction is not forgetting (the record is still
in the cloud, and comes back when pinned); an offline query says it searched only the
device; an online one says which records came from the cloud, and caches them within
the budget."""

from __future__ import annotations

from typing import Any

import pytest

from device.agent import DeviceAgent
from protocol.model import LifeArea
from protocol.subset import Reason, SubsetBudget, SubsetPolicy, SubsetRules
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle
from tests.e2e.browser import CELLO, PORTO, HeldBack

pytestmark = pytest.mark.e2e

# the phone: "for now" records only, for home and general things, three records at most
PHONE = SubsetPolicy(
    rules=SubsetRules(
        behaviour_rules=False,
        preferences=False,
        upcoming_days=0,
        for_now=True,
        people=False,
        frequent_uses=0,
        recent_days=0,
        areas=[LifeArea.HOME, LifeArea.GENERAL],
    ),
    budget=SubsetBudget(max_records=3, max_bytes=1_000_000),
)
# the laptop: every record touched in the last month, a hundred at most
LAPTOP = SubsetPolicy(budget=SubsetBudget(max_records=100, max_bytes=64_000_000))


def live_records(agent: DeviceAgent) -> set[str]:
    """The records whose content this device holds, read from its database."""
    db = agent._debug_db()
    rows = db.all(
        "SELECT DISTINCT r.record_id FROM records r JOIN record_versions v "
        "ON v.record_id = r.record_id WHERE r.lifecycle != 'permanently_forgotten'"
    )
    return {row[0] for row in rows}


def traces(agent: DeviceAgent, record_id: str) -> dict[str, int]:
    """Every row of this device's database that still names the record."""
    db: Any = agent._debug_db()
    out = {}
    for table in (
        "records",
        "record_versions",
        "record_search",
        "record_vectors",
        "subject_index",
        "record_events",
        "subset_entries",
    ):
        out[table] = db.one(f"SELECT count(*) FROM {table} WHERE record_id = ?", (record_id,))[0]
    return out


def all_records(held: HeldBack) -> set[str]:
    return {
        held.porto,
        held.cello,
        held.attic,
        held.coffee,
        held.locker,
        held.quiet,
        held.brother,
        held.asthma,
        held.rule,
        held.pay,
        held.dentist,
    }


def sync(handle: DeviceHandle) -> Any:
    report = handle.agent.sync()
    assert report.refused == [], report.refused
    return report


def test_each_device_holds_what_its_policy_says_and_nothing_else(held_back: HeldBack) -> None:
    phone, laptop = held_back.phone, held_back.laptop
    everything = all_records(held_back)
    assert live_records(phone.agent) == everything == live_records(laptop.agent)
    version_keys = {
        rid: {
            r[0]
            for r in phone.agent._debug_db().all(
                "SELECT key_id FROM record_versions WHERE record_id = ?", (rid,)
            )
        }
        for rid in everything
    }

    phone.agent.set_subset_policy(PHONE)
    laptop.agent.set_subset_policy(LAPTOP)
    report = sync(phone)
    sync(laptop)

    # the phone keeps the one "for now" record; the laptop keeps all (all recent)
    assert live_records(phone.agent) == {held_back.attic}
    assert live_records(laptop.agent) == everything
    assert sorted(report.left) == sorted(everything - {held_back.attic})
    assert report.shredded == []  # leaving is not forgetting
    view = phone.agent.subset()
    assert view.records == 1 and [(e.reason, e.records) for e in view.by_reason] == [
        (Reason.FOR_NOW, 1)
    ]
    assert laptop.agent.subset().records == len(everything)

    # an evicted record leaves no row, no key, no index entry, and no skeleton...
    phone_keys = phone.agent.data_key_ids()
    for rid in everything - {held_back.attic}:
        assert traces(phone.agent, rid) == dict.fromkeys(traces(phone.agent, rid), 0), rid
        assert not version_keys[rid] & phone_keys, rid
    assert all(v.lifecycle != "permanently_forgotten" for v in phone.agent.what_do_you_know())
    # ...and is still in the cloud, live, on the laptop, pending for no forget
    assert held_back.view(laptop, held_back.porto).text == PORTO
    assert phone.agent.pending_forgets() == []

    # a pin brings it back whole, readable again on the phone
    phone.agent.pin(held_back.porto)
    report = sync(phone)
    assert report.entered == [held_back.porto]
    assert live_records(phone.agent) == {held_back.attic, held_back.porto}
    assert held_back.view(phone, held_back.porto).text == PORTO
    assert phone.agent.held_because(held_back.porto) == Reason.PINNED.value
    assert [h.record_id for h in phone.agent.recall("Where do I live?")][:1] == [held_back.porto]

    # "only use for" work on a device that is not for work: it leaves, pinned or not
    laptop.agent.restrict_usage(held_back.porto, area=LifeArea.WORK)
    sync(laptop)
    report = sync(phone)
    assert report.left == [held_back.porto]
    assert phone.agent.subset().excluded_pins == [held_back.porto]
    assert live_records(phone.agent) == {held_back.attic}


def test_offline_searches_only_the_device_and_online_says_what_came_from_the_cloud(
    held_back: HeldBack, cloud: RunningCloud
) -> None:
    phone = held_back.phone
    phone.agent.set_subset_policy(
        PHONE.model_copy(update={"rules": PHONE.rules.model_copy(update={"frequent_uses": 1})})
    )
    sync(phone)
    assert held_back.cello not in live_records(phone.agent)

    phone.go_offline()
    offline = phone.agent.retrieve("When do I play the cello?")
    assert offline.scope == "device" and offline.note == "Searched only what this device holds."
    assert held_back.cello not in [h.record_id for h in offline.hits]

    phone.go_online()
    cloud.operator.reindex()  # the cloud indexes in the background after a push: not racing it
    online = phone.agent.retrieve_from_cloud("When do I play the cello?")
    assert online.scope == "cloud"
    from_cloud = {h.record_id: h.from_cloud for h in online.hits}
    assert from_cloud[held_back.cello] is True
    assert "came from the cloud (not on this device)" in online.note
    # the cloud counted it as used: the next sync caches it, within the budget
    report = sync(phone)
    assert held_back.cello in report.entered
    assert held_back.view(phone, held_back.cello).text == CELLO
    assert phone.agent.held_because(held_back.cello) == Reason.FREQUENT.value
    assert len(live_records(phone.agent)) <= PHONE.budget.max_records
