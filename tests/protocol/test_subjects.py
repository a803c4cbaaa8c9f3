"""How "same subject" is decided (the newer statement wins; docs/memory-reference.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.subjects import lookup_keys, same_subject, stored_keys

SAME = [
    ("I drink my coffee iced.", "I drink my coffee hot now."),
    ("My favorite number is 7.", "My favorite number is not 1729."),
    ("I grew up in Duluth.", "I grew up in Oslo."),
    ("I live in Oslo.", "I live in Bergen these days."),
]
DIFFERENT = [
    ("I like tea.", "I like coffee."),  # two shared words: not enough
    ("I grew up in Duluth.", "I grew up in Duluth."),  # the same statement, not a change
    ("I drink my coffee iced.", "My sister drinks tea."),
    # the shared beginning is less than half of the shorter sentence
    (
        "I think that the new cafe downtown serves great coffee.",
        "I think that my brother would love the new cafe.",
    ),
]


@pytest.mark.parametrize(("a", "b"), SAME)
def test_same_subject(a: str, b: str) -> None:
    assert same_subject(a, None, b, None) and same_subject(b, None, a, None)
    assert _meet(a, b) and _meet(b, a)


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_not_the_same_subject(a: str, b: str) -> None:
    assert not same_subject(a, None, b, None)


def test_explicit_subjects_decide_when_both_are_given() -> None:
    assert same_subject("I take it black.", "coffee", "Milk, please.", "Coffee ")
    assert not same_subject("I drink my coffee iced.", "coffee", "I drink my coffee hot.", None)
    assert stored_keys("anything", "Coffee") == lookup_keys("else", " coffee") == ["s:coffee"]


def _meet(new: str, old: str) -> bool:
    """Whether looking up ``new`` finds ``old`` in the index."""
    return bool(set(lookup_keys(new, None)) & set(stored_keys(old, None)))


def test_long_sentences_do_not_meet_every_record_with_the_same_first_words() -> None:
    long = "I keep a note about the garden, the bikes and the long trip north."
    other = "I keep a note about my sister's new flat in the old town by the river."
    assert not same_subject(long, None, other, None)
    assert not _meet(long, other) and not _meet(other, long)


vocabulary = st.sampled_from(["i", "my", "coffee", "drink", "hot", "now", "tea", "like", "the"])
sentences = st.lists(vocabulary, max_size=14)


@given(sentences, sentences)
def test_same_subject_is_symmetric_and_the_index_always_finds_it(
    a: list[str], b: list[str]
) -> None:
    x, y = " ".join(a), " ".join(b)
    assert same_subject(x, None, y, None) == same_subject(y, None, x, None)
    if same_subject(x, None, y, None):
        assert _meet(x, y) and _meet(y, x)
