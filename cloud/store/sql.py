"""One record store over SQLAlchemy Core, for SQLite files and PostgreSQL (psycopg 3).

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
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    Table,
    and_,
    create_engine,
    delete,
    event,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from cloud.errors import StoreError
from cloud.files import private_file
from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store.base import (
    ChangeRow,
    CompactionReport,
    DeviceRow,
    DeviceStatusRow,
    EnrollmentCodeRow,
    EpisodeRow,
    ForgetEventRow,
    ForgetKey,
    ForgetStatusRow,
    RecordRow,
    VersionRow,
)
from cloud.store.migrations import (
    LEGACY_EPISTEMIC_PLACEHOLDER,
    migrate,
    refuse_newer,
)
from cloud.store.reach import first_connect
from cloud.store.search import SearchQueries
from cloud.store.sql_end import EndQueries, may_hold_copies
from cloud.store.sql_export import ExportQueries
from cloud.store.sql_memory import MemoryQueries, chunks
from cloud.store.sql_ops import OperatorQueries
from cloud.store.sql_subset import SubsetQueries
from cloud.store.sql_work import WorkQueries

_chunks = chunks
# the PostgreSQL channel on which a commit that moved a space's change feed says so
CHANGES_CHANNEL = "memsync_changes"
_NOTIFY_CHANGED = text("SELECT pg_notify(:channel, :sp)")
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


class SqlSession(
    MemoryQueries,
    SearchQueries,
    WorkQueries,
    ExportQueries,
    EndQueries,
    SubsetQueries,
    OperatorQueries,
):
    """One transaction. Every method is scoped to the space it is handed."""

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

    # --- spaces, enrollment, devices ------------------------------------------------

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

    # --- ordering -------------------------------------------------------------------

    def allocate_seq(self, space_id: str) -> int:
        """The next sequence number of the space (call only under ``lock=True``)."""
        seq = self.conn.execute(q.ALLOCATE_SEQ, {"sp": space_id}).scalar_one_or_none()
        if seq is None:
            raise StoreError(f"space {space_id} does not exist; no sequence number to give")
        return int(seq)

    def notify_changed(self, space_id: str) -> None:
        """PostgreSQL: ``NOTIFY`` the live-pull channel with the space id, inside this
        transaction, so it is delivered only if the transaction commits (``cloud.live``).
        SQLite has no other process to tell: the service wakes its own waiters."""
        if self._dialect == "postgresql":
            self.conn.execute(_NOTIFY_CHANGED, {"channel": CHANGES_CHANNEL, "sp": space_id})

    def last_seq(self, space_id: str) -> int:
        c = t.spaces.c
        seq = self.conn.execute(
            select(c.next_seq).where(c.space_id == space_id)
        ).scalar_one_or_none()
        return 0 if seq is None else int(seq) - 1

    # --- receipts -------------------------------------------------------------------

    def receipt(self, space_id: str, op_id: str) -> str | None:
        return self.conn.execute(q.RECEIPT, {"sp": space_id, "op_id": op_id}).scalar_one_or_none()

    def put_receipt(
        self, space_id: str, op_id: str, device_id: str, receipt_json: str, at: datetime
    ) -> None:
        self.conn.execute(
            q.PUT_RECEIPT,
            {
                "space_id": space_id,
                "op_id": op_id,
                "device_id": device_id,
                "receipt": receipt_json,
                "stored_at": at,
            },
        )

    # --- records and episodes -------------------------------------------------------

    _RECORD_COLS = q.RECORD_COLS

    @staticmethod
    def _record_row(row: Any) -> RecordRow:
        created_seq = None if row[8] is None else int(row[8])
        state_seq = None if row[9] is None else int(row[9])
        return RecordRow(
            record_id=row[0],
            lifecycle=row[1],
            current_version=row[2],
            created_at=row[3],
            forgotten_at=row[4],
            usage_restriction=row[5],
            superseded_by=row[6],
            conflicts=row[7],
            created_seq=created_seq,
            state_seq=state_seq,
        )

    def record(self, space_id: str, record_id: str) -> RecordRow | None:
        row = self.conn.execute(q.RECORD, {"sp": space_id, "rid": record_id}).first()
        return None if row is None else self._record_row(row)

    def records(self, space_id: str, record_ids: Iterable[str]) -> dict[str, RecordRow]:
        out: dict[str, RecordRow] = {}
        for chunk in _chunks(sorted(set(record_ids))):
            rows = self.conn.execute(q.RECORDS, {"sp": space_id, "ids": chunk})
            out.update((r[0], self._record_row(r)) for r in rows)
        return out

    def live_records(self, space_id: str) -> list[RecordRow]:
        """Every record not permanently forgotten, in the order the server created them."""
        c = t.records.c
        rows = self.conn.execute(
            select(*self._RECORD_COLS)
            .where(c.space_id == space_id, c.lifecycle != "permanently_forgotten")
            .order_by(c.created_seq, c.record_id)
        )
        return [self._record_row(r) for r in rows]

    def insert_record(
        self,
        space_id: str,
        record_id: str,
        lifecycle: str,
        version: int,
        at: datetime,
        created_seq: int,
    ) -> None:
        self.conn.execute(
            q.INSERT_RECORD,
            {
                "space_id": space_id,
                "record_id": record_id,
                "lifecycle": lifecycle,
                "current_version": version,
                "created_at": at,
                "created_seq": created_seq,
            },
        )

    _STATE_COLUMNS = frozenset(
        {
            "lifecycle",
            "current_version",
            "usage_restriction",
            "superseded_by",
            "conflicts",
            "state_seq",
        }
    )

    def set_record_state(self, space_id: str, record_id: str, **values: object) -> None:
        """Change a record's state columns (``records`` holds state, never content)."""
        unknown = set(values) - self._STATE_COLUMNS
        if unknown:
            raise StoreError(f"record {record_id}: {sorted(unknown)} are not state columns")
        params = {f"v_{name}": value for name, value in values.items()}
        self.conn.execute(
            q.set_record_state(frozenset(values)), {"sp": space_id, "rid": record_id, **params}
        )

    def insert_version(self, space_id: str, row: VersionRow) -> None:
        self.conn.execute(
            q.INSERT_VERSION,
            {
                "space_id": space_id,
                "record_id": row.record_id,
                "version": row.version,
                "supersedes": row.supersedes,
                "epistemic_state": LEGACY_EPISTEMIC_PLACEHOLDER,
                "recorded_at": row.recorded_at,
                "key_id": row.key_id,
                "sealed_content": row.sealed_content,
                "made_by": row.made_by,
            },
        )

    def version_authors(
        self, space_id: str, record_id: str, after: int
    ) -> list[tuple[int, str | None]]:
        c = t.record_versions.c
        rows = self.conn.execute(
            select(c.version, c.made_by)
            .where(c.space_id == space_id, c.record_id == record_id, c.version > after)
            .order_by(c.version)
        )
        return [(int(r[0]), r[1]) for r in rows]

    _VERSION_COLS = (
        t.record_versions.c.record_id,
        t.record_versions.c.version,
        t.record_versions.c.supersedes,
        t.record_versions.c.recorded_at,
        t.record_versions.c.key_id,
        t.record_versions.c.sealed_content,
    )

    @staticmethod
    def _version_row(row: Any) -> VersionRow:
        return VersionRow(row[0], row[1], row[2], row[3], row[4], bytes(row[5]))

    def version(self, space_id: str, record_id: str, version: int) -> VersionRow | None:
        c = t.record_versions.c
        row = self.conn.execute(
            select(*self._VERSION_COLS).where(
                c.space_id == space_id, c.record_id == record_id, c.version == version
            )
        ).first()
        return None if row is None else self._version_row(row)

    def versions(self, space_id: str, record_id: str) -> list[VersionRow]:
        c = t.record_versions.c
        rows = self.conn.execute(
            select(*self._VERSION_COLS)
            .where(c.space_id == space_id, c.record_id == record_id)
            .order_by(c.version)
        )
        return [self._version_row(r) for r in rows]

    def mark_forgotten(self, space_id: str, record_id: str, at: datetime) -> None:
        c = t.records.c
        self.conn.execute(
            update(t.records)
            .where(c.space_id == space_id, c.record_id == record_id)
            .values(
                lifecycle="permanently_forgotten",
                forgotten_at=at,
                usage_restriction=None,
                superseded_by=None,
                conflicts=None,
            )
        )

    def insert_episode(self, space_id: str, row: EpisodeRow) -> None:
        self.conn.execute(
            q.INSERT_EPISODE,
            {
                "space_id": space_id,
                "episode_id": row.episode_id,
                "typed_at": row.typed_at,
                "key_id": row.key_id,
                "sealed_content": row.sealed_content,
            },
        )

    def episodes(self, space_id: str, episode_ids: Iterable[str]) -> dict[str, EpisodeRow]:
        out: dict[str, EpisodeRow] = {}
        for chunk in _chunks(sorted(set(episode_ids))):
            rows = self.conn.execute(q.EPISODES, {"sp": space_id, "ids": chunk})
            for r in rows:
                out[r[0]] = EpisodeRow(r[0], r[1], r[2], bytes(r[3]))
        return out

    # --- changes and holdings -------------------------------------------------------

    def add_change(self, space_id: str, row: ChangeRow) -> None:
        self.conn.execute(
            q.INSERT_CHANGE,
            {
                "space_id": space_id,
                "seq": row.seq,
                "kind": row.kind,
                "record_id": row.record_id,
                "version": row.version,
                "episode_id": row.episode_id,
                "event_id": row.event_id,
                "at": row.at,
                "artifact_id": row.artifact_id,
                "project": row.project,
            },
        )

    def changes_after(self, space_id: str, seq: int, limit: int) -> list[ChangeRow]:
        c = t.changes.c
        rows = self.conn.execute(
            select(
                c.seq,
                c.kind,
                c.at,
                c.record_id,
                c.version,
                c.episode_id,
                c.event_id,
                c.artifact_id,
                c.project,
            )
            .where(c.space_id == space_id, c.seq > seq)
            .order_by(c.seq)
            .limit(limit)
        )
        return [
            ChangeRow(
                seq=int(r[0]),
                kind=r[1],
                at=r[2],
                record_id=r[3],
                version=r[4],
                episode_id=r[5],
                event_id=None if r[6] is None else int(r[6]),
                artifact_id=r[7],
                project=r[8],
            )
            for r in rows
        ]

    def feed_floor(self, space_id: str) -> int:
        c = t.spaces.c
        floor = self.conn.execute(
            select(c.feed_floor).where(c.space_id == space_id)
        ).scalar_one_or_none()
        return 0 if floor is None else int(floor)

    def compact_changes(self, space_id: str) -> CompactionReport:
        """Delete the feed rows that no longer carry anything (``_compactable``) and raise
        the space's feed floor to the highest seq deleted. Call under ``lock=True``."""
        c = t.changes.c
        gone = _compactable()
        counted = self.conn.execute(
            select(c.kind, func.count(), func.max(c.seq))
            .where(c.space_id == space_id, gone)
            .group_by(c.kind)
        ).all()
        deleted = tuple(sorted((str(kind), int(n)) for kind, n, _top in counted))
        highest = max((int(top) for _kind, _n, top in counted), default=0)
        previous = self.feed_floor(space_id)
        if counted:
            self.conn.execute(delete(t.changes).where(c.space_id == space_id, gone))
        floor = max(previous, highest)
        if floor != previous:
            s = t.spaces.c
            self.conn.execute(
                update(t.spaces).where(s.space_id == space_id).values(feed_floor=floor)
            )
        kinds: dict[str, int] = {
            str(kind): int(n)
            for kind, n in self.conn.execute(
                select(c.kind, func.count()).where(c.space_id == space_id).group_by(c.kind)
            )
        }
        return CompactionReport(
            space_id=space_id,
            deleted=deleted,
            kept_destructions=kinds.get("key_destruction", 0),
            remaining=sum(kinds.values()),
            previous_floor=previous,
            floor=floor,
        )

    def add_holdings(self, space_id: str, device_id: str, items: Iterable[tuple[str, str]]) -> None:
        rows = [
            {"space_id": space_id, "device_id": device_id, "item_kind": k, "item_id": i}
            for k, i in sorted(set(items))
        ]
        self._insert_ignore(t.holdings, rows)

    def holders(self, space_id: str, items: Iterable[tuple[str, str]]) -> set[str]:
        c = t.holdings.c
        found: set[str] = set()
        wanted = list(items)
        for kind in ("record", "episode", "artifact"):
            ids = sorted({i for k, i in wanted if k == kind})
            for chunk in _chunks(ids):
                rows = self.conn.execute(
                    select(c.device_id)
                    .where(c.space_id == space_id, c.item_kind == kind, c.item_id.in_(chunk))
                    .distinct()
                )
                found.update(r[0] for r in rows)
        return found

    # --- forgetting -----------------------------------------------------------------

    def add_forget_event(
        self,
        space_id: str,
        event_id: int,
        record_id: str,
        at: datetime,
        keys: Iterable[ForgetKey],
        pending_devices: Iterable[str],
    ) -> None:
        self.conn.execute(
            insert(t.forget_events).values(
                space_id=space_id, event_id=event_id, record_id=record_id, forgotten_at=at
            )
        )
        key_rows = [
            {
                "space_id": space_id,
                "event_id": event_id,
                "key_id": k.key_id,
                "episode_id": k.episode_id,
                "artifact_id": k.artifact_id,
            }
            for k in keys
        ]
        if key_rows:
            self.conn.execute(insert(t.forget_keys), key_rows)
        pending_rows = [
            {"space_id": space_id, "event_id": event_id, "device_id": d}
            for d in sorted(set(pending_devices))
        ]
        if pending_rows:
            self.conn.execute(insert(t.forget_pending), pending_rows)

    def _keys_of(self, space_id: str, event_id: int) -> tuple[ForgetKey, ...]:
        c = t.forget_keys.c
        rows = self.conn.execute(
            select(c.key_id, c.episode_id, c.artifact_id)
            .where(c.space_id == space_id, c.event_id == event_id)
            .order_by(c.key_id)
        )
        return tuple(ForgetKey(r[0], r[1], r[2]) for r in rows)

    def forget_event(self, space_id: str, event_id: int) -> ForgetEventRow | None:
        c = t.forget_events.c
        row = self.conn.execute(
            select(c.record_id, c.forgotten_at).where(
                c.space_id == space_id, c.event_id == event_id
            )
        ).first()
        if row is None:
            return None
        return ForgetEventRow(space_id, event_id, row[0], row[1], self._keys_of(space_id, event_id))

    def forgotten_key_ids(self, space_id: str, key_ids: Iterable[str]) -> set[str]:
        found: set[str] = set()
        for chunk in _chunks(sorted(set(key_ids))):
            rows = self.conn.execute(q.FORGOTTEN_KEY_IDS, {"sp": space_id, "ids": chunk})
            found.update(r[0] for r in rows)
        return found

    def forgotten_episode_ids(self, space_id: str, episode_ids: Iterable[str]) -> set[str]:
        """The episodes among ``episode_ids`` whose key a forget event names."""
        c = t.forget_keys.c
        found: set[str] = set()
        for chunk in _chunks(sorted(set(episode_ids))):
            rows = self.conn.execute(
                select(c.episode_id)
                .where(c.space_id == space_id, c.episode_id.in_(chunk))
                .distinct()
            )
            found.update(r[0] for r in rows)
        return found

    def undestroyed_forget_events(self) -> list[ForgetEventRow]:
        c = t.forget_events.c
        rows = self.conn.execute(
            select(c.space_id, c.event_id, c.record_id, c.forgotten_at)
            .where(c.keys_destroyed_at.is_(None))
            .order_by(c.space_id, c.event_id)
        ).all()
        return [
            ForgetEventRow(r[0], int(r[1]), r[2], r[3], self._keys_of(r[0], int(r[1])))
            for r in rows
        ]

    def mark_keys_destroyed(self, space_id: str, event_id: int, at: datetime) -> None:
        c = t.forget_events.c
        self.conn.execute(
            update(t.forget_events)
            .where(c.space_id == space_id, c.event_id == event_id, c.keys_destroyed_at.is_(None))
            .values(keys_destroyed_at=at)
        )

    def unacked_events(self, space_id: str, device_id: str) -> list[int]:
        c = t.forget_pending.c
        rows = self.conn.execute(
            select(c.event_id)
            .where(c.space_id == space_id, c.device_id == device_id, c.acked_at.is_(None))
            .order_by(c.event_id)
        )
        return [int(r[0]) for r in rows]

    def ack(self, space_id: str, device_id: str, event_ids: Iterable[int], at: datetime) -> None:
        c = t.forget_pending.c
        for chunk in _chunks(sorted(set(event_ids))):
            self.conn.execute(
                update(t.forget_pending)
                .where(
                    c.space_id == space_id,
                    c.device_id == device_id,
                    c.event_id.in_(chunk),
                    c.acked_at.is_(None),
                )
                .values(acked_at=at)
            )

    def forget_statuses(self, space_id: str) -> list[ForgetStatusRow]:
        e, p, d = t.forget_events.c, t.forget_pending.c, t.devices.c
        events = self.conn.execute(
            select(e.event_id, e.record_id, e.forgotten_at)
            .where(e.space_id == space_id)
            .order_by(e.event_id)
        ).all()
        pending_rows = self.conn.execute(
            select(p.event_id, p.device_id, d.name)
            .select_from(
                t.forget_pending.join(
                    t.devices, and_(d.space_id == p.space_id, d.device_id == p.device_id)
                )
            )
            .where(p.space_id == space_id, p.acked_at.is_(None), may_hold_copies(d))
            .order_by(p.event_id, p.device_id)
        ).all()
        by_event: dict[int, list[tuple[str, str]]] = {}
        for event_id, device_id, name in pending_rows:
            by_event.setdefault(int(event_id), []).append((device_id, name))
        return [
            ForgetStatusRow(r[1], int(r[0]), r[2], tuple(by_event.get(int(r[0]), ())))
            for r in events
        ]

    def count(self, table: Table) -> int:
        return int(self.conn.execute(select(func.count()).select_from(table)).scalar_one())


