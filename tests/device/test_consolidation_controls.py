"""The device's own end-of-session consolidation (classes kept on this device) never
undoes the user (issue 17): a correction, a "don't use" or a short remembered sentence
made before the session ended is what the user sees afterwards; a restatement typed
after a retraction comes back."""

from __future__ import annotations

from device.agent import DeviceAgent
from protocol.model import Sensitivity
from tests.device.conftest import MakeAgent

MORNING = "I take insulin every morning."
EVENING = "I take insulin every evening."


def kept(agent: DeviceAgent) -> list[tuple[str, str | None]]:
    """(lifecycle, current text) of every record, sorted."""
    return sorted((v.lifecycle, v.text) for v in agent.what_do_you_know())


def health_agent(make_agent: MakeAgent) -> DeviceAgent:
    agent = make_agent()
    agent.keep_on_device(Sensitivity.HEALTH)
    return agent


def test_a_correction_before_the_end_of_session_stays(make_agent: MakeAgent) -> None:
    agent = health_agent(make_agent)
    assert agent.say_detected(MORNING, "c1").device_only
    record = agent.remember(MORNING, "c1").record_id
    assert record is not None
    assert agent.say_detected(f"No, sorry. {EVENING}", "c1").device_only
    agent.correct(record, EVENING, "c1")
    assert agent.end_session("c1")[1:] == []  # nothing consolidated: both accounted for
    [view] = agent.what_do_you_know()
    assert (view.record_id, view.text) == (record, EVENING)
    waiting = agent._debug_db().all("SELECT record_id FROM candidates")
    assert {r["record_id"] for r in waiting} == {record}


def test_a_dont_use_before_the_end_of_session_stays(make_agent: MakeAgent) -> None:
    agent = health_agent(make_agent)
    agent.say_detected(MORNING, "c1")
    record = agent.remember(MORNING, "c1").record_id
    assert record is not None
    agent.dont_use(record)
    assert agent.end_session("c1")[1:] == []
    assert kept(agent) == [("not_in_use", MORNING)]


def test_a_retracted_sentence_restated_later_comes_back(make_agent: MakeAgent) -> None:
    agent = health_agent(make_agent)
    agent.say_detected(MORNING, "c1")
    record = agent.remember(MORNING, "c1").record_id
    assert record is not None
    agent.dont_use(record)
    agent.end_session("c1")
    agent.say_detected(MORNING, "c2")  # a later conversation, the same words
    [made] = agent.end_session("c2")[1:]
    assert made.record_id != record
    assert kept(agent) == [("candidate", MORNING), ("not_in_use", MORNING)]


def test_the_same_words_twice_in_one_session_make_one_record(make_agent: MakeAgent) -> None:
    agent = health_agent(make_agent)
    agent.say_detected(MORNING, "c1")
    agent.say_detected(f"Yes. {MORNING}", "c1")
    assert len(agent.end_session("c1")[1:]) == 1
    assert kept(agent) == [("candidate", MORNING)]


def test_a_forget_before_the_end_of_session_stays_forgotten(make_agent: MakeAgent) -> None:
    agent = health_agent(make_agent)
    earlier = agent.say_detected(MORNING, "c0")  # the same words, in a chat still open
    agent.say_detected(MORNING, "c1")
    record = agent.remember(MORNING, "c1").record_id
    assert record is not None
    agent.forget_permanently(record)
    assert agent.end_session("c1")[1:] == []
    db = agent._debug_db()
    assert db.all("SELECT * FROM candidates WHERE episode_id = ?", (earlier.episode_id,)) == []
    assert agent.end_session("c0")[1:] == []
    assert all(v.text is None for v in agent.what_do_you_know())  # the skeleton only
    # said again after the forget, it is a new statement
    agent.say_detected(MORNING, "c2")
    assert len(agent.end_session("c2")[1:]) == 1
