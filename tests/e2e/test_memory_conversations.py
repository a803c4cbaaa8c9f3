"""Scripted conversations on two devices and a real cloud, offline and online (issue 3).

Real uvicorn on loopback, real SQLCipher devices, the Python API of the device agent.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from protocol.confidence import FORMULA_VERSION
from protocol.model import (
    ArtifactKind,
    ContentType,
    EpistemicState,
    Evidence,
    LifeArea,
    Observation,
    RecordContent,
    SourceKind,
)
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from simulator.forensics import scan_device_database

pytestmark = pytest.mark.e2e
ACCOUNT = "our account passphrase"


@pytest.fixture
def pair(cloud: RunningCloud, tmp_path: Path):  # type: ignore[no-untyped-def]
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone", account_passphrase=ACCOUNT)
    laptop = fleet.add_device(ada, "laptop", account_passphrase=ACCOUNT)
    yield phone, laptop
    fleet.close()


def _lines(handle: DeviceHandle, query: str, **kw: object) -> list[str]:
    return [hit.line for hit in handle.agent.recall(query, **kw)]


def test_fragments_refused_quotes_verbatim_and_dated(pair) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.go_offline()
    phone.agent.say("My favorite number is not 1729. I grew up in Duluth.", "c1")
    with pytest.raises(Exception, match="fragment"):
        phone.agent.remember("1729", "c1")
    phone.agent.remember("I grew up in Duluth.", "c1")
    phone.go_online()
    phone.agent.sync()
    laptop.agent.sync()
    lines = _lines(laptop, "Duluth")
    assert len(lines) == 1
    assert lines[0].startswith("On 2026-") and 'you wrote: "I grew up in Duluth."' in lines[0]
    assert "You told me" in lines[0]
    assert not _lines(laptop, "1729")
    (known,) = [v for v in laptop.agent.what_do_you_know() if v.text == "I grew up in Duluth."]
    assert (known.confidence, known.confidence_score) == ("You told me", 1.0)
    assert known.confidence_formula == FORMULA_VERSION


def test_corrections_win_on_every_device(pair) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.agent.say("I drink my coffee iced.", "c1")
    record = phone.agent.remember("I drink my coffee iced.", "c1").record_id
    phone.agent.sync()
    laptop.agent.sync()
    laptop.go_offline()
    laptop.agent.say("No. I drink my coffee hot.", "c2")
    result = laptop.agent.correct(record, "I drink my coffee hot.", "c2")
    assert result.message == (
        "Your correction was committed; the previous version is no longer active."
    )
    assert result.receipt.versions == [1, 2]
    laptop.go_online()
    laptop.agent.sync()
    phone.agent.sync()
    for handle in (phone, laptop):
        lines = _lines(handle, "coffee")
        assert len(lines) == 1 and "hot" in lines[0] and "iced" not in lines[0]


def test_newer_statement_wins_without_an_explicit_correction(pair) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.agent.say("I drink my coffee iced.", "c1")
    phone.agent.remember("I drink my coffee iced.", "c1")
    phone.agent.sync()
    laptop.agent.sync()
    laptop.agent.say("I drink my coffee hot now.", "c2")
    laptop.agent.remember("I drink my coffee hot now.", "c2")
    laptop.agent.sync()
    phone.agent.sync()
    for handle in (phone, laptop):
        lines = _lines(handle, "coffee")
        # the newer record is current; the one it replaced comes back beside it, outdated
        assert len(lines) == 2 and "hot now" in lines[0]
        assert "| CURRENT: replaces line 2 (said 2026-" in lines[0]
        assert "iced" in lines[1] and lines[1].endswith("| OUTDATED: replaced by line 1]")
        known = {v.text: v for v in handle.agent.what_do_you_know() if v.text}
        assert known["I drink my coffee iced."].superseded_by_record is not None


def test_retractions_never_lost_and_restated_fact_returns(pair) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.agent.say("I grew up in Duluth. My sister lives in Oslo.", "c1")
    duluth = phone.agent.remember("I grew up in Duluth.", "c1").record_id
    oslo = phone.agent.remember("My sister lives in Oslo.", "c1").record_id
    phone.agent.sync()
    laptop.agent.sync()
    phone.go_offline()
    phone.agent.dont_use(duluth)  # offline retraction on one device
    laptop.agent.dont_use(oslo)  # online retraction on the other
    laptop.agent.sync()
    phone.go_online()
    phone.agent.sync()
    laptop.agent.sync()
    for handle in (phone, laptop):
        assert not _lines(handle, "Duluth") and not _lines(handle, "Oslo")
    laptop.agent.say("I grew up in Duluth.", "c3")
    laptop.agent.remember("I grew up in Duluth.", "c3")
    laptop.agent.sync()
    phone.agent.sync()
    for handle in (phone, laptop):
        assert len(_lines(handle, "Duluth")) == 1
        assert not _lines(handle, "Oslo")


def test_forgotten_derived_data_unreadable_on_every_device(pair) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.agent.say("I drink my coffee hot now.", "c1")
    record = phone.agent.remember(
        "I drink my coffee hot now.", "c1", content_type=ContentType.PREFERENCE
    )
    episode = phone.agent.say("Another hot coffee, please.", "c2")
    at = datetime.now(UTC)
    derived = phone.agent.infer(
        RecordContent(
            text="Prefers hot drinks in the morning",
            content_type=ContentType.PREFERENCE,
            epistemic_state=EpistemicState.INFERRED,
            source_kind=SourceKind.USER_BEHAVIOUR,
            source_episode_ids=[episode],
            evidence=Evidence(
                observations=[
                    Observation(
                        source_id=f"order-{i}", source_kind=SourceKind.USER_BEHAVIOUR, at=at
                    )
                    for i in range(6)
                ]
            ),
            derived_from=[record.record_id],
        )
    )
    phone.agent.add_artifact(ArtifactKind.SUMMARY, [derived.record_id], "Likes hot coffee early.")
    phone.agent.sync()
    laptop.agent.sync()
    inferred = [line for line in _lines(laptop, "hot drinks morning") if "Prefers" in line]
    assert inferred and "you wrote" not in inferred[0] and "I think so" in inferred[0]
    keys = {
        h.name: h.agent.data_keys_for(record.record_id) + h.agent.data_keys_for(derived.record_id)
        for h in (phone, laptop)
    }
    phone.go_offline()
    laptop.agent.forget_permanently(record.record_id)
    laptop.agent.sync()
    phone.go_online()
    phone.agent.sync()
    for handle in (phone, laptop):
        assert not handle.agent.recall("hot coffee drinks morning")
        needles = {
            "sentence": b"I drink my coffee hot now.",
            "inference": b"Prefers hot drinks in the morning",
            "summary": b"Likes hot coffee early.",
        }
        needles.update({f"key{i}": k for i, k in enumerate(keys[handle.name])})
        scan = scan_device_database(handle.db_path, handle.passphrase, needles)
        assert scan.clean and scan.unreadable_pages == 0, scan.hits


def test_only_use_for_and_no_personalization(pair) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.agent.say("I prefer aisle seats on long flights.", "c1")
    rec = phone.agent.remember(
        "I prefer aisle seats on long flights.", "c1", life_areas=(LifeArea.TRAVEL,)
    )
    phone.agent.restrict_usage(rec.record_id, area=LifeArea.TRAVEL)
    phone.agent.sync()
    laptop.agent.sync()
    assert _lines(laptop, "aisle seats", area=LifeArea.TRAVEL)
    assert not _lines(laptop, "aisle seats", area=LifeArea.WORK)
    assert not _lines(laptop, "aisle seats", area=LifeArea.TRAVEL, personalized=False)


def test_forget_an_area_needs_the_account_passphrase(pair) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.agent.say("I work at Acme. I grew up in Duluth.", "c1")
    phone.agent.remember("I work at Acme.", "c1", life_areas=(LifeArea.WORK,))
    phone.agent.remember("I grew up in Duluth.", "c1")
    phone.agent.sync()
    laptop.agent.sync()
    with pytest.raises(Exception, match="passphrase"):
        laptop.agent.forget_area(LifeArea.WORK, "not our passphrase")
    laptop.agent.forget_area(LifeArea.WORK, ACCOUNT)
    laptop.agent.sync()
    phone.agent.sync()
    for handle in (phone, laptop):
        assert not _lines(handle, "Acme")
        assert _lines(handle, "Duluth")


def test_for_now_question_and_confidence_class(cloud: RunningCloud, tmp_path: Path) -> None:
    clock = [datetime(2026, 9, 21, 9, 0, tzinfo=UTC)]
    fleet = Fleet(cloud, tmp_path / "devices", clock=lambda: clock[0])
    ada = fleet.add_user("ada")
    phone = fleet.add_device(ada, "phone")
    phone.agent.say("I am vegetarian for now.", "c1")
    from protocol.model import TimeKind

    rec = phone.agent.remember("I am vegetarian for now.", "c1", time_kind=TimeKind.FOR_NOW)
    assert not phone.agent.due_questions()
    clock[0] += timedelta(days=91)
    questions = phone.agent.due_questions()
    assert [q[0] for q in questions] == [rec.record_id]
    assert "Still doing this?" in questions[0][1]
    clock[0] += timedelta(days=15)
    lines = _lines(phone, "vegetarian")
    assert lines and "I'm not sure" in lines[0]
    phone.agent.reaffirm(rec.record_id, still_true=True)
    assert not phone.agent.due_questions()
    fleet.close()


def test_forget_all_memory_reaches_episodes_that_no_record_cites(  # type: ignore[no-untyped-def]
    pair, cloud: RunningCloud
) -> None:
    phone, laptop = pair
    # Nothing was ever remembered: only what the user typed is held.
    phone.agent.say("I grew up in Duluth.", "c1")
    phone.agent.say("My bank PIN hint is the old street name.", "c2")
    phone.agent.sync()
    laptop.agent.sync()
    phone.go_offline()
    laptop.agent.forget_area(None, ACCOUNT)
    laptop.agent.sync()
    forgets = cloud.operator.pending(phone.user.space_id).forgets
    orphan = [f for f in forgets if f.record_id is None]
    assert orphan and [p.device_name for p in orphan[0].pending] == ["phone"]
    phone.go_online()
    phone.agent.sync()
    laptop.agent.sync()
    for handle in (phone, laptop):
        needles = {"typed": b"old street name", "remembered": b"I grew up in Duluth."}
        scan = scan_device_database(handle.db_path, handle.passphrase, needles)
        assert scan.clean and scan.unreadable_pages == 0, (handle.name, scan.hits)
    assert all(not f.pending for f in cloud.operator.pending(phone.user.space_id).forgets)


def test_a_record_forgotten_before_it_was_pushed_takes_its_pushed_words_along(
    pair, cloud: RunningCloud, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    phone, laptop = pair
    phone.agent.say("My locker code is 4711.", "c1")
    phone.agent.sync()  # the episode reaches the cloud ...
    laptop.agent.sync()  # ... and the laptop
    phone.go_offline()
    record = phone.agent.remember("My locker code is 4711.", "c1").record_id
    result = phone.agent.forget_permanently(record)  # ... the record never does
    assert result.message == "Permanently forgotten; it cannot be brought back."
    phone.go_online()
    report = phone.agent.sync()
    assert not report.refused, report.refused
    laptop.agent.sync()
    phone.agent.sync()
    fresh = Fleet(cloud, tmp_path / "later").add_device(phone.user, "tablet")
    fresh.agent.sync()
    for handle in (phone, laptop, fresh):
        scan = scan_device_database(handle.db_path, handle.passphrase, {"code": b"4711"})
        assert scan.clean and scan.unreadable_pages == 0, (handle.name, scan.hits)
    assert all(not f.pending for f in cloud.operator.pending(phone.user.space_id).forgets)
    fresh.agent.close()
