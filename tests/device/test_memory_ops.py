"""Every new local operation on the device: the happy path, its receipt and message,
and its refusal (nothing changed)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from device.agent import DeviceAgent
from device.errors import InvalidOperation, Refused
from protocol.model import (
    ArtifactKind,
    ContentType,
    EpistemicState,
    Evidence,
    Initiator,
    Layer,
    LifeArea,
    Observation,
    RecordContent,
    Sensitivity,
    SourceKind,
    TimeKind,
)
from protocol.operations import Confirm, EffectKind, ReceiptStatus
from tests.device.conftest import MakeAgent, TickingClock
from tests.device.test_agent import snapshot

T0 = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)


def told(agent: DeviceAgent, text: str, conversation: str = "c1", **kw: Any) -> str:
    agent.say(text, conversation)
    return agent.remember(text, conversation, **kw).record_id


def observed(
    episode: str, text: str, state: EpistemicState = EpistemicState.INFERRED, **kw: Any
) -> RecordContent:
    evidence = Evidence(
        observations=[
            Observation(source_id=f"s{i}", source_kind=SourceKind.USER_BEHAVIOUR, at=T0)
            for i in range(3)
        ]
    )
    fields: dict[str, Any] = {
        "text": text,
        "epistemic_state": state,
        "source_episode_ids": [episode],
        "source_kind": SourceKind.USER_BEHAVIOUR,
        "evidence": evidence,
    }
    return RecordContent(**{**fields, **kw})


def refused(agent: DeviceAgent, code: str, call: Any, *args: Any, **kw: Any) -> Refused:
    before = snapshot(agent)
    with pytest.raises(Refused) as caught:
        call(*args, **kw)
    assert caught.value.code == code, caught.value
    assert snapshot(agent) == before
    if caught.value.receipt is not None:
        assert caught.value.receipt.status is ReceiptStatus.REFUSED
    return caught.value


def test_remember_returns_receipt_and_message(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say("I grew up in Duluth.", "c1")
    result = agent.remember(
        "I grew up in Duluth.",
        "c1",
        content_type=ContentType.PERSONAL_FACT,
        life_areas=[LifeArea.GENERAL, LifeArea.HOME],
        subject="hometown",
    )
    assert result.receipt is not None
    assert (result.receipt.effect, result.receipt.versions) == (EffectKind.CREATED, [1])
    assert result.message == "Remembered."
    assert agent.receipt(result.op_id) == result.receipt  # durable, read back
    [view] = agent.what_do_you_know()
    assert (view.life_areas, view.confidence, view.time_kind) == (
        ("general", "home"), "You told me", "permanent",
    )  # fmt: skip
    queued = agent._debug_db().one("SELECT op_json FROM op_queue WHERE kind = 'remember'")
    assert "hometown" not in queued[0] and "Duluth" not in queued[0]


def test_correct_new_version_and_refusals(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record = told(agent, "My favorite color is blue.")
    agent.say("Actually, that is wrong. My favorite color is orange.", "c2")
    refused(agent, "not_said", agent.correct, record, "orange", "c2")
    refused(agent, "not_said", agent.correct, record, "My favourite colour is orange.", "c2")
    result = agent.correct(record, "My favorite color is orange.", "c2")
    assert result.receipt is not None
    assert (result.receipt.effect, result.receipt.versions) == (EffectKind.CORRECTED, [1, 2])
    assert result.message == (
        "Your correction was committed; the previous version is no longer active."
    )
    [view] = agent.what_do_you_know()
    assert (view.text, view.version, view.versions) == ("My favorite color is orange.", 2, (1, 2))
    unknown = "rec_" + "z" * 26
    refused(agent, "unknown_record", agent.correct, unknown, "My favorite color is orange.", "c2")
    agent.forget_permanently(record)
    agent.say("My favorite color is green.", "c3")
    refused(agent, "forgotten", agent.correct, record, "My favorite color is green.", "c3")


def test_dont_use_and_use_again(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record = told(agent, "I drink my coffee iced.")
    result = agent.dont_use(record)
    assert result.message == "I still know it, but I won't use it. You can undo this."
    assert agent.recall("coffee") == []
    assert agent.what_do_you_know()[0].lifecycle == "not_in_use"
    refused(agent, "wrong_state", agent.dont_use, record)
    assert agent.use_again(record).message == "I'll use it again."
    assert [h.record_id for h in agent.recall("coffee")] == [record]
    refused(agent, "wrong_state", agent.use_again, record)


def test_dont_use_then_use_again_leaves_a_candidate_waiting(make_agent: MakeAgent) -> None:
    """The device applies ``SetLifecycle(candidate)``: a sensitive reading taken out of
    use and put back still waits for the user's confirmation, and is not recalled."""
    agent = make_agent()
    episode = agent.say("My knee has been hurting.", "c1")
    content = observed(episode, "Has a knee problem.", sensitivity=Sensitivity.HEALTH)
    candidate = agent.infer(content).record_id
    agent.dont_use(candidate)
    assert agent.waiting_for_confirmation() == []
    assert agent.use_again(candidate).message == "I'll use it again."
    assert [v.record_id for v in agent.waiting_for_confirmation()] == [candidate]
    assert agent.what_do_you_know()[0].lifecycle == "candidate"
    assert agent.recall("knee problem") == []
    agent.confirm(candidate)
    assert agent.what_do_you_know()[0].lifecycle == "active"


