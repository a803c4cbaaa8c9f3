"""``protocol.consolidation.accounted``: which keys a record version yields, and when a
candidate sentence is already accounted for (issue 17)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol.consolidation.accounted import (
    CandidateSentence,
    RecordHistory,
    VersionHistory,
    accounted_for,
    history_keys,
    lookup_keys,
)
from protocol.model import LifecycleState

ACTIVE, NOT_IN_USE = LifecycleState.ACTIVE, LifecycleState.NOT_IN_USE


def record(
    lifecycle: LifecycleState, *versions: tuple[str, str], decided_at: int | None = 10
) -> RecordHistory:
    return RecordHistory(
        "rec_a",
        lifecycle,
        tuple(VersionHistory(i + 1, text, (ep,)) for i, (text, ep) in enumerate(versions)),
        decided_at,
    )


def test_short_sentences_have_keys_and_a_candidate_meets_every_version() -> None:
    assert history_keys("I am vegan.", ["ep_1"]) == ["e:ep_1", "w:i am vegan"]
    rome = set(history_keys("I live in Rome.", ["ep_1"]))
    milan = set(history_keys("I live in Milan.", ["ep_2"]))
    assert set(lookup_keys("ep_9", "i live in  rome!")) & rome  # same words, other case
    assert set(lookup_keys("ep_2", "Something else.")) & milan  # same episode


def test_the_same_episodes_sentence_is_accounted_for_in_every_state() -> None:
    said = CandidateSentence("ep_1", "I live in Rome.", arrived_at=99)
    kept = accounted_for(said, [record(ACTIVE, ("I live in Rome.", "ep_1"))])
    assert kept is not None and kept.kept and kept.record_id == "rec_a"
    retracted = accounted_for(said, [record(NOT_IN_USE, ("I live in Rome.", "ep_1"))])
    assert retracted is not None and not retracted.kept and "out of use" in retracted.reason
    corrected = record(ACTIVE, ("I live in Rome.", "ep_1"), ("I live in Milan.", "ep_2"))
    found = accounted_for(said, [corrected])
    assert found is not None and not found.kept and "corrected" in found.reason
    # the correction's own sentence is the record that holds it
    again = accounted_for(CandidateSentence("ep_2", "I live in Milan.", 99), [corrected])
    assert again is not None and again.kept


def test_a_restatement_after_the_decision_comes_back() -> None:
    retracted = record(NOT_IN_USE, ("I live in Rome.", "ep_1"), decided_at=10)
    before = CandidateSentence("ep_0", "I live in Rome.", arrived_at=5)
    after = CandidateSentence("ep_7", "I live in Rome.", arrived_at=11)
    assert accounted_for(before, [retracted]) is not None
    assert accounted_for(after, [retracted]) is None
    assert accounted_for(CandidateSentence("ep_1", "I play chess.", 1), [retracted]) is None


def test_a_record_that_holds_the_words_is_preferred_and_forgotten_ones_are_skipped() -> None:
    said = CandidateSentence("ep_1", "I am vegan.", arrived_at=1)
    gone = RecordHistory("rec_0", LifecycleState.FORGOTTEN, (), None)
    out = RecordHistory("rec_1", NOT_IN_USE, (VersionHistory(1, "I am vegan.", ("ep_1",)),), 5)
    live = RecordHistory("rec_2", ACTIVE, (VersionHistory(1, "I am vegan.", ("ep_1",)),), 5)
    found = accounted_for(said, [gone, out, live])
    assert found is not None and found.record_id == "rec_2" and found.kept
    assert accounted_for(said, [gone]) is None


@given(
    text=st.text(min_size=1, max_size=40),
    episode=st.from_regex(r"ep_[a-z0-9]{8}", fullmatch=True),
)
def test_a_version_is_always_found_by_its_own_sentence(text: str, episode: str) -> None:
    assert set(lookup_keys(episode, text)) <= set(history_keys(text, [episode]))


def test_another_sources_words_never_stand_in_for_the_users() -> None:
    said = CandidateSentence("ep_1", "The museum opens at nine.", arrived_at=1)
    web = RecordHistory(
        "rec_w",
        LifecycleState.CANDIDATE,
        (VersionHistory(1, "The museum opens at nine.", ("ep_1",), users_words=False),),
        5,
    )
    assert accounted_for(said, [web]) is None
