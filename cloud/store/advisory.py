"""A lock across every process serving one store, held while a space is indexed.

Invariants:
- On PostgreSQL it is a session-level advisory lock (``pg_try_advisory_lock``) taken on
  a connection of its own and held for the whole block, across the many short
  transactions of one catch-up; it never waits: a second holder is told ``False`` at
  once and does nothing. PostgreSQL releases it when the block ends, and when the
  holder's connection dies with its process, so a crashed indexer never blocks another.
- The key names the purpose (``INDEX_LOCK_CLASS``) and the space (a 32-bit hash of its
  id); two spaces sharing a hash only take turns, never index each other's records.
- On SQLite (one machine, the embedded default) it is always granted: the processes
  of one SQLite file do not coordinate, and a catch-up's re-check under the space lock
  makes two overlapping writers write the same rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import Engine, text

INDEX_LOCK_CLASS = 0x6D730001  # "ms" + 1: the search-indexing lock of a space


def space_key(space_id: str) -> int:
    """A signed 32-bit key for ``space_id`` (PostgreSQL's ``int4``)."""
    return int.from_bytes(
        hashlib.blake2b(space_id.encode(), digest_size=4).digest(), "big", signed=True
    )


@contextmanager
def try_index_lock(engine: Engine, space_id: str) -> Iterator[bool]:
    """Hold the indexing lock of ``space_id`` for the block if no other process holds it;
    yields whether it was granted (``False``: another process is indexing the space)."""
    if engine.dialect.name != "postgresql":
        yield True
        return
    params = {"c": INDEX_LOCK_CLASS, "o": space_key(space_id)}
    with engine.connect() as conn:
        granted = bool(conn.execute(text("SELECT pg_try_advisory_lock(:c, :o)"), params).scalar())
        conn.commit()  # the lock is the session's: no transaction stays open while held
        try:
            yield granted
        finally:
            if granted:
                conn.execute(text("SELECT pg_advisory_unlock(:c, :o)"), params)
                conn.commit()
