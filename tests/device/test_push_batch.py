"""A push's device work set-at-a-time (``device.push_receipts``, ``device.push_reads``)
leaves exactly what the one-by-one path leaves.

The oracle: on one device with a varied queue (episodes, candidate marks, remembers, a
correction, a "don't use", a forget, an artifact), any receipts the cloud may answer
(applied, duplicate of anything, conflict, refused with any code, a kept record the
cloud says is forgotten) are applied once by ``push_receipts.apply_all`` and once
receipt by receipt, each in a transaction rolled back after every table was read; both
leave the same rows in every table and the same report. The batched reads of the sealed
words give what ``store.open_episode`` / ``store.open_version`` give, row by row.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from device import push_reads, push_receipts, store
from device.agent import DeviceAgent
from device.db import Database
from device.sync import SyncSession
from protocol.model import ArtifactKind
from protocol.operations import EffectKind, Receipt, ReceiptStatus, RefusalCode
from tests.device.conftest import PASSPHRASE, TickingClock, seeded

TYPED = "My favorite number is not 1729. I grew up in Duluth. I live in Oslo now."


class _Rollback(Exception):
    """Leaves the transaction a path ran in, once its tables were read."""


@pytest.fixture(scope="module")
def queued(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DeviceAgent]:
    agent = DeviceAgent.create(
        Path(tmp_path_factory.mktemp("push-batch")) / "phone",
        PASSPHRASE,
        device_name="phone",
        clock=TickingClock(),
        random_bytes=seeded(7),
        kdf_iterations=1_000,
    )
    agent.say(TYPED, "c1")
    agent.say("My favorite number is not 1729.", "c2")
    duluth = agent.remember("I grew up in Duluth.", "c1").record_id
    oslo = agent.remember("I live in Oslo now.", "c1").record_id
    number = agent.remember("My favorite number is not 1729.", "c2").record_id
    agent.say("Actually I grew up in Fargo.", "c1")
    agent.correct(duluth, "Actually I grew up in Fargo.", "c1")
    agent.dont_use(oslo)
    agent.add_artifact(ArtifactKind.SUMMARY, [oslo], "a summary of Oslo")
    agent.forget_permanently(number)
    yield agent
    with contextlib.suppress(Exception):
        agent.close()


# a cache-buster SQL's random() sets on every shred (``device.search``): never the same twice
_RANDOM_COLUMNS = {("search_state", "generation")}


def _tables(db: Database) -> dict[str, list[str]]:
    """Every table's rows, as text, sorted (the random columns left out)."""
    names = [
        r[0]
        for r in db.all("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        if not r[0].startswith("sqlite_")
    ]
    out = {}
    for n in names:
        columns = [c[1] for c in db.all(f'PRAGMA table_info("{n}")')]
        kept = ", ".join(f'"{c}"' for c in columns if (n, c) not in _RANDOM_COLUMNS)
        out[n] = sorted(repr(tuple(r)) for r in db.all(f'SELECT {kept} FROM "{n}"'))
    return out


def _clock() -> Callable[[], str]:
    ticks = iter(range(10_000))
    return lambda: f"2026-03-02T10:00:{next(ticks) % 60:02d}+00:00"


def _run(db: Database, apply: Callable[[SyncSession], None]) -> tuple[Any, ...]:
    session = SyncSession(db, cast(Any, None), _clock(), seeded(11))
    seen: dict[str, list[str]] = {}
    with contextlib.suppress(_Rollback), db.atomic():
        apply(session)
        seen = _tables(db)
        raise _Rollback
    r = session.report
    return seen, r.applied, r.duplicates, r.conflicts, r.refused, r.shredded


_STATUSES = st.sampled_from(list(ReceiptStatus))
_CODES = st.sampled_from(
    [RefusalCode.FORGOTTEN, RefusalCode.UNKNOWN_RECORD, RefusalCode.WRONG_STATE]
)


@st.composite
def _receipt(draw: st.DrawFn, index: int, row: Any) -> Receipt:
    status = draw(_STATUSES)
    original = draw(st.none() | _STATUSES) if status is ReceiptStatus.DUPLICATE else None
    refused = ReceiptStatus.REFUSED in (status, original)
    versions = draw(st.sampled_from([[], [1], [1, 2]])) if row["record_id"] else []
    return Receipt(
        index=index,
        op_id=row["op_id"],
        status=status,
        original_status=original,
        code=draw(_CODES) if refused else None,
        reason=draw(st.none() | st.just("because")),
        effect=draw(st.none() | st.just(EffectKind.CREATED)),
        record_id=row["record_id"],
        versions=versions,
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_batched_receipts_leave_exactly_the_rows_one_by_one_leaves(
    queued: DeviceAgent, data: st.DataObject
) -> None:
    db = queued._debug_db()
    rows = store.queue_batch(db, 500)
    kinds = {r["kind"] for r in rows}
    assert {"add_episode", "mark_candidate", "remember", "correct", "dont_use"} <= kinds
    assert {"add_artifact", "forget_permanently"} <= kinds
    receipts = [data.draw(_receipt(i, row)) for i, row in enumerate(rows)]
    created = sorted({r["record_id"] for r in rows if r["kind"] in push_receipts.RECORD_CREATING})
    forgotten = set(data.draw(st.lists(st.sampled_from(created), unique=True)))
    # any order: a receipt that shreds a record may come before one that names it
    pairs = data.draw(st.permutations(list(zip(rows, receipts, strict=True))))

    def batched(s: SyncSession) -> None:
        push_receipts.apply_all(s.db, s.report, pairs, forgotten, s.now, s._apply_receipt)

    def one_by_one(s: SyncSession) -> None:
        for row, receipt in pairs:
            s._apply_receipt(row, receipt, forgotten)

    (tables, *report), (expected, *expected_report) = _run(db, batched), _run(db, one_by_one)
    assert [n for n in expected if tables.get(n) != expected[n]] == []
    assert report == expected_report


def test_all_applied_is_one_statement_per_table(queued: DeviceAgent) -> None:
    """The common push (every op applied) writes no row by row: one executemany per
    table the receipts touch, whatever the batch's size."""
    db = queued._debug_db()
    rows = [r for r in store.queue_batch(db, 500) if r["kind"] != "correct"]
    pairs = [
        (row, Receipt(index=i, op_id=row["op_id"], status=ReceiptStatus.APPLIED))
        for i, row in enumerate(rows)
    ]
    calls: list[str] = []
    real = db.executemany, db.execute

    def many(sql: str, params: Any) -> Any:
        calls.append(sql)
        return real[0](sql, params)

    def one(sql: str, params: Any = ()) -> Any:
        calls.append(sql)
        return real[1](sql, params)

    session = SyncSession(db, cast(Any, None), _clock(), seeded(11))
    object.__setattr__(db, "executemany", many)
    object.__setattr__(db, "execute", one)
    try:
        with contextlib.suppress(_Rollback), db.atomic():
            calls.clear()
            push_receipts.apply_all(
                db, session.report, pairs, set(), session.now, session._apply_receipt
            )
            assert session.report.applied == len(rows)
            assert len(calls) == len(set(calls)) <= 7
            raise _Rollback
    finally:
        del db.executemany, db.execute  # back to the class's methods


def test_batched_reads_open_what_the_store_opens(queued: DeviceAgent) -> None:
    db = queued._debug_db()
    rows = store.queue_batch(db, 500)
    sealed = push_reads.SealedRows(db, rows)
    checked = 0
    for row in rows:
        if row["kind"] == "add_episode":
            held = store.episode_row(db, row["episode_id"])
            got = sealed.episode(row["episode_id"])
            assert got == (None if held is None else store.open_episode(db, held))
            checked += 1
        elif row["kind"] in ("remember", "correct"):
            version = push_reads.version_of(row)
            held = store.version_row(db, row["record_id"], version)
            got_version = sealed.version(row["record_id"], version)
            assert got_version == (None if held is None else store.open_version(db, held))
            checked += 1
    assert checked >= 4
    assert sealed.episode("ep_not_held") is None and sealed.version("rec_not_held", 1) is None
