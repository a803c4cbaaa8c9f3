"""``decide`` is one ``match`` over the operations, a case for each member of
``AnyOperation`` and a last ``case _`` proved unreachable (issue 24); each case sends
the op to the rule of its family in ``protocol/rulebook/``. And no module of
``protocol/`` outgrows the house's bound of ~600 lines."""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path
from typing import get_args

from protocol import rules
from protocol.operations import AnyOperation

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = {"items", "creating", "records", "forgetting"}
MAX_LINES = 620


def _match() -> ast.Match:
    tree = ast.parse(textwrap.dedent(inspect.getsource(rules.decide)))
    [match] = [node for node in ast.walk(tree) if isinstance(node, ast.Match)]
    return match


def test_decide_has_a_case_for_every_operation_and_ends_in_assert_never() -> None:
    match = _match()
    named = {
        case.pattern.cls.id
        for case in match.cases
        if isinstance(case.pattern, ast.MatchClass) and isinstance(case.pattern.cls, ast.Name)
    }
    assert named == {member.__name__ for member in get_args(AnyOperation)}
    last = match.cases[-1]
    assert isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
    [stmt] = last.body
    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
    assert isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "assert_never"


def test_each_case_hands_the_op_to_a_rule_of_its_family() -> None:
    for case in _match().cases[:-1]:
        [stmt] = case.body
        assert isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call)
        func = stmt.value.func
        assert isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
        assert func.value.id in FAMILIES, ast.unparse(stmt)
        assert [ast.unparse(a) for a in stmt.value.args] == ["op", "facts"]


def test_no_protocol_module_outgrows_the_bound() -> None:
    too_long = {
        path.relative_to(ROOT).as_posix(): n
        for path in (ROOT / "protocol").rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert too_long == {}, f"protocol modules over {MAX_LINES} lines: {too_long}"
