"""``DeviceAgent`` stays a facade (issue 24): its public methods delegate to the modules
of one concern each, and the concern modules never reach back into the agent.

The facade is composed of one class per concern (``device/agent*.py``): each module
stays under the house's 600 lines, each public name is defined by exactly one of them,
and the public API (every name, its kind and signature) is pinned in
``agent_api.txt``: a split moves methods, it never changes what callers see."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AGENT = ROOT / "device" / "agent.py"
# the modules whose classes compose DeviceAgent (its core and one facade per concern)
FACADES = (
    "agent",
    "agent_core",
    "agent_writing",
    "agent_reading",
    "agent_rules",
    "agent_sync",
    "agent_account",
)
API = Path(__file__).with_name("agent_api.txt")
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
MAX_LINES = 600  # the house's bound, for every facade module
MAX_STATEMENTS = 8  # a delegation, a guard or two, and the wiring around it


def _classes(module: str) -> list[ast.ClassDef]:
    tree = ast.parse((ROOT / "device" / f"{module}.py").read_text(encoding="utf-8"))
    return [n for n in tree.body if isinstance(n, ast.ClassDef)]


def _agent_class() -> ast.ClassDef:
    [cls] = [c for c in _classes("agent") if c.name == "DeviceAgent"]
    return cls


def _defined() -> dict[str, list[str]]:
    """Every name a facade class defines -> the classes (``module.Class``) defining it."""
    found: dict[str, list[str]] = {}
    for module in FACADES:
        for cls in _classes(module):
            for node in cls.body:
                if isinstance(node, ast.FunctionDef):
                    found.setdefault(node.name, []).append(f"{module}.{cls.name}")
    return found


def _public_methods() -> list[ast.FunctionDef]:
    return [
        n
        for module in FACADES
        for cls in _classes(module)
        for n in cls.body
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


@pytest.mark.parametrize("module", FACADES)
def test_every_facade_module_stays_small(module: str) -> None:
    lines = len((ROOT / "device" / f"{module}.py").read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"device/{module}.py has {lines} lines (bound {MAX_LINES})"


def test_the_agent_is_composed_of_the_facades_only() -> None:
    from device import agent_core
    from device.agent import DeviceAgent

    owners = {cls.__module__.removeprefix("device.") for cls in DeviceAgent.__mro__[:-1]}
    assert owners == set(FACADES), f"DeviceAgent's classes come from {sorted(owners)}"
    assert DeviceAgent.__mro__[-2] is agent_core.AgentCore  # the core is under every facade


def test_each_name_is_defined_by_one_facade_only() -> None:
    twice = {name: owners for name, owners in _defined().items() if len(owners) > 1}
    assert twice == {}, f"defined by more than one facade (one shadows another): {twice}"


def _api() -> list[str]:
    from device.agent import DeviceAgent

    lines = []
    for name in sorted(dir(DeviceAgent)):
        if name.startswith("_"):
            continue
        found = inspect.getattr_static(DeviceAgent, name)
        if isinstance(found, property):
            lines.append(f"{name} property")
        elif isinstance(found, classmethod):
            lines.append(f"{name} classmethod {inspect.signature(found.__func__)}")
        else:
            lines.append(f"{name} {inspect.signature(found)}")
    return lines


def test_the_public_api_is_exactly_the_pinned_one() -> None:
    pinned = API.read_text(encoding="utf-8").splitlines()
    now = _api()
    gone = sorted(set(pinned) - set(now))
    new = sorted(set(now) - set(pinned))
    assert (gone, new) == ([], []), (
        f"DeviceAgent's public API changed: gone or changed {gone}; new {new} "
        f"(a deliberate change updates {API.name})"
    )


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
        facades = {f"device.{module}" for module in FACADES}
        assert not imported & facades, f"device/{name}.py imports {sorted(imported & facades)}"


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
