"""An ordered migration runner for the record store (sqlite-utils style); the
migrations themselves are ``cloud.store.migration_steps``.

Invariants: migrations are applied in version order; each one runs in one
transaction together with its row in ``schema_migrations``, so a crash leaves either
all of it or none of it. Applied migrations are never edited: a schema change is a new
migration at the end of ``MIGRATIONS``. Concurrent starters serialise on a lock
(``BEGIN IMMEDIATE`` on SQLite, an advisory transaction lock on PostgreSQL).
A store already at a version newer than the last of ``MIGRATIONS`` (a newer memsync
migrated it) is refused before anything is applied (``StoreTooNew``); ``refuse_newer``
lets a running process find that out for itself (``SqlStore`` checks it in every
transaction), so an old process on a shared PostgreSQL database stops serving.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sqlalchemy import Connection, Engine, insert, select, text

from cloud.errors import StoreTooNew
from cloud.store.migration_steps import (
    CONVERSATION_MIGRATION as CONVERSATION_MIGRATION,
)
from cloud.store.migration_steps import EXPORTS_MIGRATION as EXPORTS_MIGRATION
from cloud.store.migration_steps import HINT_MIGRATION as HINT_MIGRATION
from cloud.store.migration_steps import HISTORY_MIGRATION as HISTORY_MIGRATION
from cloud.store.migration_steps import (
    LEGACY_EPISTEMIC_PLACEHOLDER as LEGACY_EPISTEMIC_PLACEHOLDER,
)
from cloud.store.migration_steps import MIGRATIONS as MIGRATIONS
from cloud.store.migration_steps import STATE_SEQ_MIGRATION as STATE_SEQ_MIGRATION
from cloud.store.migration_steps import SUBSET_MIGRATION as SUBSET_MIGRATION
from cloud.store.migration_steps import Migration as Migration
from cloud.store.schema import schema_migrations

_CREATE_MIGRATIONS = {
    "sqlite": (
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "name TEXT NOT NULL, applied_at TIMESTAMP NOT NULL)"
    ),
    "postgresql": (
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
    ),
}
_PG_MIGRATION_LOCK = 0x6D656D73  # "mems"


KNOWN_VERSION = MIGRATIONS[-1].version
NEWEST_APPLIED = "SELECT max(version) FROM schema_migrations"


def newest_applied(conn: Connection) -> int:
    """The highest migration applied to the store (0: none; the table exists)."""
    found = conn.exec_driver_sql(NEWEST_APPLIED).scalar()
    return int(found or 0)


def refuse_newer(conn: Connection, store: str) -> None:
    """Raise ``StoreTooNew`` (naming ``store`` and both versions) when a newer memsync
    migrated the store past ``KNOWN_VERSION``."""
    found = newest_applied(conn)
    if found > KNOWN_VERSION:
        raise StoreTooNew(store or "at this URL", found, KNOWN_VERSION)


def migrate(engine: Engine, clock: Callable[[], datetime], store: str = "") -> list[int]:
    """Apply every migration not yet applied; return the versions applied now.
    A store newer than this code raises ``StoreTooNew`` (naming ``store`` and both
    versions) before anything is applied."""
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
        conn.exec_driver_sql(_CREATE_MIGRATIONS[conn.dialect.name])
        refuse_newer(conn, store)
    applied_now: list[int] = []
    for migration in MIGRATIONS:
        with engine.begin() as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_MIGRATION_LOCK})
            conn.exec_driver_sql(_CREATE_MIGRATIONS[conn.dialect.name])
            done = conn.execute(
                select(schema_migrations.c.version).where(
                    schema_migrations.c.version == migration.version
                )
            ).first()
            if done is not None:
                continue
            migration.apply(conn)
            conn.execute(
                insert(schema_migrations).values(
                    version=migration.version, name=migration.name, applied_at=clock()
                )
            )
            applied_now.append(migration.version)
    return applied_now
