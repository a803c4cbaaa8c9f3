"""The key store reads a page's data keys by primary key, never by scanning a space.

``SqliteKeyStore.data_keys`` filters on the space too; SQLite's planner, left alone,
reads that through ``data_keys_space`` (every key of the space, for the few asked:
a mirror's one-change pull grew from 7 to 17 ms between 1k and 20k records so).
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from cloud.keystore import open_key_store


def test_many_data_keys_are_read_by_primary_key(tmp_path: Path) -> None:
    rng = random.Random(21)
    store = open_key_store(
        tmp_path / "keys.db", rng.randbytes, lambda: datetime(2026, 12, 3, tzinfo=UTC)
    )
    try:
        for space in ("space_a", "space_b"):
            store.create_space_key(space)
        made = {
            space: [store.create_data_key(space) for _ in range(40)]
            for space in ("space_a", "space_b")
        }
        seen: list[str] = []
        store._db.set_trace_callback(seen.append)
        wanted = [key_id for key_id, _dek in made["space_a"][:5]]
        other = made["space_b"][0][0]
        got = store.data_keys("space_a", [*wanted, other, "key_missing"])
        store._db.set_trace_callback(None)
        # the same keys, the other space's and a missing one left out
        assert got == dict(made["space_a"][:5])
        statement = next(s for s in seen if "FROM data_keys" in s)
        plan = " | ".join(
            str(row[-1]) for row in store._db.execute(f"EXPLAIN QUERY PLAN {statement}")
        )
        assert "data_keys_space" not in plan, plan
        assert "PRIMARY KEY" in plan or "sqlite_autoindex_data_keys" in plan, plan
    finally:
        store.close()
