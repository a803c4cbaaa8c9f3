"""Walls: a run leaves every space but its own exactly as it found it.

Invariants: a digest covers every row of every record-store table that has a
``space_id`` column (read through the operator handle's engine, SQLite or PostgreSQL,
including the lexical index) and every row of the key store (space keys, search keys,
wrapped data keys), grouped by space and table. Rows are hashed in a canonical order
(sorted by their canonical encoding), so two digests of unchanged data are equal
whatever order the database returns rows in. The comparison names the space and the
table that changed, appeared or vanished; the run's own spaces are left out.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from cloud.service import CloudService
from simulator.report import Check

KEY_STORE_TABLES = ("space_keys", "search_keys", "data_keys")
# SQLite's full-text table keeps its own shadow tables (``<name>_data`` ...) without a
# space column; the virtual table itself has one and is read like any other.
_SKIP_SUFFIXES = ("_data", "_idx", "_content", "_docsize", "_config")

Digest = dict[str, dict[str, str]]  # space id -> "store:table" -> sha256 of its rows


@dataclass(frozen=True)
class WallsDigest:
    """The per-space, per-table digests of a cloud's record store and key store."""

    spaces: Digest

    def space_ids(self) -> set[str]:
        return set(self.spaces)


def _canonical(value: Any) -> bytes:
    if value is None:
        return b"N"
    if isinstance(value, bytes | bytearray | memoryview):
        return b"B" + bytes(value).hex().encode()
    if isinstance(value, datetime | date):
        return b"T" + value.isoformat().encode()
    if isinstance(value, bool | int | float | Decimal):
        return b"I" + repr(value).encode()
    return b"S" + str(value).encode()


def _row_bytes(row: Iterable[Any]) -> bytes:
    return b"\x1f".join(_canonical(v) for v in row)


def _fold(rows: Iterator[tuple[str, bytes]]) -> Digest:
    """(space, "store:table", row bytes) ... -> per space, per table, one hash."""
    grouped: dict[str, dict[str, list[bytes]]] = defaultdict(lambda: defaultdict(list))
    for key, row in rows:
        space, table = key.split("\x00", 1)
        grouped[space][table].append(row)
    out: Digest = {}
    for space, tables in grouped.items():
        out[space] = {}
        for table, table_rows in tables.items():
            h = hashlib.sha256()
            for row in sorted(table_rows):
                h.update(len(row).to_bytes(8, "big"))
                h.update(row)
            out[space][table] = f"{len(table_rows)} row(s) sha256:{h.hexdigest()[:16]}"
    return out


def _quote(engine: Engine, name: str) -> str:
    return str(engine.dialect.identifier_preparer.quote(name))


def _record_store_rows(engine: Engine) -> Iterator[tuple[str, bytes]]:
    with engine.connect() as conn:
        inspector = inspect(conn)
        for table in sorted(inspector.get_table_names()):
            if table.endswith(_SKIP_SUFFIXES):
                continue
            columns = [c["name"] for c in inspector.get_columns(table)]
            if "space_id" not in columns:
                continue
            where = columns.index("space_id")
            listed = ", ".join(_quote(engine, c) for c in columns)
            result = conn.execute(text(f"SELECT {listed} FROM {_quote(engine, table)}"))
            for row in result:
                yield f"{row[where]}\x00record store:{table}", _row_bytes(row)


def _key_store_rows(path: Path) -> Iterator[tuple[str, bytes]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        for table in KEY_STORE_TABLES:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]
            where = columns.index("space_id")
            for row in conn.execute(f"SELECT * FROM {table}"):
                yield f"{row[where]}\x00key store:{table}", _row_bytes(row)
    finally:
        conn.close()


def take_digest(operator: CloudService) -> WallsDigest:
    """Digest every space of the cloud behind ``operator``, record store and key store."""
    rows = [*_record_store_rows(operator.store.engine), *_key_store_rows(operator.key_store_path)]
    return WallsDigest(_fold(iter(rows)))


def compare(before: WallsDigest, after: WallsDigest, own: Iterable[str]) -> list[str]:
    """What changed in any space not in ``own``: one line per space and table."""
    mine = set(own)
    problems: list[str] = []
    for space in sorted((before.space_ids() | after.space_ids()) - mine):
        was, now = before.spaces.get(space), after.spaces.get(space)
        if was is None:
            problems.append(f"space {space} appeared during the run ({sorted(now or {})})")
            continue
        if now is None:
            problems.append(f"space {space} vanished during the run")
            continue
        for table in sorted(set(was) | set(now)):
            if was.get(table) != now.get(table):
                problems.append(
                    f"space {space}, {table}: {was.get(table, 'absent')} -> "
                    f"{now.get(table, 'absent')}"
                )
    return problems


def walls_check(before: WallsDigest, after: WallsDigest, own: Iterable[str]) -> Check:
    """PASS when every space but the run's own is byte-for-byte as it was."""
    own_spaces = set(own)
    others = (before.space_ids() | after.space_ids()) - own_spaces
    problems = compare(before, after, own_spaces)
    return Check(
        "walls: every other space unchanged",
        not problems,
        "; ".join(problems)
        or f"{len(others)} other space(s) unchanged (record store and key store); "
        f"{len(own_spaces)} space(s) of this run left out",
    )
