"""``restate``: a wh-question becomes the statement that would answer it; anything else
is left as asked (only the vector query reads it, and only when switched on)."""

from __future__ import annotations

import pytest

from protocol.retrieval.restate import restate


@pytest.mark.parametrize(
    ("query", "stated"),
    [
        ("What is my sister's name?", "my sister's name is"),
        ("Where do I live?", "I live"),
        ("What is my cat called?", "my cat is called"),
        ("Who are my sisters?", "my sisters are"),
        ("How often am I donating blood?", "I am donating blood"),
    ],
)
def test_a_wh_question_becomes_a_statement(query: str, stated: str) -> None:
    assert restate(query) == stated


@pytest.mark.parametrize(
    "query",
    ["my blood type", "Do I get sick on boats?", "Should I book a ferry?", "Tell me about Paris."],
)
def test_anything_else_is_left_as_asked(query: str) -> None:
    assert restate(query) == query.strip()
