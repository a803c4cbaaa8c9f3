"""Every interpreter of a protocol union is one ``match`` naming each member of the union
and ending in a ``case _`` the type checker proves unreachable (issue 24 item 1).

mypy proves the same on every run of ``make check``; this test makes a missing case (or
a chain of ``isinstance`` slipping back in) fail the suite too, without the type checker."""

from __future__ import annotations

import ast
import inspect
import textwrap
from collections.abc import Callable
from typing import Any, get_args

import pytest

from cloud import subset_feed
from cloud.effects import EffectWriter
from device import effects as device_effects
from device import sync
from protocol import ledger
from protocol.messages import AnyChange
from protocol.rules import Effect

# the terminal calls that make ``case _`` unreachable for the type checker
_NEVER = {"assert_never", "refuse_unknown_change"}

INTERPRETERS: list[tuple[str, Callable[..., Any], Any]] = [
    ("device effects", device_effects.perform, Effect),
    ("cloud effects", EffectWriter.perform, Effect),
    ("reference ledger", ledger._perform, Effect),
    ("device pulled changes", sync.SyncSession._apply_change, AnyChange),
    ("device resync items", sync._sent_items, AnyChange),
    ("cloud subset page", subset_feed.Page.add, AnyChange),
]


def _match_of(function: Callable[..., Any]) -> ast.Match:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    matches = [node for node in ast.walk(tree) if isinstance(node, ast.Match)]
    assert len(matches) == 1, f"{function.__qualname__}: expected one match, got {len(matches)}"
    return matches[0]


def _classes(pattern: ast.pattern) -> set[str]:
    if isinstance(pattern, ast.MatchClass) and isinstance(pattern.cls, ast.Name):
        return {pattern.cls.id}
    if isinstance(pattern, ast.MatchOr):
        return set().union(*(_classes(p) for p in pattern.patterns))
    return set()


@pytest.mark.parametrize(
    ("name", "function", "union"), INTERPRETERS, ids=[i[0] for i in INTERPRETERS]
)
def test_every_member_has_its_case_and_the_rest_is_never(
    name: str, function: Callable[..., Any], union: Any
) -> None:
    match = _match_of(function)
    named = set().union(*(_classes(case.pattern) for case in match.cases))
    members = {member.__name__ for member in get_args(union)}
    assert members - named == set(), f"{name}: no case for {sorted(members - named)}"
    assert named - members == set(), f"{name}: cases for non-members {sorted(named - members)}"
    last = match.cases[-1]
    assert isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
    [stmt] = last.body
    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
    assert isinstance(stmt.value.func, ast.Name) and stmt.value.func.id in _NEVER
    source = inspect.getsource(function)
    assert "isinstance(effect," not in source and "isinstance(change," not in source
