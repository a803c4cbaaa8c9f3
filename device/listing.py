"""A device opened only to read its records, for ``memsync device list`` and ``know``:
the SQLCipher store and ``device.reading``, without the agent, its sync client, the
detector or the embedder (issue 23 item 1: a CLI that answers at once).

Invariants:
- It answers exactly what ``DeviceAgent.what_do_you_know`` answers: the same function
  (``device.reading.what_do_you_know``) over the same database at the same time.
- It writes nothing. A database that has a migration this code knows but has not
  applied yet is opened by the full agent instead, whose open migrates it, backfills
  and catches the search index up, as every open always did; so is one whose ledger is
  missing. A migration this code does not know is refused by that open too.
- The wrong passphrase, a missing database: the same errors as the agent's open
  (``device.db``).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from device import reading
from device.db import DB_FILENAME, Database
from device.migrations import MIGRATIONS

if TYPE_CHECKING:
    from device.views import RecordView

Clock = Callable[[], datetime]


class Records(Protocol):
    """What a reading command asks of a device (the agent answers it too)."""

    def what_do_you_know(self) -> list[RecordView]: ...
    def list_records(self) -> list[RecordView]: ...
    def close(self) -> None: ...


class Reader:
    """A device's records, read from its database alone."""

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    def what_do_you_know(self) -> list[RecordView]:
        return reading.what_do_you_know(self._db, self._clock().astimezone(UTC))

    def list_records(self) -> list[RecordView]:
        return self.what_do_you_know()

    def close(self) -> None:
        self._db.close()


def _up_to_date(db: Database) -> bool:
    """Whether every migration this code knows is applied (and no other is)."""
    ledger = db.one("SELECT count(*) FROM sqlite_master WHERE name = 'schema_migrations'")
    if not ledger[0]:
        return False
    done = {int(row[0]) for row in db.all("SELECT id FROM schema_migrations")}
    return done == {m.id for m in MIGRATIONS}


def open_records(directory: Path, passphrase: str, *, clock: Clock | None = None) -> Records:
    """The device's records through the store alone, or through the full agent when its
    database needs its open (see the invariants)."""
    now = clock or (lambda: datetime.now(UTC))
    db = Database.open_existing(Path(directory) / DB_FILENAME, passphrase)
    try:
        current = _up_to_date(db)
    except BaseException:
        db.close()
        raise
    if current:
        return Reader(db, now)
    db.close()
    from device.agent import DeviceAgent

    return DeviceAgent.open(Path(directory), passphrase, clock=clock)
