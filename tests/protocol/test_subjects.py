"""How "same subject" is decided (the newer statement wins; docs/memory-reference.md)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.subjects import index_key, same_subject

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
    assert index_key(a, None) == index_key(b, None) is not None


@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_not_the_same_subject(a: str, b: str) -> None:
    assert not same_subject(a, None, b, None)


def test_explicit_subjects_decide_when_both_are_given() -> None:
    assert same_subject("I take it black.", "coffee", "Milk, please.", "Coffee ")
    assert not same_subject("I drink my coffee iced.", "coffee", "I drink my coffee hot.", None)
    assert index_key("anything", "Coffee") == "s:coffee"


sentences = st.lists(
    st.sampled_from(["i", "my", "coffee", "drink", "hot", "now", "tea"]), max_size=8
)


@given(sentences, sentences)
def test_same_subject_is_symmetric_and_implies_equal_index_keys(a: list[str], b: list[str]) -> None:
    x, y = " ".join(a), " ".join(b)
    assert same_subject(x, None, y, None) == same_subject(y, None, x, None)
    if same_subject(x, None, y, None):
        assert index_key(x, None) == index_key(y, None) is not None
