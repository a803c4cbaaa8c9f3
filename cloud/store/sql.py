"""One record store over SQLAlchemy Core, for SQLite files and PostgreSQL (psycopg 3):
the engine, the store, the session that mixes in every room, and the accounts room
(``cloud.store.rooms.accounts``: spaces, enrollment codes, devices, the account key).

Invariants: see ``cloud.store.base``. The dialect differences are confined here (and
to ``cloud.store.statements.insert_ignore``):
SQLite runs every session as ``BEGIN IMMEDIATE`` (one writer at a time, so the
space lock is the database lock) with WAL and foreign keys on; PostgreSQL locks the
space row with ``SELECT ... FOR UPDATE`` (pushes) or ``FOR SHARE`` (pulls). A
``snapshot`` (an export's read) is ``BEGIN DEFERRED`` on SQLite and REPEATABLE READ,
READ ONLY on PostgreSQL: one consistent state, and no writer waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    Table,
    create_engine,
    event,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from cloud.errors import StoreError
from cloud.files import private_file
from cloud.store import schema as t
from cloud.store.base import DeviceRow, DeviceStatusRow, EnrollmentCodeRow
from cloud.store.migrations import migrate, refuse_newer
from cloud.store.reach import first_connect
from cloud.store.search import SearchQueries
from cloud.store.sql_end import EndQueries
from cloud.store.sql_export import ExportQueries
from cloud.store.sql_feed import CHANGES_CHANNEL, FeedQueries
from cloud.store.sql_keys import KeyQueries
from cloud.store.sql_lineage import LineageQueries
from cloud.store.sql_ops import OperatorQueries
from cloud.store.sql_receipts import ReceiptQueries
from cloud.store.sql_records import RecordQueries
from cloud.store.sql_subset import SubsetQueries
from cloud.store.sql_work import WorkQueries

__all__ = ["CHANGES_CHANNEL", "SNAPSHOT_OPTION", "SqlSession", "SqlStore", "make_engine"]

SNAPSHOT_OPTION = "memsync_snapshot"  # execution option of a read-only snapshot connection


def make_engine(url: str) -> Engine:
    """An engine for ``sqlite:///<path>`` or ``postgresql://...`` (always psycopg 3)."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise StoreError(f"store URL {url!r} is not a URL: {exc}") from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        database = parsed.database
        if not database or database == ":memory:" or database.startswith("file:"):
            raise StoreError(
                f"store URL {url!r}: the SQLite store needs a file path "
                "(sqlite:///<absolute path>), not an in-memory database"
            )
        private_file(Path(database))  # 0600 in a 0700 folder, before SQLite creates it
        engine = create_engine(
            parsed.set(drivername="sqlite+pysqlite"),
            connect_args={"timeout": 30, "check_same_thread": False, "isolation_level": None},
        )

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            cursor = dbapi_conn.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA synchronous=FULL")
            cursor.execute("PRAGMA busy_timeout=30000")
            # deleted index rows (a forgotten record's blinded terms) are zeroed on disk
            cursor.execute("PRAGMA secure_delete=ON")
            on = cursor.execute("PRAGMA secure_delete").fetchone()[0]
            cursor.close()
            if on != 1:
                raise StoreError(f"{database}: this SQLite build refuses PRAGMA secure_delete=ON")

        @event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            # a snapshot (an export) only reads: a deferred transaction, which under WAL
            # sees one state from its first read and blocks no writer
            snapshot = conn.get_execution_options().get(SNAPSHOT_OPTION, False)
            conn.exec_driver_sql("BEGIN DEFERRED" if snapshot else "BEGIN IMMEDIATE")

        return engine
    if backend == "postgresql":
        return create_engine(parsed.set(drivername="postgresql+psycopg"), pool_pre_ping=True)
    raise StoreError(
        f"store URL {url!r}: unsupported backend {backend!r}; use sqlite:///<path> "
        "or postgresql://user@host:port/db"
    )


