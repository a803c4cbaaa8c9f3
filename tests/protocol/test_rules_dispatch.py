"""``decide`` is one ``match`` over the operations' ``kind`` tag, a case for each member
of ``AnyOperation`` and a last ``case _`` proved unreachable (issue 24); each case sends
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
    assert ast.unparse(match.subject) == "op.kind"  # the tag: narrowed by the type checker
    named = {
        case.pattern.value.value
        for case in match.cases
        if isinstance(case.pattern, ast.MatchValue) and isinstance(case.pattern.value, ast.Constant)
    }
    assert named == {member.model_fields["kind"].default for member in get_args(AnyOperation)}
    last = match.cases[-1]
    assert isinstance(last.pattern, ast.MatchAs) and last.pattern.pattern is None
    [stmt] = last.body
    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
    assert isinstance(stmt.value.func, ast.Name) and stmt.value.func.id == "assert_never"
    assert [ast.unparse(a) for a in stmt.value.args] == ["op"]


def test_every_operation_reaches_the_rule_of_its_kind() -> None:
    """Each kind goes to the rule named after it (``restrict_usage`` is ``restrict``)."""
    for case in _match().cases[:-1]:
        assert isinstance(case.pattern, ast.MatchValue)
        kind = ast.literal_eval(case.pattern.value)
        [stmt] = case.body
        assert isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call)
        func = stmt.value.func
        assert isinstance(func, ast.Attribute)
        assert func.attr == {"restrict_usage": "restrict", "forget_permanently": "forget"}.get(
            kind, kind
        ), ast.unparse(stmt)


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
