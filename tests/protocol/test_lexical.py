"""Lexical terms: word forms meet, relation terms never come from a query, blinding is keyed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.model import RecordContent
from protocol.retrieval.lexical import RELATION_MARK, any_of, blind, terms
from protocol.retrieval.relations import people, relation_terms


@pytest.mark.parametrize(
    "forms",
    [
        ("grow", "grew", "growing", "grown", "grows"),
        ("summary", "summaries", "summarize", "summarized", "summarization"),
        ("run", "ran", "running", "runs"),
        ("buy", "bought", "buying"),
        ("child", "children"),
        ("fly", "flew", "flown", "flies"),
        ("happy", "happiness"),
    ],
)
def test_word_forms_meet(forms: tuple[str, ...]) -> None:
    assert len({tuple(terms(f)) for f in forms}) == 1, {f: terms(f) for f in forms}


def test_the_duluth_question_shares_a_term_with_its_answer() -> None:
    assert set(terms("Where did I grow up?")) & set(terms("I grew up in Duluth."))


def test_stop_words_and_punctuation_are_dropped() -> None:
    assert terms("Where did I ...?") == []
    assert terms("Priya's flight") == ["priya", "flight"]


@given(st.text(max_size=300))
def test_a_query_never_yields_a_relation_term(text: str) -> None:
    assert not any(t.startswith(RELATION_MARK) for t in terms(text))


def test_blinding_is_keyed_stable_and_index_safe() -> None:
    a, b = b"a" * 32, b"b" * 32
    assert blind("grow", a) == blind("grow", a) != blind("grow", b)
    assert blind("grow", a).isalnum() and len(blind("grow", a)) == 16
    assert any_of(["x", "y", "x"]) == "x OR y"


def test_relation_terms_name_people_family_project_and_episodes() -> None:
    assert people("My sister Priya lives in Lisbon.") >= {"priya", "sister"}
    assert "priya" in people("Priya is my best friend.")
    assert not people("Every morning I run.")
    content = RecordContent(
        text="My mom and Tomas are visiting.",
        source_episode_ids=["ep_aaaaaaaa"],
        project="Reno",
    )
    found = relation_terms(content)
    assert found == sorted(found)
    assert {"@person:mother", "@person:tomas", "@project:reno", "@episode:ep_aaaaaaaa"} <= set(
        found
    )