class SqlStore:
    """The record store over one SQLAlchemy engine (SQLite or PostgreSQL)."""

    def __init__(self, url: str, clock: Any) -> None:
        self.url = url
        self._engine = make_engine(url)
        try:
            first_connect(self._engine, self.shown_url)
            self.migrations_applied = migrate(self._engine, clock, self.shown_url)
        except BaseException:
            self._engine.dispose()
            raise
        self._snapshots = 0  # snapshots open in this process (an export streaming)
        self._snapshots_lock = threading.Lock()

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    @property
    def shown_url(self) -> str:
        """The store's URL without its password, for messages."""
        return make_url(self.url).render_as_string(hide_password=True)

    def _check_schema(self, conn: Connection) -> None:
        """Refuse to go on in a store a newer memsync has migrated since this process
        opened it (another process on the same database): one indexed read per
        transaction, before the transaction reads or writes anything else."""
        refuse_newer(conn, self.shown_url)

    @property
    def engine(self) -> Engine:
        return self._engine

    @contextmanager
    def session(self, space_id: str | None = None, *, lock: bool = False) -> Iterator[SqlSession]:
        with self._engine.begin() as conn:
            self._check_schema(conn)
            session = SqlSession(conn)
            if space_id is not None:
                session.lock_space(space_id, exclusive=lock)
            yield session

    @contextmanager
    def reader(self) -> Iterator[SqlSession]:
        """A read-only transaction (``cloud.store.base``): deferred on SQLite, so it takes
        no write lock and waits behind no writer; READ ONLY on PostgreSQL. Unlike a
        snapshot it does not hold off the WAL's truncation: it is short."""
        sqlite = self.dialect == "sqlite"
        with self._engine.connect() as conn:
            conn.execution_options(
                **({SNAPSHOT_OPTION: True} if sqlite else {"postgresql_readonly": True})
            )
            with conn.begin():
                if sqlite:  # a write fails, as on PostgreSQL
                    conn.exec_driver_sql("PRAGMA query_only = ON")
                try:
                    self._check_schema(conn)
                    yield SqlSession(conn)
                finally:
                    if sqlite:
                        conn.exec_driver_sql("PRAGMA query_only = OFF")

    @contextmanager
    def snapshot(self) -> Iterator[SqlSession]:
        """A read-only transaction over one consistent snapshot (``cloud.store.base``):
        REPEATABLE READ, READ ONLY on PostgreSQL; a deferred transaction on SQLite."""
        with self._snapshots_lock:
            self._snapshots += 1
        try:
            with self._engine.connect() as conn:
                if self.dialect == "postgresql":
                    conn.execution_options(
                        isolation_level="REPEATABLE READ", postgresql_readonly=True
                    )
                else:
                    conn.execution_options(**{SNAPSHOT_OPTION: True})
                with conn.begin():
                    self._check_schema(conn)
                    yield SqlSession(conn)
        finally:
            with self._snapshots_lock:
                self._snapshots -= 1

    def audit_blobs(self) -> Iterator[bytes | str]:
        with self._engine.connect() as conn:
            for table in t.metadata.sorted_tables:
                for row in conn.execute(select(table)):
                    for value in row:
                        if isinstance(value, bytes | str):
                            yield value
                        elif isinstance(value, memoryview | bytearray):
                            yield bytes(value)
            # the lexical index's own column / table (blinded terms)
            if self.dialect == "postgresql":
                extra = "SELECT terms::text FROM record_search"
            else:
                extra = f"SELECT space_id, record_id, terms FROM {t.SQLITE_FTS_TABLE}"
            for row in conn.exec_driver_sql(extra):
                yield from (str(value) for value in row)

    def checkpoint(self) -> bool:
        """SQLite: copy the WAL into the file and truncate it, so rows deleted with
        ``secure_delete`` leave no copy in the WAL. True when done (or on PostgreSQL).

        While a snapshot of this process reads an older state (an export streaming), the
        WAL cannot be truncated: False at once, instead of waiting out the busy timeout;
        the caller owes the checkpoint and retries (an export retries when it ends)."""
        if self.dialect != "sqlite":
            return True
        if self._snapshots:
            return False
        raw = self._engine.raw_connection()  # outside any transaction (autocommit driver)
        try:
            cursor = raw.cursor()
            busy = cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
            cursor.close()
        finally:
            raw.close()
        return busy is not None and busy[0] == 0

    def close(self) -> None:
        self._engine.dispose()


