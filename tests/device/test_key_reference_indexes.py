"""Every column that references ``data_keys`` is indexed.

With foreign keys on, deleting a data key (every shred) makes SQLite look up each
referencing table by that column; without an index it scans the table whole, and
applying one key-destruction event cost 0.4 s on a device holding 100k records
(bench/destruction.py). The check is generic: a table added later that references
``data_keys`` without an index fails here.
"""

from __future__ import annotations

from pathlib import Path

from device.agent import DeviceAgent


def test_every_reference_to_data_keys_is_looked_up_through_an_index(tmp_path: Path) -> None:
    agent = DeviceAgent.create(tmp_path, "passphrase", device_name="indexes")
    try:
        db = agent._debug_db()
        tables = [r[0] for r in db.all("SELECT name FROM sqlite_master WHERE type = 'table'")]
        references = [
            (table, fk[3])  # (table, from-column)
            for table in tables
            for fk in db.all(f'PRAGMA foreign_key_list("{table}")')
            if fk[2] == "data_keys"
        ]
        assert {t for t, _c in references} >= {"episodes", "record_versions", "artifacts"}
        for table, column in references:
            plan = " ".join(
                str(row[3])
                for row in db.all(
                    f'EXPLAIN QUERY PLAN SELECT 1 FROM "{table}" WHERE "{column}" = ?', ("k",)
                )
            )
            assert "INDEX" in plan, f"{table}.{column} references data_keys unindexed: {plan}"
    finally:
        agent.close()
