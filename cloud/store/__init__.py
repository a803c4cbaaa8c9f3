"""Record stores: one interface (``base``, split by room in ``rooms``), one SQL implementation
for SQLite and PostgreSQL (``sql`` and one ``sql_*`` mixin per room)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from cloud.store.base import RecordStore, StoreSession
from cloud.store.sql import SqlStore


def open_store(url: str, clock: Callable[[], datetime]) -> SqlStore:
    """Open (and migrate) the record store named by ``url``."""
    return SqlStore(url, clock)


__all__ = ["RecordStore", "SqlStore", "StoreSession", "open_store"]
