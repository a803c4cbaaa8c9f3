"""Invariant 3, read off the code: nothing updates or deletes memory content except the
device's key shredder.

Content lives in the tables below, on the device and in the cloud. This test reads
every module of ``device/`` and ``cloud/`` — SQL text and SQLAlchemy Core calls — and
fails if any of them updates those tables, or deletes from them anywhere but
``device/shred.py``. (The cloud never deletes content at all: it destroys keys.)
The triggers in both schemas enforce the same rule at run time; their tests live with
each part.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CONTENT_TABLES = ("record_versions", "episodes", "artifacts")
# Columns of those tables that are sync bookkeeping, not content: a device may mark a
# row synced or refused, or kept only on this device (never pushed). Everything else in
# them is content or its identity.
STATE_COLUMNS = frozenset({"sync_state", "refusal_reason", "device_only"})
SHREDDERS = {Path("device/shred.py")}
SET_COLUMN = re.compile(r"(\w+)\s*=")

_T = "|".join(CONTENT_TABLES)
SQL_UPDATE = re.compile(rf"\bUPDATE\s+(?:OR\s+\w+\s+)?[\"`]?({_T})\b", re.IGNORECASE)
SQL_DELETE = re.compile(rf"\bDELETE\s+FROM\s+[\"`]?({_T})\b", re.IGNORECASE)
SQL_REPLACE = re.compile(
    rf"\b(?:REPLACE|INSERT\s+OR\s+REPLACE)\s+INTO\s+[\"`]?({_T})\b", re.IGNORECASE
)
CORE_UPDATE = re.compile(rf"\bupdate\(\s*(?:\w+\.)?({_T})\b|\b({_T})\.update\(")
CORE_DELETE = re.compile(rf"\bdelete\(\s*(?:\w+\.)?({_T})\b|\b({_T})\.delete\(")
TRUNCATE = re.compile(
    rf"\b(?:TRUNCATE|DROP\s+TABLE)\s+(?:IF\s+EXISTS\s+)?[\"`]?({_T})\b", re.IGNORECASE
)


def _only_state_columns(lines: list[str], number: int, start: int) -> bool:
    """Whether an ``UPDATE <table> SET ...`` sets only bookkeeping columns."""
    statement = " ".join([lines[number][start:], *lines[number + 1 : number + 3]])
    set_part = re.split(r"\bWHERE\b", statement, maxsplit=1, flags=re.IGNORECASE)[0]
    if not re.search(r"\bSET\b", set_part, re.IGNORECASE):
        return False
    columns = set(SET_COLUMN.findall(re.split(r"\bSET\b", set_part, flags=re.IGNORECASE)[1]))
    return bool(columns) and columns <= STATE_COLUMNS


def offences(source: str, *, may_delete: bool) -> list[str]:
    """The lines of ``source`` that change content by a forbidden path."""
    found = []
    lines = source.splitlines()
    for number, line in enumerate(lines):
        checks = [("updates", SQL_UPDATE), ("updates", CORE_UPDATE), ("replaces", SQL_REPLACE)]
        checks.append(("drops", TRUNCATE))
        if not may_delete:
            checks += [("deletes from", SQL_DELETE), ("deletes from", CORE_DELETE)]
        for verb, pattern in checks:
            match = pattern.search(line)
            if match is None:
                continue
            if pattern is SQL_UPDATE and _only_state_columns(lines, number, match.start()):
                continue
            table = next(g for g in match.groups() if g)
            found.append(f"line {number + 1} {verb} {table}: {line.strip()}")
    return found


def _modules() -> list[Path]:
    return sorted(
        p.relative_to(ROOT)
        for package in ("device", "cloud")
        for p in (ROOT / package).rglob("*.py")
    )


def _is_trigger_or_migration_text(line: str) -> bool:
    return bool(
        re.search(r"\b(BEFORE|AFTER|INSTEAD\s+OF)\s+(UPDATE|DELETE)\b", line, re.IGNORECASE)
    )


@pytest.mark.parametrize("module", _modules(), ids=str)
def test_no_module_changes_memory_content(module: Path) -> None:
    source = (ROOT / module).read_text()
    lines = [
        line if not _is_trigger_or_migration_text(line) else "" for line in source.splitlines()
    ]
    found = offences("\n".join(lines), may_delete=module in SHREDDERS)
    assert not found, f"{module} changes memory content outside the key shredder: {found}"


@pytest.mark.parametrize(
    "forbidden",
    [
        'db.execute("UPDATE record_versions SET sealed = ? WHERE record_id = ?", row)',
        "conn.execute('update episodes set sealed_content = x')",
        'db.execute("INSERT OR REPLACE INTO artifacts VALUES (?, ?)")',
        "s.execute(update(record_versions).values(sealed_content=b''))",
        "s.execute(schema.episodes.update().values(key_id='k'))",
        'db.execute("DELETE FROM record_versions WHERE record_id = ?")',
        "s.execute(delete(artifacts).where(artifacts.c.artifact_id == a))",
    ],
)
def test_the_reader_catches_a_forbidden_write(forbidden: str) -> None:
    assert offences(f"x = 1\n{forbidden}\n", may_delete=False)


def test_bookkeeping_columns_may_be_updated_but_not_with_content() -> None:
    ok = 'db.execute("UPDATE episodes SET sync_state = ?, refusal_reason = ? WHERE episode_id = ?")'
    assert not offences(ok, may_delete=False)
    mixed = 'db.execute("UPDATE episodes SET sync_state = ?, sealed = ? WHERE episode_id = ?")'
    assert offences(mixed, may_delete=False)


def test_the_shredder_may_delete_but_never_update() -> None:
    assert not offences('db.execute("DELETE FROM episodes WHERE episode_id = ?")', may_delete=True)
    assert offences('db.execute("UPDATE episodes SET sealed = NULL")', may_delete=True)
