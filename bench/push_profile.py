"""Where one push's cloud time goes (issue 21): the apply cost per op beside its floors.

The ops are a real device's: ``say`` + ``remember`` pairs queued on a fresh device (the
embedder stubbed, as ``bench.pouchdb`` does) and synced once to a throw-away cloud, the
push bodies recorded on the way. They are then applied in-process by
``CloudService.push`` to a fresh space of a fresh SQLite cloud, and four figures are
reported per op:
- cloud CPU: the pushing thread's CPU time inside ``CloudService.push``;
- statements: the SQL statements the push ran (a ``before_cursor_execute`` event; an
  executemany counts once, its rows are counted apart);
- raw replay: the same captured statements, with their captured parameters, run through
  the DB-API driver (``sqlite3``) on a copy of the database taken before the push, in one
  transaction (the cost of the SQL itself, without SQLAlchemy or the Python around it);
- floor: 10 rows per op by ``executemany`` in one 500-op transaction, one AEAD seal per
  op and the op's pydantic validation (what today's op content cannot go below).

Invariants: nothing here asserts a timing; a push that did not apply every op is an
error naming it, not a figure; every cloud and device made here is closed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from nacl.utils import random as random_bytes
from rich.table import Table
from sqlalchemy import event

from bench.pouchdb import PASSPHRASE, _sentence, stubbed_embedders
from bench.spaces import headless_device
from cloud.service import CloudConfig, CloudService
from device.agent import DeviceAgent
from protocol.messages import PushRequest
from protocol.operations import OPERATION_ADAPTER, ReceiptStatus
from protocol.sealing import KEY_BYTES, NONCE_BYTES, seal
from simulator.cloud_runner import RunningCloud

FLOOR_ROWS_PER_OP = 10
FLOOR_BATCH = 500
SOURCE_TIMEOUT = 600.0  # seconds the recorded device waits for its source cloud
TIMEOUT_KINDS = ("connect", "read", "write", "pool")


@dataclass(frozen=True)
class Sizes:
    pairs: int  # say + remember pairs queued on the device
    reps: int  # pushes of the same ops into fresh spaces (medians reported)


FULL = Sizes(1_000, 3)
SMOKE = Sizes(10, 1)


class PushFellShort(RuntimeError):
    """A profiled push did not apply an op; its figures would be wrong."""


class _Recorder(httpx.BaseTransport):
    """The real transport, keeping every push body that went through it."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.pushes: list[dict[str, Any]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        if request.url.path == "/v1/push":
            self.pushes.append(json.loads(body))
        # the source run is not timed: a loaded machine must not make its sync give up
        request.extensions["timeout"] = {k: SOURCE_TIMEOUT for k in TIMEOUT_KINDS}
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


def device_pushes(folder: Path, pairs: int) -> list[dict[str, Any]]:
    """The push bodies a fresh device sends for ``pairs`` say + remember pairs."""
    recorder = _Recorder()
    with RunningCloud.sqlite(folder / "source-cloud") as cloud:
        space_id, _code = cloud.operator.add_user("profile-source")
        agent = DeviceAgent.create(
            folder / "source-device",
            PASSPHRASE,
            device_name="profile",
            cloud_url=cloud.url,
            transport=recorder,
        )
        try:
            agent.enroll(cloud.operator.new_enrollment_code(space_id))
            with stubbed_embedders():
                for i in range(pairs):
                    agent.say(_sentence(i), f"c{i}")
                    agent.remember(_sentence(i), f"c{i}")
                agent.sync()
        finally:
            agent.close()
    return recorder.pushes


class _Capture:
    """Every statement an engine's cursors run, with its parameters."""

    def __init__(self) -> None:
        self.on = False
        self.statements: list[tuple[str, Any, bool]] = []

    def __call__(
        self, conn: Any, cursor: Any, statement: str, params: Any, context: Any, many: bool
    ) -> None:
        if self.on:
            self.statements.append((statement, params, many))


