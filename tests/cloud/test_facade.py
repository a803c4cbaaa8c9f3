"""``CloudService`` is a facade over modules of one concern each (issue 24): read from
the code's imports, no concern module imports the facade (so none can reach another
concern through it), and every module the service hands a call to is a ``cloud``
module the facade itself imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# the modules CloudService hands its calls to
CONCERNS = (
    "accounts",
    "admission",
    "cursors",
    "ending",
    "export_service",
    "feed",
    "index_admin",
    "recall",
    "status",
    "subset_service",
    "closing",
)
# who may import the facade: the front doors and the worker that drives it
FRONT_DOORS = {"cloud/app.py", "cloud/cli_common.py", "cloud/consolidator/worker.py"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("concern", CONCERNS)
def test_a_concern_module_never_imports_the_facade(concern: str) -> None:
    assert "cloud.service" not in _imports(ROOT / "cloud" / f"{concern}.py")


def test_only_the_front_doors_import_the_facade() -> None:
    importers = {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "cloud").rglob("*.py")
        if path.name != "service.py" and "cloud.service" in _imports(path)
    }
    assert importers <= FRONT_DOORS, f"these import CloudService: {importers - FRONT_DOORS}"


def test_the_facade_imports_every_concern() -> None:
    imported = _imports(ROOT / "cloud" / "service.py")
    missing = [c for c in CONCERNS if f"cloud.{c}" not in imported]
    assert missing == [], f"cloud/service.py does not use {missing}"