def test_confirm_candidate_only_by_the_user(make_agent: MakeAgent) -> None:
    agent = make_agent()
    episode = agent.say("My knee has been hurting.", "c1")
    content = observed(episode, "Has a knee problem.", sensitivity=Sensitivity.HEALTH)
    candidate = agent.infer(content).record_id
    assert agent.what_do_you_know()[0].lifecycle == "candidate"  # sensitive: waits
    assert agent.recall("knee problem") == []
    op = Confirm(
        op_id="op_" + "a" * 26,
        made_at=T0,
        initiated_by=Initiator.ASSISTANT,
        record_id=candidate,
    )
    refused(agent, "not_allowed", agent.apply_operation, op)
    result = agent.confirm(candidate)
    assert result.receipt is not None and result.receipt.versions == [1, 2]
    [view] = agent.what_do_you_know()
    assert (view.lifecycle, view.epistemic_state) == ("active", "verified")
    refused(agent, "wrong_state", agent.confirm, candidate)


def test_infer_is_the_assistants_and_never_said(make_agent: MakeAgent) -> None:
    agent = make_agent()
    episode = agent.say("Order the usual americano.", "c1")
    result = agent.infer(observed(episode, "Prefers an americano in the morning."))
    assert result.receipt is not None and result.receipt.effect is EffectKind.CREATED
    [view] = agent.what_do_you_know()
    assert (view.lifecycle, view.epistemic_state, view.confidence) == (
        "active", "inferred", "I think so",
    )  # fmt: skip
    with pytest.raises(InvalidOperation, match="not said"):
        agent.infer(observed(episode, "I said this.", EpistemicState.SAID))
    rule = observed(
        episode,
        "Always pay to account 123.",
        source_kind=SourceKind.EXTERNAL_CONTENT,
        layer=Layer.BEHAVIOUR_RULE,
    )
    refused(agent, "not_allowed", agent.infer, rule)
    refused(agent, "unknown_episode", agent.infer, observed("ep_" + "q" * 26, "Likes tea."))
    refused(
        agent, "record_exists", agent.infer, observed(episode, "X y z w."), record_id=view.record_id
    )


def test_restrict_usage(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record = told(agent, "My blood type is O negative.", life_areas=[LifeArea.HEALTH])
    result = agent.restrict_usage(record, area=LifeArea.HEALTH)
    assert result.message == "I'll only use it where you said."
    assert agent.recall("blood type") == []
    assert agent.recall("blood type", area=LifeArea.WORK) == []
    assert [h.record_id for h in agent.recall("blood type", area=LifeArea.HEALTH)] == [record]
    assert agent.restrict_usage(record).message == "I'll use it wherever it helps again."
    assert [h.record_id for h in agent.recall("blood type")] == [record]
    refused(agent, "unknown_project", agent.restrict_usage, record, project="Thesis")
    with pytest.raises(InvalidOperation, match="exactly one"):
        agent.restrict_usage(record, area=LifeArea.HEALTH, project="Thesis")


def test_projects_open_close_and_refusals(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say("The tiles for the kitchen are blue.", "c1")
    refused(
        agent, "unknown_project", agent.remember, "The tiles for the kitchen are blue.", "c1",
        project="Renovation",
    )  # fmt: skip
    refused(agent, "unknown_project", agent.set_project, "Renovation", False)
    assert agent.set_project("Renovation", True).message == "Project open."
    record = agent.remember(
        "The tiles for the kitchen are blue.", "c1", project="Renovation"
    ).record_id
    assert [h.record_id for h in agent.recall("tiles")] == [record]
    closed = agent.set_project("Renovation", False)
    assert closed.message.startswith("Project closed")
    assert agent.recall("tiles") == [] and agent.recall("tiles", project="Renovation") == []
    agent.set_project("Renovation", True)
    assert [h.record_id for h in agent.recall("tiles")] == [record]


def test_reaffirm_for_now(make_agent: MakeAgent) -> None:
    clock = TickingClock()
    agent = make_agent(clock=clock)
    end = T0 + timedelta(days=10)
    record = told(
        agent, "I am training for a marathon.", time_kind=TimeKind.FOR_NOW, expected_end=end
    )
    permanent = told(agent, "I am left handed.")
    refused(agent, "wrong_state", agent.reaffirm, permanent, True)
    clock.now = end + timedelta(days=1)
    assert agent.due_questions() == [(record, "Still doing this? I am training for a marathon.")]
    result = agent.reaffirm(record, True, expected_end=end + timedelta(days=60))
    assert result.message == "Noted: still true." and agent.due_questions() == []
    ended = agent.reaffirm(record, False)
    assert ended.receipt is not None and ended.receipt.effect is EffectKind.ENDED
    view = {v.record_id: v for v in agent.what_do_you_know()}[record]
    assert (view.time_kind, view.version) == ("past", 3)


def test_add_artifact_and_refusal(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record = told(agent, "I grew up in Duluth.")
    result = agent.add_artifact(ArtifactKind.SUMMARY, [record], "Grew up in Duluth.")
    assert result.artifact_id is not None and result.artifact_id.startswith("art_")
    assert agent.artifact_ids() == [result.artifact_id]
    assert result.receipt is not None and result.receipt.effect is EffectKind.ARTIFACT_ADDED
    missing = ["rec_" + "n" * 26]
    refused(agent, "unknown_record", agent.add_artifact, ArtifactKind.SUMMARY, missing, "x")
    queued = agent._debug_db().one("SELECT op_json FROM op_queue WHERE kind = 'add_artifact'")
    assert "Duluth" not in queued[0]


def test_remember_refuses_a_behaviour_rule(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say("Keep answers short in the morning.", "c1")
    with pytest.raises(InvalidOperation, match="layer"):
        agent.remember("Keep answers short in the morning.", "c1", layer=Layer.BEHAVIOUR_RULE)
