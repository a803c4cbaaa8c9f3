"""Scenario: what each device keeps. A laptop with a large budget and a phone with a
small one share a space of six records; the phone keeps what its policy says and
nothing else, a record that leaves it is removed from its database (decrypted pages
and WAL) yet stays in the cloud, never forgotten; offline, a search says it looked
only at the phone; online, the cloud's answer says which records came from the cloud;
a pin brings a record back.

Invariant: every check reads a real copy: the phone's database decrypted page by page,
the cloud's store through its operator handle, the devices' own records.
"""

from __future__ import annotations

from pathlib import Path

from device.agent import DeviceAgent
from protocol.model import ContentType, LifeArea, LifecycleState, TimeKind
from protocol.subset import SubsetBudget, SubsetPolicy, SubsetRules
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet
from simulator.forensics import scan_device_database
from simulator.report import ScenarioReport, StepState
from simulator.scenarios.play import Emit, device_state, play

NAME = "device-subset"
FORGOTTEN = LifecycleState.FORGOTTEN.value
SAID: tuple[tuple[str, ContentType, TimeKind], ...] = (
    ("I prefer window seats on trains.", ContentType.PREFERENCE, TimeKind.PERMANENT),
    ("I like my tea without sugar.", ContentType.PREFERENCE, TimeKind.PERMANENT),
    ("I am training for a half marathon.", ContentType.GOAL, TimeKind.FOR_NOW),
    ("My bike is a green Gazelle.", ContentType.PERSONAL_FACT, TimeKind.PERMANENT),
    ("The harbour ferry leaves from pier nine.", ContentType.PERSONAL_FACT, TimeKind.PERMANENT),
    ("My locker at the pool is number 212.", ContentType.PERSONAL_FACT, TimeKind.PERMANENT),
)
# the phone: preferences and "for now" records, two at most
PHONE = SubsetPolicy(
    rules=SubsetRules(
        behaviour_rules=False,
        upcoming_days=0,
        people=False,
        frequent_uses=0,
        recent_days=0,
        areas=[LifeArea.GENERAL, LifeArea.LEISURE],
    ),
    budget=SubsetBudget(max_records=2),
)
LAPTOP = SubsetPolicy(budget=SubsetBudget(max_records=1000))


def run(cloud: RunningCloud, root: Path, emit: Emit) -> ScenarioReport:
    """Play the scenario against ``cloud`` with devices under ``root``; return the report."""
    return play(NAME, _play, cloud, root, emit)


def _held(agent: DeviceAgent) -> set[str]:
    return agent.held_records()


def _play(fleet: Fleet, report: ScenarioReport, emit: Emit) -> None:
    fay = fleet.add_user("fay")
    laptop = fleet.add_device(fay, "laptop")
    phone = fleet.add_device(fay, "phone")
    operator = fleet.cloud.operator

    def step(title: str) -> None:
        state = StepState(title, [device_state(d) for d in fay.devices], [])
        report.steps.append(state)
        emit(state)

    ids: dict[str, str] = {}
    for n, (text, kind, time_kind) in enumerate(SAID):
        laptop.agent.say(text, f"c{n}")
        record = laptop.agent.remember(
            text, f"c{n}", content_type=kind, time_kind=time_kind
        ).record_id
        assert record is not None
        ids[text] = record
    laptop.agent.set_subset_policy(LAPTOP)
    laptop.agent.sync()
    phone.agent.sync()
    step("1. the laptop remembers six sentences; both devices sync and hold all six")

    phone.agent.set_subset_policy(PHONE)
    synced = phone.agent.sync()
    kept = {ids[SAID[0][0]], ids[SAID[1][0]]}  # the preferences come before "for now"
    with operator.store.session(fay.space_id) as s:
        chosen = s.subset_members(fay.space_id, phone.agent.device_id or "")
    step("2. the phone's budget shrinks to two records; it syncs")
    report.check(
        "the phone holds what its policy says and nothing else",
        _held(phone.agent) == kept == chosen,
        f"held {sorted(_held(phone.agent))}, cloud chose {sorted(chosen)}",
    )
    report.check(
        "the laptop still holds every record",
        _held(laptop.agent) == set(ids.values()),
        f"laptop holds {len(_held(laptop.agent))} of {len(ids)}",
    )
    left = set(ids.values()) - kept
    gone_texts = {text: text.encode() for text, record in ids.items() if record in left}
    scan = scan_device_database(phone.db_path, phone.passphrase, gone_texts)
    report.check(
        "what left the phone is gone from its database and WAL (decrypted pages)",
        scan.clean and scan.pages > 0 and scan.unreadable_pages == 0,
        scan.describe(),
    )
    states = {operator.record_status(fay.space_id, r).lifecycle_state.value for r in left}
    skeletons = [v.record_id for v in phone.agent.list_records() if v.lifecycle == FORGOTTEN]
    report.check(
        "leaving is not forgetting: live in the cloud, no skeleton, nothing pending",
        states == {"active"}
        and not skeletons
        and synced.shredded == []
        and sorted(synced.left) == sorted(left)
        and operator.pending(fay.space_id).forgets == [],
        f"cloud states {sorted(states)}, skeletons {skeletons}, left {len(synced.left)}",
    )

    phone.go_offline()
    offline = phone.agent.retrieve("What is my bike?")
    step("3. the phone is offline and searches for the bike")
    report.check(
        "offline, the answer says it searched only the phone",
        offline.note == "Searched only what this device holds."
        and ids[SAID[3][0]] not in [h.record_id for h in offline.hits],
        f"note {offline.note!r}, hits {[h.record_id for h in offline.hits]}",
    )
    phone.go_online()
    operator.reindex()  # the cloud indexes in the background after a push: not racing it
    online = phone.agent.retrieve_from_cloud("What is my bike?")
    from_cloud = {h.record_id for h in online.hits if h.from_cloud}
    step("4. online, the phone asks the cloud")
    report.check(
        "online, the answer says which records came from the cloud",
        ids[SAID[3][0]] in from_cloud and not from_cloud & kept,
        f"from the cloud: {sorted(from_cloud)}; note {online.note!r}",
    )

    bike = ids[SAID[3][0]]
    phone.agent.set_subset_policy(PHONE.model_copy(update={"budget": SubsetBudget(max_records=3)}))
    phone.agent.pin(bike)
    synced = phone.agent.sync()
    step("5. the phone pins the bike and syncs")
    texts = {v.record_id: v.text for v in phone.agent.list_records()}
    report.check(
        "a pinned record comes back whole",
        bike in synced.entered and texts.get(bike) == SAID[3][0] and bike in _held(phone.agent),
        f"entered {synced.entered}, text {texts.get(bike)!r}",
    )
