"""What a catching-up device spends per record (issue 21 item 2): statements, CPU, bytes.

A space of ``records`` remembered sentences (``bench.spaces.fill_space``) is served by a
real cloud on loopback (``simulator.cloud_runner.RunningCloud``, its own thread); a
fresh protocol-2 mirror device syncs it once, with the embedders stubbed on both sides
(``bench.pouchdb.stubbed_embedders``; the model is not the point). Measured on the
device's own thread, so the cloud's work is not counted:

- statements per record: every statement the device issues through its ``Database``
  (a row of an ``executemany`` is one), and the calls that issued them (a trace
  callback would count the same but costs ~20 µs a statement, so it is not used);
- CPU µs per record: ``time.thread_time`` of the sync (the cloud's thread excluded);
- bytes per record: the database file after a truncating checkpoint, and, per table
  and index, the pages of a plaintext copy (``sqlcipher_export`` into a temporary
  file, read by the standard library's ``dbstat``; the copy is deleted at once).

``--profile`` prints the cProfile lines of the device's thread (sorted by own time);
``--sql-times`` adds the CPU spent per statement text (both slow the sync down).

Invariants: nothing here asserts a timing; a sync that did not hold every record is an
error naming the space, not a figure; the cloud and the device are closed whatever
happens.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sqlite3
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import spaces
from bench.pouchdb import PASSPHRASE, stubbed_embedders
from device import store
from device.agent import DeviceAgent
from simulator.cloud_runner import RunningCloud


class CatchUpFellShort(RuntimeError):
    """The device did not hold every record after its sync."""


def _table_bytes(agent: DeviceAgent, folder: Path) -> dict[str, int]:
    """Bytes per table and index, from a plaintext copy read by ``dbstat``."""
    plain = folder / "plain-copy.db"
    db = agent._db
    try:
        with db._lock:
            db.conn.execute(f"ATTACH DATABASE '{plain}' AS plaincopy KEY ''")
            db.conn.execute("SELECT sqlcipher_export('plaincopy')").fetchone()
            db.conn.execute("DETACH DATABASE plaincopy")
        conn = sqlite3.connect(plain)
        # the standard library's SQLite cannot parse the triggers' RAISE expressions
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("DELETE FROM sqlite_master WHERE type = 'trigger'")
        conn.commit()
        conn.close()
        conn = sqlite3.connect(plain)
        try:
            rows = conn.execute(
                "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC"
            ).fetchall()
        finally:
            conn.close()
    finally:
        plain.unlink(missing_ok=True)
    return {str(name): int(size) for name, size in rows}


def measure(
    records: int, folder: Path, *, profile: bool = False, sql_times: bool = False
) -> dict[str, Any]:
    cloud = RunningCloud.sqlite(folder / "cloud").start()
    try:
        with stubbed_embedders():
            space = spaces.fill_space(cloud.operator, "catch-up", records, 2121)
            cloud.operator.index_pending()
        agent = DeviceAgent.create(
            folder / "device",
            PASSPHRASE,
            device_name="catch-up",
            cloud_url=cloud.url,
            protocol_versions=spaces.MIRROR,
        )
        try:
            agent.enroll(cloud.operator.new_enrollment_code(space.space_id))
            db = agent._db
            statements: Counter[str] = Counter()  # by verb; an executemany row is one
            calls: Counter[str] = Counter()  # Database calls that issued them
            spent: Counter[str] = Counter()  # CPU per statement text (``sql_times``)

            def counting(name: str, fn: Any) -> Any:
                def inner(sql: str, params: Any = ()) -> Any:
                    calls[name] += 1
                    verb = sql.split(None, 1)[0].upper()
                    if name == "executemany":
                        params = list(params)
                        statements[verb] += len(params)
                    else:
                        statements[verb] += 1
                    if not sql_times:
                        return fn(sql, params)
                    start = time.thread_time()
                    try:
                        return fn(sql, params)
                    finally:
                        spent[" ".join(sql.split())[:90]] += time.thread_time() - start

                return inner

            for name in ("execute", "executemany", "one", "all"):
                setattr(db, name, counting(name, getattr(db, name)))
            profiler = cProfile.Profile() if profile else None
            with stubbed_embedders():
                wall, cpu = time.perf_counter(), time.thread_time()
                process_cpu = time.process_time()
                if profiler is not None:
                    profiler.enable()
                report = agent.sync()
                if profiler is not None:
                    profiler.disable()
                cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
                process_cpu = time.process_time() - process_cpu
            for name in ("execute", "executemany", "one", "all"):
                db.__dict__.pop(name, None)
            held = store.held_count(db)
            if held != records:
                raise CatchUpFellShort(
                    f"space {space.space_id}: the device holds {held} of {records} records "
                    f"after its sync (pulled {report.pulled} changes)"
                )
            db.checkpoint()
            file_bytes = agent.db_path.stat().st_size
            tables = _table_bytes(agent, folder)
        finally:
            agent.close()
    finally:
        cloud.close()
    total = sum(statements.values())
    out: dict[str, Any] = {
        "records": records,
        "sync_s": wall,
        "records_per_s": records / wall,
        "device_cpu_us_per_record": 1e6 * cpu / records,
        "process_cpu_us_per_record": 1e6 * process_cpu / records,
        "statements_per_record": total / records,
        "statements_by_verb_per_record": {
            k: round(v / records, 2) for k, v in statements.most_common()
        },
        "db_calls_per_record": {k: round(v / records, 2) for k, v in calls.most_common()},
        "sql_cpu_us_per_record": {k: round(1e6 * v / records, 1) for k, v in spent.most_common(25)},
        "bytes_per_record": file_bytes / records,
        "table_bytes_per_record": {
            k: round(v / records, 1) for k, v in tables.items() if v > 8 * 4096
        },
    }
    if profiler is not None:
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(35)
        stats.sort_stats("cumulative").print_stats(45)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--records", type=int, default=3000)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--sql-times", action="store_true", help="CPU per statement text")
    parser.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp one)")
    args = parser.parse_args()
    options = {"profile": args.profile, "sql_times": args.sql_times}
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
        result = measure(args.records, args.dir, **options)
    else:
        with tempfile.TemporaryDirectory(prefix="memsync-catch-up-") as folder:
            result = measure(args.records, Path(folder), **options)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
