"""Making and opening a device's database: the encrypted file, its migrations, the
device's key pair and identity, and what an older schema left to catch up.

Invariants:
- ``create`` makes the database, runs every migration and stores the meta row (name,
  cloud URL, a fresh local space id, the new private key) in one transaction; if any
  step fails the files it made (the database, its WAL, shm and KDF files) are removed,
  so a create can simply be run again.
- ``prepare`` (on open) applies pending migrations, backfills what migration 2 added
  when it just ran on an older database, and indexes records an older schema left
  unindexed; another model's vectors are rebuilt later (``device.syncing``).
- The private key lives only inside the SQLCipher database (``device.keys``).
"""

from __future__ import annotations

from pathlib import Path

from device import catalog, keys, search, store
from device.db import DB_FILENAME, KDF_SUFFIX, Database
from device.errors import InvalidOperation
from device.migrations import migrate
from device.parts import Parts


def check_name(device_name: str) -> None:
    if not device_name or len(device_name) > 64:
        raise InvalidOperation(
            f"device name {device_name!r} must be 1 to 64 characters; nothing was created"
        )


def initialise(parts: Parts, directory: Path, *, device_name: str, cloud_url: str | None) -> None:
    """Migrate a new database and store its meta row; on failure remove its files."""
    db = parts.db
    try:
        migrate(db, parts.iso())
        with db.atomic():
            private_key = keys.new_private_key(parts.random)
            store.insert_meta(
                db,
                device_name=device_name,
                cloud_url=cloud_url,
                local_space=parts.new_id("sp"),
                private_key=keys.private_key_bytes(private_key),
                created_at=parts.iso(),
            )
    except BaseException:
        db.close()
        for suffix in ("", "-wal", "-shm", KDF_SUFFIX):
            (directory / (DB_FILENAME + suffix)).unlink(missing_ok=True)
        raise


def prepare(parts: Parts) -> None:
    """Bring an existing database up to this code's schema; on failure close it."""
    db: Database = parts.db
    try:
        ran = migrate(db, parts.iso())
        store.get_meta(db)
        if 2 in ran and 1 not in ran:
            catalog.backfill_v2(db, parts.iso())
        with db.atomic():  # records an older schema left unindexed (another model's
            # vectors are rebuilt in the background: ``rebuild_vectors``)
            search.catch_up(db, other_models=False)
            search.merge_if_needed(db)
    except BaseException:
        db.close()
        raise
