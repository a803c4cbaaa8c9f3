"""The cautious rules of ``protocol.relating`` (issue: never confidently wrong on cases
nobody tuned for): age alone never makes the newer value win; sentences naming only
different numbers never say the same value; a follow-up of a sentence no frame reads
relates to that sentence alone and finds it in the subject index; "these days" and
"from today on" are lasting changes, not one-offs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from protocol import subjects
from protocol.model import StatementRelation
from protocol.relating import relate, statement_of
from protocol.rulebook.saying import statement_context
from protocol.statements import parse

C, A, E, X, U = (
    StatementRelation.CORRECTION,
    StatementRelation.ADDITION,
    StatementRelation.EXCEPTION,
    StatementRelation.CONFLICT,
    StatementRelation.UNRELATED,
)

places = st.sampled_from(["Oslo", "Porto", "Lisbon", "Graz", "Kumasi", "Umeå", "Curitiba"])
mutable_frames = st.sampled_from(
    [
        "I live in {v}.",
        "My favourite city is {v}.",
        "My hairdresser is {v}.",
        "I work at {v}.",
    ]
)


@given(mutable_frames, places, places)
def test_a_changeable_single_value_with_no_cue_is_a_conflict_never_a_supersede(
    frame: str, old: str, new: str
) -> None:
    verdict = relate(statement_of(frame.format(v=new)), statement_of(frame.format(v=old)))
    if old == new:
        assert verdict.kind is A, verdict.evidence
    else:
        assert verdict.kind is X, verdict.evidence


cues = st.sampled_from(["Actually, ", "No wait, ", "Correction: ", "Sorry, "])


@given(mutable_frames, places, places, cues)
def test_the_same_change_with_a_cue_is_a_correction(
    frame: str, old: str, new: str, cue: str
) -> None:
    if old == new:
        return
    said = cue + frame.format(v=new)[0].lower() + frame.format(v=new)[1:]
    verdict = relate(statement_of(said), statement_of(frame.format(v=old)))
    assert verdict.kind is C, verdict.evidence


@given(st.integers(1900, 2030), st.integers(1900, 2030))
def test_sentences_naming_only_different_numbers_are_not_the_same_value(a: int, b: int) -> None:
    verdict = relate(
        statement_of(f"We got married in {b}."), statement_of(f"We got married in {a}.")
    )
    if a == b:
        assert verdict.kind is A, verdict.evidence
    else:
        assert verdict.kind is X, verdict.evidence


@given(st.integers(1, 99), st.integers(1, 99))
def test_an_age_said_later_wins_only_when_it_is_larger(old: int, new: int) -> None:
    verdict = relate(statement_of(f"I'm {new} years old."), statement_of(f"I'm {old}."))
    expected = A if new == old else C if new > old else X
    assert verdict.kind is expected, verdict.evidence


UNFRAMED = [
    "The party on Saturday starts at seven.",
    "My train to Kiruna leaves from platform 4.",
    "My parents arrive on the 3rd of October.",
]
FOLLOW_UPS = [
    "Actually, it's at eight now.",
    "No, platform 6, I misread the board.",
    "Wait, the 5th, not the 3rd.",
]


@given(st.sampled_from(UNFRAMED), st.sampled_from(FOLLOW_UPS), st.sampled_from(UNFRAMED))
def test_a_follow_up_of_an_unframed_sentence_is_about_that_sentence_alone(
    context: str, follow_up: str, other: str
) -> None:
    assert not parse(context).framed
    read = statement_of(follow_up, context)
    assert read.after == parse(context).core and not read.needs_context
    verdict = relate(read, statement_of(context))
    assert verdict.kind is C, verdict.evidence  # each follow-up carries a correction cue
    # and it finds that sentence's records in the subject index
    assert set(subjects.lookup_keys(follow_up, None, context)) & set(
        subjects.stored_keys(context, None)
    )
    if other != context:
        assert relate(read, statement_of(other)).kind is U


def test_a_follow_up_read_alone_still_relates_to_nothing() -> None:
    assert relate(statement_of(FOLLOW_UPS[0]), statement_of(UNFRAMED[0])).kind is U


def test_the_context_falls_back_to_the_sentence_just_before_when_none_has_a_frame() -> None:
    from datetime import UTC, datetime

    from protocol.model import SourceKind
    from protocol.rulebook.facts import EpisodeFacts

    at = datetime(2026, 3, 22, 10, 0, tzinfo=UTC)
    typed = "Is it raining? The party on Saturday starts at seven. Actually, it's at eight now."
    episode = EpisodeFacts(
        episode_id="e1",
        conversation_id="c1",
        text=typed,
        source_kind=SourceKind.USER_STATEMENT,
        typed_at=at,
    )
    found = statement_context("Actually, it's at eight now.", "c1", ["e1"], {"e1": episode})
    assert found == ("The party on Saturday starts at seven.", at)
    # a question just before is no context
    asked = EpisodeFacts(
        episode_id="e2",
        conversation_id="c1",
        text="Does the party start at seven? Actually, it's at eight now.",
        source_kind=SourceKind.USER_STATEMENT,
        typed_at=at,
    )
    assert statement_context("Actually, it's at eight now.", "c1", ["e2"], {"e2": asked}) is None


def test_these_days_is_a_change_cue_and_from_today_on_is_not_a_one_off() -> None:
    old = statement_of("Our rent is 1450 euros a month.")
    assert relate(statement_of("Our rent is 1600 euros a month these days."), old).kind is C
    email = statement_of("My email address is f.haddad@mailnest.net from today on.")
    assert email.exception is None
    assert relate(email, statement_of("My email address is fatima.h@postbox.org.")).kind is C
    assert parse("I'm taking a taxi today.").exception == "today"  # a one-off still is


@given(st.sampled_from(["over", "during", "after", "before", "through", "around"]))
def test_a_switch_names_its_thing_whatever_preposition_follows(prep: str) -> None:
    said = parse(f"I switched banks {prep} the summer, my bank is Sony Bank now.")
    assert said.attribute == "bank", said
    assert relate(said, statement_of("My bank is Mizuho.")).kind is C
