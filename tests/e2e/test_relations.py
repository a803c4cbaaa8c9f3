"""Issue 17 end to end: told on the phone, asked on the laptop after sync and the
consolidator (``memsync cloud worker --once``), under uvicorn with real SQLCipher
devices. The user's latest word wins, no true fact is dropped, nothing the user did is
undone behind their back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from device.views import RecallHit
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet
from tests.e2e.test_consolidation import _worker_once

pytestmark = pytest.mark.e2e


@pytest.fixture
def pair(cloud: RunningCloud, tmp_path: Path) -> Iterator[tuple[DeviceHandle, DeviceHandle]]:
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    yield fleet.add_device(ada, "phone"), fleet.add_device(ada, "laptop")
    fleet.close()


def _settle(cloud: RunningCloud, *handles: DeviceHandle) -> None:
    for handle in handles:
        handle.agent.sync()
    _worker_once(cloud)
    for handle in handles:
        handle.agent.sync()


def _tell(handle: DeviceHandle, conversation: str, sentence: str, *, keep: bool = True) -> None:
    handle.agent.say(sentence, conversation)
    if keep:
        handle.agent.remember(sentence, conversation)


def _current(hits: list[RecallHit]) -> list[str]:
    return [h.text for h in hits if not h.outdated]


def test_a_correction_that_opens_with_a_discourse_word_wins_on_the_other_device(
    pair: tuple[DeviceHandle, DeviceHandle], cloud: RunningCloud
) -> None:
    phone, laptop = pair
    _tell(phone, "c1", "I live in Rome.")
    phone.agent.end_session("c1")
    _tell(phone, "c2", "Actually, I live in Oslo now.")
    phone.agent.end_session("c2")
    _settle(cloud, phone, laptop)
    hits = laptop.agent.recall("Where do I live?")
    assert _current(hits)[:1] == ["Actually, I live in Oslo now."]
    assert "I live in Rome." not in _current(hits)


def test_a_second_allergy_is_an_addition_and_both_are_found(
    pair: tuple[DeviceHandle, DeviceHandle], cloud: RunningCloud
) -> None:
    phone, laptop = pair
    _tell(phone, "c1", "I'm allergic to penicillin.")
    phone.agent.end_session("c1")
    _tell(phone, "c2", "I'm allergic to cats, so we never got one.")
    phone.agent.end_session("c2")
    _settle(cloud, phone, laptop)
    assert "I'm allergic to penicillin." in _current(
        laptop.agent.recall("Which antibiotics must I avoid?")
    )
    known = {v.text: v for v in laptop.agent.what_do_you_know() if v.text}
    assert known["I'm allergic to penicillin."].superseded_by is None


def test_a_correction_only_typed_is_learned_and_wins(
    pair: tuple[DeviceHandle, DeviceHandle], cloud: RunningCloud
) -> None:
    phone, laptop = pair
    _tell(phone, "c1", "Our plumber is Dave Price.")
    phone.agent.end_session("c1")
    _tell(phone, "c2", "Actually we switched plumbers, it's Rita Osei now.", keep=False)
    phone.agent.end_session("c2")
    _settle(cloud, phone, laptop)
    hits = laptop.agent.recall("Who is our plumber?")
    assert _current(hits)[:1] == ["Actually we switched plumbers, it's Rita Osei now."]
    assert "Our plumber is Dave Price." not in _current(hits)


def test_a_subjectless_follow_up_is_kept_with_its_context_and_wins(
    pair: tuple[DeviceHandle, DeviceHandle], cloud: RunningCloud
) -> None:
    phone, laptop = pair
    _tell(phone, "c1", "The school play is on the 7th.")
    _tell(phone, "c1", "No wait, it's on the 17th.", keep=False)
    phone.agent.end_session("c1")
    _settle(cloud, phone, laptop)
    hits = laptop.agent.recall("When is the school play?")
    assert _current(hits)[:1] == ["No wait, it's on the 17th."]
    assert "The school play is on the 7th." not in _current(hits)
    [view] = [v for v in laptop.agent.what_do_you_know() if v.text == "No wait, it's on the 17th."]
    assert view.context_text == "The school play is on the 7th."


def test_a_correction_before_the_session_ends_is_not_undone_by_consolidation(
    pair: tuple[DeviceHandle, DeviceHandle], cloud: RunningCloud
) -> None:
    phone, laptop = pair
    phone.agent.say("I am vegan. I live in Rome.", "c1")
    vegan = phone.agent.remember("I am vegan.", "c1").record_id
    rome = phone.agent.remember("I live in Rome.", "c1").record_id
    assert vegan is not None and rome is not None
    phone.agent.say("Sorry, that was wrong. I live in Turin.", "c1")
    phone.agent.correct(rome, "I live in Turin.", "c1")
    phone.agent.end_session("c1")
    _settle(cloud, phone, laptop)
    texts = [v.text for v in laptop.agent.what_do_you_know() if v.lifecycle == "active"]
    assert texts.count("I am vegan.") == 1
    assert "I live in Rome." not in texts and "I live in Turin." in texts
    assert _current(laptop.agent.recall("Where do I live?"))[:1] == ["I live in Turin."]
