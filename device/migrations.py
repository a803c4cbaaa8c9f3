"""Ordered schema migrations, sqlite-utils style.

Invariants: migrations run in id order; each one runs in ONE transaction together
with the insert of its row into ``schema_migrations``, so a migration is either
wholly applied and recorded or not at all; a recorded migration never runs again; a
database recorded by a newer memsync (an id this code does not know) is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from device import schema
from device.db import Database
from device.errors import MigrationFailed, SchemaTooNew


@dataclass(frozen=True, slots=True)
class Migration:
    id: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial schema", schema.V1),
    Migration(2, "full memory record", schema.V2),
    Migration(3, "retrieval indexes", schema.V3),
    Migration(4, "writing memory: candidates and device-only classes", schema.V4),
    Migration(5, "sync under fire: resync marker and wipe confirmation", schema.V5),
    Migration(6, "indexes on the columns that reference data keys", schema.V6_KEY_INDEXES),
    Migration(7, "the import ledger: export packages imported once", schema.V7_IMPORT_LEDGER),
    Migration(8, "the device subset: uses, reasons, deferred evictions", schema.V8_SUBSET),
    Migration(9, "records a resync kept unseen, asked about on a duplicate", schema.V9_RESYNC_KEPT),
    Migration(10, "sync status: when this device last synced", schema.V10_LAST_SYNCED),
    Migration(
        11, "derived rows stored once: WITHOUT ROWID indexes", schema.V11_DERIVED_STORED_ONCE
    ),
)

_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    applied_at TEXT NOT NULL
)
"""


def applied(db: Database) -> list[int]:
    return [row[0] for row in db.all("SELECT id FROM schema_migrations ORDER BY id")]


def migrate(db: Database, now: str, migrations: Sequence[Migration] = MIGRATIONS) -> list[int]:
    """Apply every migration not yet recorded; return the ids applied now."""
    ids = [m.id for m in migrations]
    if ids != sorted(set(ids)):
        raise ValueError(f"migration ids must be unique and ascending, got {ids}")
    with db.atomic():
        db.execute(_LEDGER)
    done = set(applied(db))
    unknown = sorted(done - set(ids))
    if unknown:
        raise SchemaTooNew(
            f"{db.path} was migrated by a newer memsync (migration(s) {unknown} unknown here); "
            "nothing was changed"
        )
    ran: list[int] = []
    for migration in migrations:
        if migration.id in done:
            continue
        try:
            with db.atomic():
                for statement in migration.statements:
                    db.execute(statement)
                db.execute(
                    "INSERT INTO schema_migrations (id, name, applied_at) VALUES (?, ?, ?)",
                    (migration.id, migration.name, now),
                )
        except Exception as exc:
            raise MigrationFailed(
                f"migration {migration.id} ({migration.name}) failed on {db.path} and was "
                f"rolled back: {exc}"
            ) from exc
        ran.append(migration.id)
    return ran
