"""Issue 17 on one device: how a new statement relates to what is kept decides what is
current (``protocol.relating``), and the record keeps the decision and its evidence."""

from __future__ import annotations

from device import search
from device.agent import DeviceAgent
from protocol.model import StatementRelation
from protocol.retrieval import lexical
from tests.device.conftest import PASSPHRASE, MakeAgent
from tests.device.sqlcipher_pages import decrypted_pages


def _tell(agent: DeviceAgent, conversation: str, *sentences: str) -> list[str]:
    """Say each sentence and remember it, in one conversation; the records' ids."""
    ids = []
    for sentence in sentences:
        agent.say(sentence, conversation)
        result = agent.remember(sentence, conversation)
        assert result.record_id is not None
        ids.append(result.record_id)
    return ids


def _current(agent: DeviceAgent) -> set[str]:
    return {
        v.text
        for v in agent.what_do_you_know()
        if v.text and v.lifecycle == "active" and v.superseded_by_record is None
    }


def test_a_correction_that_opens_with_a_discourse_word_supersedes(make_agent: MakeAgent) -> None:
    phone = make_agent()
    for cue in ("Actually,", "No wait,", "Sorry,", "Correction:", "Scratch that,", "Oh and"):
        before = len(phone.what_do_you_know())
        _tell(phone, f"a{before}", "I live in Rome.")
        _tell(phone, f"b{before}", f"{cue} I live in Oslo now.")
        assert "I live in Rome." not in _current(phone), cue
        assert f"{cue} I live in Oslo now." in _current(phone), cue


def test_a_second_value_of_a_many_valued_attribute_is_an_addition(make_agent: MakeAgent) -> None:
    phone = make_agent()
    _tell(phone, "c1", "I'm allergic to penicillin.")
    _tell(phone, "c2", "I'm allergic to cats, so we never got one.")
    assert {"I'm allergic to penicillin.", "I'm allergic to cats, so we never got one."} <= (
        _current(phone)
    )
    [cats] = [v for v in phone.what_do_you_know() if v.text and "cats" in v.text]
    note = cats.relations
    assert [n.kind for n in note] == [StatementRelation.ADDITION]


def test_two_attributes_of_one_person_both_stand(make_agent: MakeAgent) -> None:
    phone = make_agent()
    _tell(phone, "c1", "My cousin Lena is a nurse.")
    _tell(phone, "c2", "My cousin Lena lives in Graz.")
    assert {"My cousin Lena is a nurse.", "My cousin Lena lives in Graz."} <= _current(phone)


def test_a_subjectless_follow_up_takes_the_previous_sentence_as_its_subject(
    make_agent: MakeAgent,
) -> None:
    phone = make_agent()
    [play] = _tell(phone, "c1", "The school play is on the 7th.")
    phone.say("No wait, it's on the 17th.", "c1")
    later = phone.remember("No wait, it's on the 17th.", "c1").record_id
    assert later is not None
    assert _current(phone) == {"No wait, it's on the 17th."}
    [view] = [v for v in phone.what_do_you_know() if v.record_id == play]
    assert view.superseded_by_record == later
    [note] = next(v for v in phone.what_do_you_know() if v.record_id == later).relations
    assert note.kind is StatementRelation.CORRECTION and note.record_id == play


def test_unsure_is_a_conflict_never_a_silent_supersede(make_agent: MakeAgent) -> None:
    phone = make_agent()
    _tell(phone, "c1", "I go swimming every Tuesday.")
    _tell(phone, "c2", "I go swimming every Thursday.")
    views = {v.text: v for v in phone.what_do_you_know() if v.text}
    assert views["I go swimming every Tuesday."].superseded_by_record is None
    assert views["I go swimming every Thursday."].conflicts_with


def test_a_correction_the_detector_scores_low_is_still_marked(make_agent: MakeAgent) -> None:
    phone = make_agent()
    phone.say("The school play is on the 7th.", "c1")
    said = phone.say_detected("No wait, it's on the 17th.", "c1")
    assert [s.candidate for s in said.sentences] == [True]
    lone = phone.say_detected("No wait.", "c2")  # nothing it could correct
    assert [s.candidate for s in lone.sentences] == [False]


def test_forgetting_the_context_sentence_forgets_the_copy_a_follow_up_keeps(
    make_agent: MakeAgent,
) -> None:
    phone = make_agent()
    [play] = _tell(phone, "c1", "The school play is at the Orpheum on the 7th.")
    phone.say("No wait, it's on the 17th.", "c1")
    later = phone.remember("No wait, it's on the 17th.", "c1").record_id
    assert later is not None
    [view] = [v for v in phone.what_do_you_know() if v.record_id == later]
    assert view.context_text == "The school play is at the Orpheum on the 7th."
    assert view.derived_from == (play,)  # it keeps a copy of that record's words
    key = search.search_key(phone._debug_db())
    blinded = lexical.blind(lexical.terms("Orpheum")[0], key)[3:].encode()
    assert any(blinded in p for p in decrypted_pages(phone.db_path, PASSPHRASE))  # control
    result = phone.forget_permanently(play)
    assert later in result.receipt.affected_records
    assert not any(blinded in p for p in decrypted_pages(phone.db_path, PASSPHRASE))
    assert all(v.is_skeleton for v in phone.list_records())
