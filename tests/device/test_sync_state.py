"""Sync states are one ``StrEnum`` (issue 24 item 2): its values are exactly what the
schema's CHECK constraints allow, and no device module spells a sync state as a string
of its own (a comparison, a ``sync_state=`` argument, or SQL naming a state)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from device import schema
from device.sync_state import SyncState

DEVICE = Path(__file__).resolve().parents[2] / "device"
NAMES = {state.value for state in SyncState}
# the enum itself; the schema's DDL (its CHECK is tested against the enum above); and
# device/retrieval.py, another engineer's room this round (one comparison of a row's
# column with "refused", which equals SyncState.REFUSED).
NOT_HERE = {"sync_state.py", "schema.py", "retrieval.py"}
_SQL_STATE = re.compile(r"sync_state\s*(=|!=|<>|IN)\s*\(?\s*'")


def test_the_enum_is_what_the_schema_allows() -> None:
    source = Path(schema.__file__).read_text()
    checks = re.findall(r"CHECK \(sync_state IN \(([^)]*)\)\)", source)
    assert checks, "the schema has sync_state CHECK constraints"
    for check in checks:
        assert {part.strip().strip("'") for part in check.split(",")} == NAMES
    assert [s.value for s in SyncState] == ["pending", "synced", "refused"]
    assert SyncState.SYNCED == "synced" and f"{SyncState.REFUSED}" == "refused"


def _spelled(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in NAMES:
                    found.append(f"{path.name}:{node.lineno} compares with {side.value!r}")
        elif isinstance(node, ast.keyword) and node.arg in {"sync_state", "state"}:
            if isinstance(node.value, ast.Constant) and node.value.value in NAMES:
                found.append(
                    f"{path.name}:{node.value.lineno} passes {node.arg}={node.value.value!r}"
                )
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _SQL_STATE.search(node.value)
        ):
            found.append(f"{path.name}:{node.lineno} names a state in SQL")
    return found


@pytest.mark.parametrize(
    "path",
    sorted(p for p in DEVICE.rglob("*.py") if p.name not in NOT_HERE),
    ids=lambda p: str(p.relative_to(DEVICE)),
)
def test_no_device_module_spells_a_sync_state(path: Path) -> None:
    assert _spelled(path) == []