class AccountQueries:
    """The accounts room (``cloud.store.rooms.accounts``): spaces, enrollment codes,
    devices and the account key. Mixed into ``SqlSession``; ``conn`` is its connection."""

    conn: Connection

    def create_space(self, space_id: str, name: str, at: datetime) -> None:
        self.conn.execute(
            insert(t.spaces).values(space_id=space_id, name=name, created_at=at, next_seq=1)
        )

    def space_exists(self, space_id: str) -> bool:
        q = select(t.spaces.c.space_id).where(t.spaces.c.space_id == space_id)
        return self.conn.execute(q).first() is not None

    def space_by_name(self, name: str) -> str | None:
        q = select(t.spaces.c.space_id).where(t.spaces.c.name == name)
        return self.conn.execute(q).scalar_one_or_none()

    def add_enrollment_code(
        self, space_id: str, code_hash: str, at: datetime, expires_at: datetime
    ) -> None:
        self.conn.execute(
            insert(t.enrollment_codes).values(
                code_hash=code_hash, space_id=space_id, created_at=at, expires_at=expires_at
            )
        )

    def enrollment_code(self, code_hash: str) -> EnrollmentCodeRow | None:
        c = t.enrollment_codes.c
        row = self.conn.execute(
            select(c.code_hash, c.space_id, c.expires_at, c.used_at).where(c.code_hash == code_hash)
        ).first()
        return None if row is None else EnrollmentCodeRow(*row)

    def use_enrollment_code(self, code_hash: str, device_id: str, at: datetime) -> bool:
        c = t.enrollment_codes.c
        result = self.conn.execute(
            update(t.enrollment_codes)
            .where(c.code_hash == code_hash, c.used_at.is_(None))
            .values(used_at=at, used_by=device_id)
        )
        return result.rowcount == 1

    def add_device(
        self,
        space_id: str,
        device_id: str,
        name: str,
        public_key: bytes,
        credential_hash: str,
        at: datetime,
    ) -> None:
        self.conn.execute(
            insert(t.devices).values(
                space_id=space_id,
                device_id=device_id,
                name=name,
                public_key=public_key,
                credential_hash=credential_hash,
                enrolled_at=at,
            )
        )

    def device_by_credential(self, credential_hash: str) -> DeviceRow | None:
        """The device holding this credential, revoked or not (the caller decides)."""
        c = t.devices.c
        row = self.conn.execute(
            select(c.space_id, c.device_id, c.name, c.public_key, c.revoked_at, c.wiped_at).where(
                c.credential_hash == credential_hash
            )
        ).first()
        if row is None:
            return None
        return DeviceRow(row[0], row[1], row[2], bytes(row[3]), row[4], row[5])

    def device(self, space_id: str, device_id: str) -> DeviceRow | None:
        """An enrolled device that is not revoked (None for a revoked one)."""
        c = t.devices.c
        row = self.conn.execute(
            select(c.space_id, c.device_id, c.name, c.public_key).where(
                c.space_id == space_id, c.device_id == device_id, c.revoked_at.is_(None)
            )
        ).first()
        return None if row is None else DeviceRow(row[0], row[1], row[2], bytes(row[3]))

    def devices(self, space_id: str) -> list[DeviceRow]:
        """Every device ever enrolled in the space, revoked ones included."""
        c = t.devices.c
        rows = self.conn.execute(
            select(c.space_id, c.device_id, c.name, c.public_key, c.revoked_at)
            .where(c.space_id == space_id)
            .order_by(c.enrolled_at, c.device_id)
        )
        return [DeviceRow(r[0], r[1], r[2], bytes(r[3]), r[4]) for r in rows]

    def device_statuses(self, space_id: str) -> list[DeviceStatusRow]:
        """Every device of the space with its dates, for ``GET /v1/devices`` (the one
        reader of the liveness column: the owner sees when each device last reached the
        cloud)."""
        c = t.devices.c
        seen = c.last_seen  # read for GET /v1/devices only
        rows = self.conn.execute(
            select(c.device_id, c.name, c.enrolled_at, seen, c.revoked_at, c.wiped_at)
            .where(c.space_id == space_id)
            .order_by(c.enrolled_at, c.device_id)
        )
        return [DeviceStatusRow(r[0], r[1], r[2], r[3], r[4], r[5]) for r in rows]

    def revoke_device(self, space_id: str, device_id: str, at: datetime) -> bool:
        """Revoke a device; False when it is unknown here or already revoked."""
        c = t.devices.c
        result = self.conn.execute(
            update(t.devices)
            .where(c.space_id == space_id, c.device_id == device_id, c.revoked_at.is_(None))
            .values(revoked_at=at)
        )
        return int(result.rowcount) == 1

    def mark_wiped(self, space_id: str, device_id: str, at: datetime) -> datetime | None:
        """Record that a revoked device, or any device of an ended space, wiped its copy
        (the first confirmation's time is kept); None when the device is neither."""
        c, s = t.devices.c, t.spaces.c
        ended = select(s.space_id).where(s.space_id == space_id, s.ended_at.is_not(None))
        must_wipe = or_(c.revoked_at.is_not(None), ended.exists())
        self.conn.execute(
            update(t.devices)
            .where(
                c.space_id == space_id, c.device_id == device_id, must_wipe, c.wiped_at.is_(None)
            )
            .values(wiped_at=at)
        )
        return self.conn.execute(
            select(c.wiped_at).where(c.space_id == space_id, c.device_id == device_id, must_wipe)
        ).scalar_one_or_none()

    def touch_device(self, space_id: str, device_id: str, at: datetime) -> None:
        c = t.devices.c
        self.conn.execute(
            update(t.devices)
            .where(c.space_id == space_id, c.device_id == device_id)
            .values(last_seen=at)
        )

    def account_key(self, space_id: str) -> bytes | None:
        c = t.spaces.c
        value = self.conn.execute(
            select(c.account_key).where(c.space_id == space_id)
        ).scalar_one_or_none()
        return None if value is None else bytes(value)

    def set_account_key(self, space_id: str, key: bytes) -> None:
        c = t.spaces.c
        self.conn.execute(
            update(t.spaces)
            .where(c.space_id == space_id, c.account_key.is_(None))
            .values(account_key=key)
        )

    def replace_account_key(self, space_id: str, old: bytes, new: bytes) -> bool:
        """Swap the space's account key ``old`` for ``new``; False (nothing written) when
        ``old`` is not the key registered now."""
        c = t.spaces.c
        done = self.conn.execute(
            update(t.spaces)
            .where(c.space_id == space_id, c.account_key == old)
            .values(account_key=new)
        )
        return bool(done.rowcount == 1)


class SqlSession(
    AccountQueries,
    RecordQueries,
    LineageQueries,
    FeedQueries,
    ReceiptQueries,
    KeyQueries,
    SearchQueries,
    WorkQueries,
    ExportQueries,
    EndQueries,
    SubsetQueries,
    OperatorQueries,
):
    """One transaction: every room of ``cloud.store.base.StoreSession``, each implemented by
    its own mixin (``cloud/store/rooms/__init__.py`` names which). Every method is scoped
    to the space it is handed."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self._dialect = conn.dialect.name

    def lock_space(self, space_id: str, *, exclusive: bool) -> int | None:
        """Take the space's lock; return its next sequence number (None: no such space)."""
        query = select(t.spaces.c.next_seq).where(t.spaces.c.space_id == space_id)
        # pushes: FOR NO KEY UPDATE (still lets other tables' foreign keys see the row);
        # pulls: FOR SHARE, which waits for a push in flight and lets pulls run together
        if exclusive:
            query = query.with_for_update(key_share=True)
        else:
            query = query.with_for_update(read=True)
        return self.conn.execute(query).scalar_one_or_none()

    def count(self, table: Table) -> int:
        return int(self.conn.execute(select(func.count()).select_from(table)).scalar_one())
