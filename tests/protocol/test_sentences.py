"""Only the user's words are "said": the verbatim check (invariant 1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.sentences import (
    ABBREVIATIONS,
    SaidVerdict,
    check_said,
    is_question,
    normalise,
    split_sentences,
)

TYPED = "Hi! My favorite number is not 1729. I grew up in Duluth.  Do you know it?"


def test_whole_sentence_is_said() -> None:
    assert check_said("I grew up in Duluth.", [TYPED]).ok


def test_whitespace_and_final_punctuation_are_normalised() -> None:
    assert check_said("  I grew   up in Duluth ", [TYPED]).ok
    assert check_said("I grew up in Duluth!", [TYPED]).ok


def test_fragment_is_refused_and_names_the_sentence() -> None:
    check = check_said("1729", [TYPED])
    assert check.verdict is SaidVerdict.FRAGMENT
    assert "My favorite number is not 1729." in check.reason


def test_dropping_a_negation_is_a_fragment_not_said() -> None:
    check = check_said("My favorite number is 1729", [TYPED])
    assert not check.ok
    assert check.verdict is SaidVerdict.NOT_TYPED


def test_paraphrase_is_refused() -> None:
    check = check_said("I was raised in Duluth.", [TYPED])
    assert check.verdict is SaidVerdict.NOT_TYPED
    assert "paraphrase" in check.reason


def test_case_and_inner_punctuation_are_not_normalised() -> None:
    assert not check_said("i grew up in duluth.", [TYPED]).ok
    assert not check_said("I grew up, in Duluth.", [TYPED]).ok


def test_several_sentences_are_refused() -> None:
    check = check_said("I grew up in Duluth. Do you know it?", [TYPED])
    assert check.verdict is SaidVerdict.SEVERAL_SENTENCES


def test_a_title_before_a_period_ends_no_sentence() -> None:
    typed = "Correction: my dentist is Dr. Park. I saw Mrs. Osei at Prof. Ito's talk. Fine."
    assert split_sentences(typed) == [
        "Correction: my dentist is Dr. Park.",
        "I saw Mrs. Osei at Prof. Ito's talk.",
        "Fine.",
    ]
    assert check_said("Correction: my dentist is Dr. Park.", [typed]).ok
    assert split_sentences("We live on Main St. It is quiet.") == [
        "We live on Main St.",
        "It is quiet.",
    ]


def test_split_keeps_sentences_whole() -> None:
    assert split_sentences(TYPED) == [
        "Hi!",
        "My favorite number is not 1729.",
        "I grew up in Duluth.",
        "Do you know it?",
    ]


words = st.text(alphabet=st.characters(categories=["Ll", "Lu", "Nd"]), min_size=1, max_size=8)
# a title before a period ends no sentence ("Dr. Park"), so a generated sentence never ends
# with one
words = words.filter(lambda w: w.casefold() not in ABBREVIATIONS)
sentence = st.lists(words, min_size=1, max_size=8).map(lambda ws: " ".join(ws) + ".")


@given(st.lists(sentence, min_size=1, max_size=5), st.data())
def test_every_typed_sentence_is_said_and_every_proper_fragment_is_not(
    sentences: list[str], data: st.DataObject
) -> None:
    typed = " ".join(sentences)
    chosen = data.draw(st.sampled_from(sentences))
    assert check_said(chosen, [typed]).ok
    body = normalise(chosen)
    if " " in body:
        cut = data.draw(st.integers(min_value=1, max_value=len(body.split(" ")) - 1))
        fragment = " ".join(body.split(" ")[cut:])
        if all(normalise(s) != fragment for s in sentences):
            assert not check_said(fragment, [typed]).ok


@pytest.mark.parametrize(
    ("sentence", "asks"),
    [
        ("Do you think my sister likes cats?", True),
        ('She asked "is it raining?"', True),
        ("Is it (really?)", True),
        ("I wonder why.", False),
        ("I like tea", False),
    ],
)
def test_a_question_is_told_by_its_final_mark(sentence: str, asks: bool) -> None:
    assert is_question(sentence) is asks
