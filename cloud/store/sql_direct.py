"""A push's hot reads straight through the DB-API cursor (issue 21): no SQLAlchemy
statement compilation or result set-up per read.

Invariants:
- Only plain-text columns are read and bound here (ids and tokens): no column has a
  bind or result processor, so what the driver returns is what SQLAlchemy would.
- The SQL is written once per dialect (``?`` for sqlite3, ``%s`` for psycopg 3) and runs
  on the session's own connection, so in its transaction: it sees every row the
  transaction wrote.
- Every statement is shown to the engine's ``before_cursor_execute`` listeners, as
  SQLAlchemy's own would be (the push bench counts and replays them).
- An IN list is read in ``sql_lineage.chunks``; no values, no SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cloud.store.sql import SqlSession
from cloud.store.sql_lineage import chunks


def _run(session: SqlSession, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    conn = session.conn
    if session._dialect != "sqlite":
        sql = sql.replace("?", "%s")
    cursor = conn.connection.cursor()
    try:
        if conn._has_events or conn.engine._has_events:
            conn.dispatch.before_cursor_execute(conn, cursor, sql, params, None, False)
        cursor.execute(sql, params)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def column_in(
    session: SqlSession,
    table: str,
    column: str,
    key: str,
    space_id: str,
    values: Sequence[str],
) -> list[tuple[str, str]]:
    """``(key, column)`` of every row of ``table`` in the space whose ``key`` is one of
    ``values`` (``table``, ``column`` and ``key`` are this package's own names)."""
    found: list[tuple[str, str]] = []
    for chunk in chunks(list(values)):
        marks = ", ".join("?" * len(chunk))
        sql = f"SELECT {key}, {column} FROM {table} WHERE space_id = ? AND {key} IN ({marks})"
        found += [(r[0], r[1]) for r in _run(session, sql, (space_id, *chunk))]
    return found