def _one_push(folder: Path, pushes: list[dict[str, Any]]) -> dict[str, float]:
    folder.mkdir(parents=True)
    db = folder / "records.db"
    config = CloudConfig(
        store_url=f"sqlite:///{db}", key_store_path=folder / "keys.db", indexing="manual"
    )
    service = CloudService(config)
    try:
        space_id, _code = service.add_user("profile")
        device_id = headless_device(service, space_id, "profiled")
        requests = [PushRequest.model_validate(body) for body in pushes]
        ops = sum(len(r.ops) for r in requests)
        service.store.engine.dispose()  # the file is whole on disk before it is copied
        shutil.copyfile(db, folder / "before.db")
        capture = _Capture()
        event.listen(service.store.engine, "before_cursor_execute", capture)
        cpu = 0.0
        with stubbed_embedders():
            for req in requests:
                capture.on = True
                start = time.thread_time()
                answer = service.push(space_id, device_id, req)
                cpu += time.thread_time() - start
                capture.on = False
                for receipt in answer.receipts:
                    if receipt.status is not ReceiptStatus.APPLIED:
                        raise PushFellShort(
                            f"op {receipt.op_id} was {receipt.status.value}: {receipt.reason}"
                        )
        event.remove(service.store.engine, "before_cursor_execute", capture)
    finally:
        service.close()
    statements = capture.statements
    rows = sum(len(p) if many else 1 for _s, p, many in statements)
    return {
        "ops": ops,
        "cloud_cpu_us_per_op": 1e6 * cpu / ops,
        "statements_per_op": len(statements) / ops,
        "rows_per_op": rows / ops,
        "raw_replay_us_per_op": 1e6 * _replay(folder / "before.db", statements) / ops,
    }


def _replay(db: Path, statements: list[tuple[str, Any, bool]]) -> float:
    """CPU seconds to run ``statements`` through ``sqlite3`` in one transaction."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        cursor = conn.cursor()
        start = time.thread_time()
        cursor.execute("BEGIN IMMEDIATE")
        for statement, params, many in statements:
            if statement.lstrip().upper().startswith(("BEGIN", "COMMIT", "ROLLBACK")):
                continue
            if many:
                cursor.executemany(statement, params)
            else:
                cursor.execute(statement, params)
                cursor.fetchall()
        cursor.execute("COMMIT")
        return time.thread_time() - start
    finally:
        conn.close()


def floor(folder: Path, pushes: list[dict[str, Any]]) -> float:
    """CPU µs per op of 10 rows per op by executemany in 500-op transactions, one AEAD
    seal per op and the op's validation."""
    raws = [op for body in pushes for op in body["ops"]]
    conn = sqlite3.connect(folder / "floor.db", isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE rows (space_id TEXT, item_id TEXT, n INTEGER, body BLOB, "
            "PRIMARY KEY (space_id, item_id, n))"
        )
        key = random_bytes(KEY_BYTES)
        start = time.thread_time()
        for first in range(0, len(raws), FLOOR_BATCH):
            batch = []
            for raw in raws[first : first + FLOOR_BATCH]:
                op = OPERATION_ADAPTER.validate_python(raw)
                sealed = seal(key, random_bytes(NONCE_BYTES), op.model_dump_json().encode(), b"ad")
                batch += [("sp", op.op_id, n, sealed) for n in range(FLOOR_ROWS_PER_OP)]
            conn.execute("BEGIN")
            conn.executemany("INSERT INTO rows VALUES (?, ?, ?, ?)", batch)
            conn.execute("COMMIT")
        return 1e6 * (time.thread_time() - start) / len(raws)
    finally:
        conn.close()


def measure(folder: Path, smoke: bool, sizes: Sizes | None = None) -> dict[str, Any]:
    sizes = sizes or (SMOKE if smoke else FULL)
    pushes = device_pushes(folder / "source", sizes.pairs)
    runs = [_one_push(folder / f"push-{rep}", pushes) for rep in range(sizes.reps)]
    floors = [floor(folder / f"push-{rep}", pushes) for rep in range(sizes.reps)]

    def median(key: str) -> float:
        return statistics.median(run[key] for run in runs)

    return {
        "sizes": sizes.__dict__.copy(),
        "ops": runs[0]["ops"],
        "pushes": len(pushes),
        "cloud_cpu_us_per_op": median("cloud_cpu_us_per_op"),
        "statements_per_op": median("statements_per_op"),
        "rows_per_op": median("rows_per_op"),
        "raw_replay_us_per_op": median("raw_replay_us_per_op"),
        "floor_us_per_op": statistics.median(floors),
        "runs": runs,
    }


def render(result: dict[str, Any]) -> Table:
    table = Table(
        title=f"one push profiled ({result['ops']:,} ops of say + remember in "
        f"{result['pushes']} requests, SQLite, medians of {result['sizes']['reps']})"
    )
    table.add_column("what")
    table.add_column("per op", justify="right")
    table.add_row("cloud CPU in CloudService.push", f"{result['cloud_cpu_us_per_op']:,.0f} µs")
    table.add_row("statements", f"{result['statements_per_op']:.1f}")
    table.add_row("rows written or bound", f"{result['rows_per_op']:.1f}")
    table.add_row("same statements via sqlite3", f"{result['raw_replay_us_per_op']:,.0f} µs")
    table.add_row(
        f"floor ({FLOOR_ROWS_PER_OP} rows by executemany, AEAD, validation)",
        f"{result['floor_us_per_op']:,.0f} µs",
    )
    return table