def _destroyed_key(space_id: Any, key_id: Any) -> ColumnElement[bool]:
    """``key_id`` is named by a forget event whose keys the key store has destroyed."""
    k, e = t.forget_keys.c, t.forget_events.c
    return (
        select(literal(1))
        .where(
            k.space_id == space_id,
            k.key_id == key_id,
            e.space_id == k.space_id,
            e.event_id == k.event_id,
            e.keys_destroyed_at.is_not(None),
        )
        .exists()
    )


def _compactable() -> ColumnElement[bool]:
    """The feed rows (of ``changes``) that no longer carry anything to any device:

    - a ``record_state`` that is not its record's latest, or whose record is forgotten
      (the reader sends neither; the skeleton travels with the key destruction);
    - a ``project`` change that is not its project's latest;
    - a ``record_version``, ``episode`` or ``artifact`` whose data key was destroyed;
    - a ``key_destruction`` that no registered, unrevoked device still has to
      acknowledge (every such device that held the content acked it; revoked devices
      do not block: they are refused and wipe everything when they next connect).
    """
    c = t.changes.c
    r, p = t.records.c, t.projects.c
    v, ep, art = t.record_versions.c, t.episodes.c, t.artifacts.c
    fp, d = t.forget_pending.c, t.devices.c
    latest_state = (
        select(literal(1))
        .where(
            r.space_id == c.space_id,
            r.record_id == c.record_id,
            r.state_seq == c.seq,
            r.lifecycle != "permanently_forgotten",
        )
        .exists()
    )
    latest_project = (
        select(literal(1))
        .where(p.space_id == c.space_id, p.name == c.project, p.seq == c.seq)
        .exists()
    )

    def destroyed(space: Any, key: Any, *same: Any) -> Any:
        """The content row matched by ``same`` has had its key destroyed."""
        return select(literal(1)).where(*same, _destroyed_key(space, key)).exists()

    version_gone = destroyed(
        v.space_id,
        v.key_id,
        v.space_id == c.space_id,
        v.record_id == c.record_id,
        v.version == c.version,
    )
    episode_gone = destroyed(
        ep.space_id, ep.key_id, ep.space_id == c.space_id, ep.episode_id == c.episode_id
    )
    artifact_gone = destroyed(
        art.space_id, art.key_id, art.space_id == c.space_id, art.artifact_id == c.artifact_id
    )
    awaited = (
        select(literal(1))
        .where(
            fp.space_id == c.space_id,
            fp.event_id == c.event_id,
            fp.acked_at.is_(None),
            d.space_id == fp.space_id,
            d.device_id == fp.device_id,
            d.revoked_at.is_(None),
        )
        .exists()
    )
    return or_(
        and_(c.kind == "record_state", ~latest_state),
        and_(c.kind == "project", ~latest_project),
        and_(c.kind == "record_version", version_gone),
        and_(c.kind == "episode", episode_gone),
        and_(c.kind == "artifact", artifact_gone),
        and_(c.kind == "key_destruction", ~awaited),
    )
