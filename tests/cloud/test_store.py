"""The record store itself: migrations, append-only content, the forensic audit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.exc import DBAPIError

from cloud.errors import StoreError
from cloud.service import CloudService
from cloud.store import SqlStore, migrations, open_store
from cloud.store import schema as t
from cloud.store.migrations import MIGRATIONS
from tests.cloud.conftest import SENTENCE, TYPED, Ops, applied, new_user, push


def _clock() -> datetime:
    return datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    s = open_store(store_url, _clock)
    try:
        yield s
    finally:
        s.close()


def test_migrations_run_once_in_order_and_match_the_schema(store_url: str) -> None:
    first = open_store(store_url, _clock)
    second = open_store(store_url, _clock)
    try:
        assert first.migrations_applied == [m.version for m in MIGRATIONS]
        assert second.migrations_applied == []
        with first.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT version, name FROM schema_migrations ORDER BY version")
            ).all()
            assert [(r[0], r[1]) for r in rows] == [(m.version, m.name) for m in MIGRATIONS]
            inspector = inspect(conn)
            own = t.DIALECT_COLUMNS[first.dialect]
            for table in t.metadata.sorted_tables:
                columns = {c["name"] for c in inspector.get_columns(table.name)}
                expected = {c.name for c in table.columns} | own.get(table.name, frozenset())
                assert columns == expected, table.name
            if first.dialect == "sqlite":  # the FTS5 table of the lexical index
                fts = conn.execute(text(f"PRAGMA table_info({t.SQLITE_FTS_TABLE})")).all()
                assert [r[1] for r in fts] == ["space_id", "record_id", "terms"]
    finally:
        first.close()
        second.close()


def test_a_store_at_migration_12_gains_the_history_index(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 17's migration applied to a store already at migration 12, on both backends."""
    at_12 = [m.version for m in MIGRATIONS].index(migrations.HISTORY_MIGRATION)
    monkeypatch.setattr(migrations, "MIGRATIONS", MIGRATIONS[:at_12])
    old = open_store(store_url, _clock)
    old.close()
    monkeypatch.undo()
    assert MIGRATIONS[-1].version == migrations.STATE_SEQ_MIGRATION
    new = open_store(store_url, _clock)
    try:
        assert new.migrations_applied == [
            migrations.HISTORY_MIGRATION,
            migrations.CONVERSATION_MIGRATION,
            migrations.HINT_MIGRATION,
            migrations.STATE_SEQ_MIGRATION,
        ]
        with new.engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("conversation_episodes")}
            assert columns == {"space_id", "conversation_token", "episode_id", "typed_at"}
        with new.engine.connect() as conn:
            columns = {c["name"] for c in inspect(conn).get_columns("history_index")}
            assert columns == {"space_id", "token", "record_id"}
            indexes = {i["name"] for i in inspect(conn).get_indexes("history_index")}
            assert "history_index_record" in indexes
    finally:
        new.close()


def test_a_bad_store_url_names_the_problem() -> None:
    with pytest.raises(StoreError, match="in-memory"):
        open_store("sqlite:///:memory:", _clock)
    with pytest.raises(StoreError, match="unsupported backend 'mysql'"):
        open_store("mysql://root@localhost/db", _clock)


@pytest.mark.parametrize("table", ["record_versions", "episodes", "artifacts", "record_events"])
def test_content_and_history_are_append_only(service: CloudService, ops: Ops, table: str) -> None:
    (phone,) = new_user(service, "alice", "phone")
    applied(
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa01", TYPED),
            ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
            ops.artifact("art_aaaaaaaa01", ["rec_aaaaaaaa01"], "A summary."),
        )
    )
    engine = service.store.engine
    column = "kind" if table == "record_events" else "key_id"
    with engine.connect() as conn:
        before = conn.execute(text(f"SELECT * FROM {table}")).all()
    assert len(before) == 1
    attempts = [
        f"UPDATE {table} SET {column} = {column}",
        f"UPDATE {table} SET {column} = 'key_aaaaaaaaaaaa'",
        f"DELETE FROM {table}",
        f"DELETE FROM {table} WHERE space_id = '{phone.space_id}'",
    ]
    if engine.dialect.name == "postgresql":
        attempts.append(f"TRUNCATE {table} CASCADE")
    for statement in attempts:
        with pytest.raises(DBAPIError, match="append-only"), engine.begin() as conn:
            conn.execute(text(statement))
    with engine.connect() as conn:
        after = conn.execute(text(f"SELECT * FROM {table}")).all()
    assert after == before


