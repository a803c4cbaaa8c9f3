"""Migration 11 (issue 21 item 2): the subject index and ``record_search`` become
WITHOUT ROWID tables, each row stored once. A database made by migration 10 upgrades
with every row kept, and the queries read what they read before."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from device import catalog
from device.db import DB_FILENAME, Database
from device.migrations import MIGRATIONS, applied, migrate
from tests.device.conftest import PASSPHRASE

AT = datetime(2026, 2, 1, 8, 0, tzinfo=UTC).isoformat()
ROWS = [("rec_aaaaaaaa01", "u3:i drink my"), ("rec_aaaaaaaa01", "f:me|drink"),
        ("rec_aaaaaaaa02", "u3:i drink my"), ("rec_aaaaaaaa02", "o3:i drink my")]  # fmt: skip


def _without_rowid(db: Database, table: str) -> bool:
    sql = db.one("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,))[0]
    return "WITHOUT ROWID" in sql.upper()


def test_a_database_of_migration_10_keeps_every_index_row(tmp_path: Path) -> None:
    db = Database.create(tmp_path / DB_FILENAME, PASSPHRASE)
    try:
        assert MIGRATIONS[10].id == 11
        migrate(db, AT, MIGRATIONS[:10])
        assert not _without_rowid(db, "subject_index")
        with db.atomic():
            for record_id in sorted({r for r, _ in ROWS}):
                db.execute(
                    "INSERT INTO records (record_id, lifecycle, current_version, sync_state) "
                    "VALUES (?, 'active', 1, 'synced')",
                    (record_id,),
                )
                db.execute(
                    "INSERT INTO record_search (record_id, version) VALUES (?, 1)", (record_id,)
                )
            db.executemany("INSERT INTO subject_index (record_id, subject_key) VALUES (?, ?)", ROWS)

        assert migrate(db, AT) == [m.id for m in MIGRATIONS[10:]]

        assert applied(db) == [m.id for m in MIGRATIONS]
        assert _without_rowid(db, "subject_index") and _without_rowid(db, "record_search")
        rows = db.all("SELECT record_id, subject_key FROM subject_index ORDER BY 1, 2")
        assert [tuple(r) for r in rows] == sorted(ROWS)
        assert [tuple(r) for r in db.all("SELECT * FROM record_search ORDER BY 1")] == [
            ("rec_aaaaaaaa01", 1),
            ("rec_aaaaaaaa02", 1),
        ]
        assert catalog.same_key_records(db, ["u3:i drink my"]) == [
            "rec_aaaaaaaa01",
            "rec_aaaaaaaa02",
        ]
        plan = " ".join(
            str(r[3])
            for r in db.all(
                "EXPLAIN QUERY PLAN SELECT DISTINCT record_id FROM subject_index "
                "WHERE subject_key IN (?)",
                ("x",),
            )
        )
        assert "subject_index_key" in plan
        with db.atomic():  # a primary key still refuses a second copy of a row
            db.execute(
                "INSERT OR IGNORE INTO subject_index (record_id, subject_key) VALUES (?, ?)",
                ROWS[0],
            )
        assert db.one("SELECT count(*) FROM subject_index")[0] == len(ROWS)
    finally:
        db.close()
