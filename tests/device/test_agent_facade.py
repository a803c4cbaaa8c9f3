"""``DeviceAgent`` stays a facade (issue 24): its public methods delegate to the modules
of one concern each, and the concern modules never reach back into the agent."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "device" / "agent.py"
# the modules the agent's methods delegate to; none of them may import the agent
CONCERNS = (
    "ops",
    "learned",
    "recalling",
    "holdings",
    "enrollment",
    "wiping",
    "remote",
    "syncing",
    "watching",
    "opening",
    "parts",
    "invalid",
)
MAX_LINES = 720  # ~600 is the house's bound; the facade has ~100 one-line delegations
MAX_STATEMENTS = 8  # a delegation, a guard or two, and the wiring around it


def _agent_class() -> ast.ClassDef:
    tree = ast.parse(AGENT.read_text(encoding="utf-8"))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "DeviceAgent"]
    return cls


def _public_methods() -> list[ast.FunctionDef]:
    return [
        n
        for n in _agent_class().body
        if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")
    ]


def _body(fn: ast.FunctionDef) -> list[ast.stmt]:
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        return body[1:]  # the docstring
    return body


def test_the_agent_module_stays_small() -> None:
    lines = len(AGENT.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"device/agent.py has {lines} lines (bound {MAX_LINES})"


def test_every_public_method_is_a_delegation() -> None:
    methods = _public_methods()
    assert len(methods) > 80  # the whole API is still here
    for fn in methods:
        body = _body(fn)
        statements = [s for stmt in body for s in ast.walk(stmt) if isinstance(s, ast.stmt)]
        assert len(statements) <= MAX_STATEMENTS, (
            f"DeviceAgent.{fn.name} has {len(statements)} statements: move the logic to "
            "the module of its concern"
        )
        logic = [
            type(node).__name__
            for stmt in body
            for node in ast.walk(stmt)
            if isinstance(node, ast.For | ast.While | ast.ListComp | ast.SetComp | ast.DictComp)
            or (isinstance(node, ast.Try) and node.handlers)
        ]
        assert logic == [], f"DeviceAgent.{fn.name} holds logic ({logic}), not a delegation"


def test_no_concern_module_imports_the_agent() -> None:
    for name in CONCERNS:
        tree = ast.parse((ROOT / "device" / f"{name}.py").read_text(encoding="utf-8"))
        imported = {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module is not None
        } | {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
        }
        assert "device.agent" not in imported, f"device/{name}.py imports the agent"


def test_a_misspelt_keyword_is_refused_as_a_signature_would(tmp_path: Path) -> None:
    from device.agent import DeviceAgent

    with pytest.raises(TypeError, match="clok"):
        DeviceAgent.create(tmp_path, "pass", device_name="phone", clok=None)  # type: ignore[call-arg]
    assert list(tmp_path.iterdir()) == []  # refused before anything was opened
    agent = DeviceAgent.create(tmp_path, "pass", device_name="phone", kdf_iterations=1)
    with agent:
        with pytest.raises(TypeError, match="areaa"):
            agent.recall("anything", areaa=None)  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="projekt"):
            agent.remember("I live in Oslo.", "c1", projekt="x")  # type: ignore[call-arg]
