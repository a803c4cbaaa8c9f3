"""Rows written set-at-a-time: one executemany per statement, as fast as each dialect
allows (issue 21; the push batch, ``sql_batch.BatchSession.flush``, writes through it).

Invariants:
- The SQL and each column's bind processing (e.g. ``UtcDateTime``) are the ones
  SQLAlchemy itself would run: on SQLite the statement is compiled once per (statement,
  keys) for positional parameters and sent with ``exec_driver_sql``; on PostgreSQL it
  goes through SQLAlchemy (insertmanyvalues, one multi-row INSERT per thousand rows).
- A call's rows are read by the first row's keys (each caller builds its rows of one
  shape); no rows, no SQL.
- ``insert_many_ignoring`` skips a row already there (``statements.insert_ignore``),
  never updates one.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection

from cloud.store import statements as q
from cloud.store.sql import SqlSession


def insert_many(session: SqlSession, statement: Any, rows: list[dict[str, Any]]) -> None:
    """``rows`` through ``statement`` on the session's connection, in one executemany."""
    if not rows:
        return
    conn = session.conn
    if session._dialect != "sqlite":
        # PostgreSQL: SQLAlchemy's insertmanyvalues sends one multi-row INSERT per
        # thousand rows, which beats the driver's executemany
        conn.execute(statement, rows)
        return
    sql, names, processors = _compiled(conn, statement, tuple(rows[0]))
    conn.exec_driver_sql(sql, _tuples(rows, names, processors))


def _tuples(rows: list[dict[str, Any]], names: list[str], processors: list[Any]) -> list[Any]:
    """Each row as the tuple of its bound values, column by column: a column with a
    processor runs every value through it, the others are taken as they are."""
    if not names:
        return [() for _row in rows]
    columns = [[row[name] for row in rows] for name in names]
    for i, process in enumerate(processors):
        if process is not None:
            columns[i] = list(map(process, columns[i]))
    return list(zip(*columns, strict=True))


def insert_many_ignoring(session: SqlSession, table: Any, rows: list[dict[str, Any]]) -> None:
    """``rows`` into ``table``, each skipped when its key is there already."""
    insert_many(session, q.insert_ignore(session._dialect, table), rows)


# (statement, its keys) -> SQLite's text, its positional bind names and their processors
_COMPILED: dict[tuple[int, tuple[str, ...]], tuple[str, list[str], list[Any]]] = {}


def _compiled(conn: Connection, statement: Any, keys: tuple[str, ...]) -> Any:
    """A statement compiled once for SQLite's positional parameters (built from the
    statement, so the SQL and each column's bind processing, e.g. ``UtcDateTime``, are
    the ones SQLAlchemy itself would run)."""
    found = _COMPILED.get((id(statement), keys))
    if found is None:
        compiled = statement.compile(dialect=conn.dialect, column_keys=list(keys))
        names = list(compiled.positiontup or ())
        processors = compiled._bind_processors
        found = (compiled.string, names, [processors.get(n) for n in names])
        _COMPILED[id(statement), keys] = found
    return found
