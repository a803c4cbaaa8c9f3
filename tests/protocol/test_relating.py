"""How a new statement relates to a kept one (``protocol.relating``, issue 17), and that
the subject index always finds the records a statement may relate to."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import subjects
from protocol.model import StatementRelation
from protocol.relating import relate, statement_of
from protocol.statements import parse

C, A, E, X, U = (
    StatementRelation.CORRECTION,
    StatementRelation.ADDITION,
    StatementRelation.EXCEPTION,
    StatementRelation.CONFLICT,
    StatementRelation.UNRELATED,
)
CASES = [
    # corrections: a single-valued attribute, whatever opens the sentence
    ("I live in Rome.", "Actually, I live in Oslo now.", C),
    ("I live in Rome.", "No wait, I live in Oslo.", C),
    ("I live in Rome.", "We moved to Lisbon in March.", C),
    ("My favorite color is blue.", "Actually, my favorite color is orange, not blue.", C),
    ("Our plumber is Dave Price.", "Actually we switched plumbers, it's Rita Osei now.", C),
    ("I work at Acme.", "I no longer work at Acme.", C),
    ("I work at Acme.", "Correction: I work at Brightline.", C),
    ("I'm vegetarian.", "I'm vegan now.", C),
    ("I drink my coffee iced.", "I drink my coffee hot now.", C),
    ("I'm allergic to penicillin.", "I'm not allergic to penicillin anymore.", C),
    ("My dentist is Dr. Roe.", "My new dentist is Dr. Park.", C),
    ("I'm 41.", "I'm 42 years old.", C),
    # additions: a many-valued attribute, or a denial that leaves the value standing
    ("I'm allergic to penicillin.", "I'm allergic to cats, so we never got one.", A),
    ("I speak Spanish.", "Oh and I also speak Portuguese.", A),
    ("I play the cello.", "I play chess on Sundays.", A),
    ("My favorite number is 7.", "My favorite number is not 1729.", A),
    ("I have a dog named Rex.", "I have a dog called Pip too.", A),
    ("I live in Oslo.", "Just so you know, I live in Oslo.", A),  # said again: both stand
    # one person, other attributes; other people: unrelated
    ("My cousin Lena is a nurse.", "My cousin Lena lives in Graz.", U),
    ("I live in Rome.", "My sister lives in Oslo.", U),
    ("My brother works at a bakery.", "I work at the library.", U),
    ("I live in Rome.", "I work at the embassy.", U),
    # exceptions: a one-off beside the lasting fact
    ("I drink my coffee iced.", "I drink my coffee hot today.", E),
    ("I take the bus to work.", "I take the train this time.", E),
    # things of the user's: the head noun and what is said of it (where, when, name)
    ("We keep the bikes in the shed.", "We switched: the bikes are in the cellar now.", C),
    ("The van is parked at the depot.", "The van isn't at the depot anymore, it's at home.", C),
    ("The van is called Bessie.", "The van is parked at the depot.", U),
    ("Our choir rehearses at the town hall.", "Our choir rehearses on Wednesdays.", U),
    ("My phone number is 555 0101.", "My employee number is 7741.", U),
    ("Our gym membership is at Pulse.", "Sorry, the membership is at Forma.", C),
    ("My brother Tom works as a chef.", "Tom no longer works as a chef; he teaches now.", C),
    # one value that cannot change, two values and no cue: a conflict, not a supersede
    ("My blood type is O negative.", "My blood type is A negative.", X),
    ("I grew up in Duluth.", "I grew up in Oslo.", X),
    (
        "Our wedding anniversary is on the 9th of June.",
        "Our wedding anniversary is on the 19th of June.",
        X,
    ),
    # unsure: both kept, flagged
    ("I go swimming every Tuesday.", "I go swimming every Thursday.", X),
    ("I'm allergic to penicillin.", "Actually, I'm allergic to amoxicillin.", X),
]


@pytest.mark.parametrize(("old", "new", "kind"), CASES)
def test_relation(old: str, new: str, kind: StatementRelation) -> None:
    verdict = relate(statement_of(new), statement_of(old))
    assert verdict.kind is kind, verdict.evidence
    assert verdict.evidence


def test_a_subjectless_follow_up_is_read_with_its_context() -> None:
    old = statement_of("The school play is on the 7th.")
    alone = statement_of("No wait, it's on the 17th.")
    assert alone.needs_context and not alone.framed
    assert relate(alone, old).kind is U
    read = statement_of("No wait, it's on the 17th.", "The school play is on the 7th.")
    assert (read.holder, read.attribute, read.np, read.value) == (
        "i",
        "play #when",
        ("school", "play"),
        ("17th",),
    )
    assert relate(read, old).kind is C


def test_another_source_that_disagrees_is_a_conflict_and_one_that_agrees_is_not() -> None:
    old = statement_of("I live in Oslo.")
    assert relate(statement_of("I live in Bergen."), old, same_source=False).kind is X
    assert relate(statement_of("I live in Oslo."), old, same_source=False).kind is A


def test_markers_are_stripped_and_kept_as_cues() -> None:
    said = parse("Oh and, scratch that: my sister's name is Ana.")
    assert said.markers == ("oh and", "scratch that")
    assert (said.holder, said.attribute, said.value) == ("sister", "name", ("ana",))
    assert parse("No one knows my middle name.").markers == ()  # "no" without a comma


markers = st.sampled_from(
    ["", "Actually, ", "No wait, ", "Sorry, ", "Oh and ", "So ", "Correction: "]
)
frames = st.sampled_from(
    [
        "I live in {v}.",
        "I'm allergic to {v}.",
        "My favorite food is {v}.",
        "My sister lives in {v}.",
        "My cousin Lena is {v}.",
        "Our plumber is {v}.",
        "I drink my coffee {v}.",
        "The school play is on {v}.",
        "It's {v} now.",
        "I go swimming every {v}.",
        "I keep a note about {v}.",
        "I speak {v}.",
        "I am {v}.",
        "I work at {v}.",
        "I'm a nurse at {v}.",
        "I changed jobs, I'm a nurse at {v} now.",
        "Our gym membership is at {v}.",
        "I switched my membership to {v}.",
        "My phone number is {v}.",
        "New phone, my number is {v} now.",
        "My brother Diego lives in {v}.",
        "Diego no longer lives in {v}.",
        "The van is called {v}.",
        "The van isn't at {v} anymore, it's at home.",
        "Make that {v}.",
        "My favourite tea is {v}.",
        "My favourite is {v} now.",
        "We moved flats, we're on the {v} floor now.",
        "Our flat is on the {v} floor.",
        "Book club is on {v} now.",
        "My book club meets on {v}.",
    ]
)
values = st.sampled_from(["Oslo", "Rome", "cats", "the 7th", "iced", "hot", "Tuesday", "vegan"])
sentence = st.builds(lambda m, f, v: m + f.format(v=v), markers, frames, values)


@settings(max_examples=400)
@given(sentence, sentence, st.one_of(st.none(), sentence))
def test_any_two_statements_that_relate_meet_in_the_subject_index(
    old: str, new: str, context: str | None
) -> None:
    verdict = relate(statement_of(new, context), statement_of(old))
    if verdict.kind is not U:
        assert set(subjects.lookup_keys(new, None, context)) & set(
            subjects.stored_keys(old, None)
        ), verdict.evidence


@given(sentence, sentence)
def test_relating_is_deterministic(old: str, new: str) -> None:
    assert relate(statement_of(new), statement_of(old)) == relate(
        statement_of(new), statement_of(old)
    )