def test_no_code_path_updates_or_deletes_sealed_content() -> None:
    """Belt and braces beside the triggers: the source never aims a write at content."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "cloud"
    offenders = []
    for path in root.rglob("*.py"):
        source = path.read_text()
        for table in t.APPEND_ONLY_TABLES:
            for verb in ("update(t.", "delete(t."):
                if f"{verb}{table})" in source:
                    offenders.append(f"{path.name}: {verb}{table})")
    assert not offenders


def test_audit_blobs_reads_every_table(service: CloudService, ops: Ops) -> None:
    (phone,) = new_user(service, "alice", "phone")
    push(service, phone, ops.episode("ep_aaaaaaaa01", TYPED))
    blobs = list(service.store.audit_blobs())
    assert "alice" in blobs  # spaces
    assert "phone" in blobs  # devices
    assert "ep_aaaaaaaa01" in blobs  # episodes and changes
    assert any(isinstance(b, bytes) and len(b) > 40 for b in blobs)  # sealed content
    assert not any(isinstance(b, str) and "1729" in b for b in blobs)


def _migrated_by_a_newer_memsync(store: SqlStore) -> None:
    with store.engine.begin() as conn:
        conn.execute(
            text("INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, 'x', :at)"),
            {"at": _clock()},
        )


def _fingerprint(store: SqlStore) -> list[tuple[str, int]]:
    with store.engine.connect() as conn:
        return [
            (table.name, int(conn.execute(text(f"SELECT count(*) FROM {table.name}")).scalar()))
            for table in t.metadata.sorted_tables
        ]


def test_a_store_migrated_by_a_newer_memsync_is_refused_at_open_and_while_serving(
    store_url: str,
) -> None:
    """Issue 22, item 7: opening it raises ``StoreTooNew`` naming both versions and
    applies nothing; a process that opened it earlier (another process on the same
    PostgreSQL database migrated it since) refuses its next transaction."""
    from cloud.errors import StoreTooNew
    from cloud.store.migrations import KNOWN_VERSION

    old = open_store(store_url, _clock)
    try:
        _migrated_by_a_newer_memsync(old)
        before = _fingerprint(old)
        with pytest.raises(StoreTooNew) as refused:
            open_store(store_url, _clock)
        message = str(refused.value)
        assert "schema version 99" in message and f"up to {KNOWN_VERSION}" in message
        assert "changed nothing" in message and "password" not in message
        assert refused.value.status == 503
        with pytest.raises(StoreTooNew, match="schema version 99"), old.session() as s:
            s.last_seq("sp_nothing")
        with pytest.raises(StoreTooNew), old.snapshot():
            pass
        assert _fingerprint(old) == before
    finally:
        old.close()


def test_an_authentication_waits_behind_no_writer(service: CloudService) -> None:
    """A device's credential is checked in a read-only transaction: while another
    request holds the write lock (a push being applied), authentications still answer.
    Were the check a write transaction, SQLite's BEGIN IMMEDIATE would wait for the
    writer, which here lets go only after the check returned (or after 20 s)."""
    import threading

    (phone,) = new_user(service, "ada", "phone")
    holding, release, released = threading.Event(), threading.Event(), threading.Event()

    def writer() -> None:
        with service.store.session(phone.space_id, lock=True):
            holding.set()
            release.wait(20)
        released.set()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(20)
        assert service.authenticate(phone.credential) == (phone.space_id, phone.device_id)
        assert not released.is_set(), "the authentication waited for the writer"
    finally:
        release.set()
        thread.join()


def test_nothing_can_be_written_in_a_reader(store: SqlStore) -> None:
    with pytest.raises(DBAPIError), store.reader() as s:
        s.conn.execute(text("DELETE FROM schema_migrations"))
