"""The dependency rule of the architecture, checked on the source.

simulator -> device -> protocol <- cloud; device and cloud never import each other;
protocol does no I/O, reads no clock and makes no randomness of its own.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "device", "cloud", "simulator", "memsync")

FORBIDDEN = {
    "protocol": {
        "device",
        "cloud",
        "simulator",
        "memsync",
        "sqlite3",
        "sqlcipher3",
        "sqlalchemy",
        "psycopg",
        "httpx",
        "fastapi",
        "uvicorn",
        "starlette",
        "socket",
        "os",
        "io",
        "time",
        "random",
        "secrets",
        "subprocess",
        "threading",
        "asyncio",
        "urllib",
        "pathlib",
        "shutil",
        "tempfile",
        "uuid",
    },
    "device": {"cloud", "simulator", "memsync"},
    "cloud": {"device", "simulator", "memsync"},
    "simulator": {"memsync"},
    # the console entry names its groups only as strings (importlib), loaded when asked
    "memsync": {"device", "cloud", "simulator"},
}
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter"}


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_respect_the_rule(package: str) -> None:
    offenders = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in _modules(package)
        for name in _imports(path) & FORBIDDEN[package]
    }
    assert not offenders, sorted(offenders)


def test_protocol_reads_no_clock_and_opens_no_file() -> None:
    offenders = []
    for path in _modules("protocol"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in CLOCK_CALLS:
                offenders.append(f"{path.name}:{node.lineno} calls .{func.attr}()")
            if isinstance(func, ast.Name) and func.id in {"open", "input", "print", "exec"}:
                offenders.append(f"{path.name}:{node.lineno} calls {func.id}()")
    assert not offenders, offenders


def test_importing_protocol_loads_no_io_library() -> None:
    code = (
        "import sys, importlib, pkgutil, protocol\n"
        "for m in pkgutil.walk_packages(protocol.__path__, 'protocol.'):\n"
        "    importlib.import_module(m.name)\n"
        "bad = {'sqlite3', 'sqlcipher3', 'httpx', 'fastapi', 'sqlalchemy', 'psycopg'}\n"
        "print(sorted(bad & set(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stdout


def test_the_rule_checker_can_fail(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import sqlite3\nfrom cloud.app import create_app\n")
    assert _imports(bad) & FORBIDDEN["protocol"] == {"sqlite3", "cloud"}
