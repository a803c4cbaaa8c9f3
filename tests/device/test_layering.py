"""device/ meets the cloud only on the wire: it never imports cloud or simulator."""

from __future__ import annotations

import ast
from pathlib import Path

DEVICE = Path(__file__).resolve().parents[2] / "device"


def test_device_never_imports_cloud_or_simulator() -> None:
    offenders = []
    for source in sorted(DEVICE.glob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{source.name}: {n}" for n in names if n.split(".")[0] in {"cloud", "simulator"}
            ]
    assert offenders == []
    assert len(list(DEVICE.glob("*.py"))) >= 10
