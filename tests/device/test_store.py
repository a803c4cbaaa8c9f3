"""The encrypted store: SQLCipher for real, passphrases, migrations, transactions,
and the structural append-only rule (Invariant 3)."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from device.agent import DeviceAgent
from device.db import WAL_AUTOCHECKPOINT, Database, IntegrityError, key_pragma
from device.errors import (
    DeviceAlreadyExists,
    DeviceNotInitialised,
    EmptyPassphrase,
    MigrationFailed,
    SchemaTooNew,
    WrongPassphrase,
)
from device.migrations import MIGRATIONS, Migration, applied, migrate
from tests.device.conftest import PASSPHRASE, MakeAgent, TickingClock, seeded
from tests.device.sqlcipher_pages import index_needles, plaintext_contains

SENTENCE = "My locker combination is Xylophone-4471."
DEVICE_DIR = Path(__file__).resolve().parents[2] / "device"


def _digest(path: Path, *, with_shm: bool = False) -> dict[str, str]:
    """Hashes of the database file and its WAL (the data). The ``-shm`` wal-index is
    shared memory that readers lock in, not data; it is compared only when asked."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.parent.glob(path.name + "*"))
        if with_shm or not p.name.endswith("-shm")
    }


def test_file_is_sqlcipher_and_holds_no_plaintext(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(SENTENCE + " It opens the gym door.", "c1")
    agent.remember(SENTENCE, "c1")
    raw = agent.db_path.read_bytes()
    wal = agent.db_path.with_name("device.db-wal")
    assert wal.exists() and wal.stat().st_size > 0, "the test should also cover the WAL"
    assert not raw.startswith(b"SQLite format 3\x00")
    for blob in (raw, wal.read_bytes()):
        assert b"Xylophone" not in blob
        assert b"xylophone" not in blob
        assert b"CREATE TABLE" not in blob
    # Positive control: decrypting the pages finds the schema and the blinded index
    # term, so the scan above would have seen plaintext had it been there ...
    assert plaintext_contains(agent.db_path, PASSPHRASE, b"CREATE TABLE")
    [needle, *_] = index_needles(agent._debug_db(), "xylophone", [])
    assert plaintext_contains(agent.db_path, PASSPHRASE, needle)
    # ... and even decrypted, the store holds the word only sealed, never in the clear.
    assert not plaintext_contains(agent.db_path, PASSPHRASE, b"xylophone")


def test_wrong_passphrase_is_refused_and_file_unchanged(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(SENTENCE, "c1")
    path = agent.db_path
    before = _digest(path)
    assert "device.db-wal" in before
    with pytest.raises(WrongPassphrase) as caught:
        DeviceAgent.open(agent.directory, "not the passphrase")
    message = str(caught.value)
    assert str(path) in message and "nothing was read or changed" in message
    assert _digest(path) == before
    # With the device closed, no file at all changes, not even the wal-index.
    agent.close()
    closed = _digest(path, with_shm=True)
    with pytest.raises(WrongPassphrase):
        DeviceAgent.open(agent.directory, "another wrong one")
    assert _digest(path, with_shm=True) == closed
    again = DeviceAgent.open(agent.directory, PASSPHRASE)
    assert again.device_name == "phone"
    again.close()


def test_a_database_opens_only_with_the_pbkdf2_count_it_was_made_with(tmp_path: Path) -> None:
    """A device the user makes has SQLCipher's default stretching and no ``.kdf`` file;
    one a simulation makes with fewer iterations keeps the count beside it, every open
    uses it, and without it the passphrase is wrong (nothing read or changed)."""
    from device.db import DEFAULT_KDF_ITERATIONS, kdf_file, kdf_iterations

    user = DeviceAgent.create(tmp_path / "user", PASSPHRASE, device_name="phone")
    user.close()
    assert not kdf_file(tmp_path / "user" / "device.db").exists()
    assert kdf_iterations(tmp_path / "user" / "device.db") == DEFAULT_KDF_ITERATIONS
    fast = DeviceAgent.create(tmp_path / "sim", PASSPHRASE, device_name="sim", kdf_iterations=64)
    fast.close()
    path = tmp_path / "sim" / "device.db"
    assert kdf_file(path).read_text().strip() == "64"
    again = DeviceAgent.open(tmp_path / "sim", PASSPHRASE)
    assert again.device_name == "sim"
    again.close()
    kdf_file(path).unlink()
    before = _digest(path)
    with pytest.raises(WrongPassphrase):
        DeviceAgent.open(tmp_path / "sim", PASSPHRASE)
    assert _digest(path) == before
    kdf_file(path).write_text("many\n")
    with pytest.raises(ValueError, match="expected a number of PBKDF2 iterations, found 'many'"):
        DeviceAgent.open(tmp_path / "sim", PASSPHRASE)
    with pytest.raises(ValueError, match="0 PBKDF2 iterations is out of range"):
        Database.create(tmp_path / "zero" / "device.db", PASSPHRASE, kdf_iterations=0)
    assert not (tmp_path / "zero" / "device.db").exists()


@pytest.mark.parametrize("folder_exists", [False, True])
def test_device_files_are_0600_in_a_0700_folder(tmp_path: Path, folder_exists: bool) -> None:
    """The database, its WAL and shared-memory file (and a ``.kdf`` file) are the
    owner's only, under a permissive umask (issue 22, item 8)."""
    import os
    import stat

    directory = tmp_path / "device"
    if folder_exists:
        directory.mkdir(mode=0o755)
    before = os.umask(0o022)
    try:
        agent = DeviceAgent.create(directory, PASSPHRASE, device_name="phone", kdf_iterations=64)
        agent.say(SENTENCE, "c1")
        files = sorted(directory.iterdir())
        assert {"device.db", "device.db-wal", "device.db-shm", "device.db.kdf"} <= {
            p.name for p in files
        }
        for path in files:
            mode = stat.S_IMODE(path.stat().st_mode)
            assert mode == 0o600, f"{path.name} is {oct(mode)}"
        assert stat.S_IMODE(directory.stat().st_mode) == 0o700
        agent.close()
    finally:
        os.umask(before)


def test_a_database_that_could_not_be_made_leaves_nothing_behind(tmp_path: Path) -> None:
    path = tmp_path / "d" / "device.db"
    (tmp_path / "d").mkdir()
    path.with_name("device.db-wal").mkdir()  # SQLite cannot make its WAL here
    with pytest.raises(Exception):  # noqa: B017 - whatever SQLCipher raises
        Database.create(path, PASSPHRASE, kdf_iterations=64)
    assert not path.exists() and not path.with_name("device.db.kdf").exists()


def test_passphrase_with_quotes_is_escaped(tmp_path: Path) -> None:
    assert key_pragma("it's") == "PRAGMA key = 'it''s'"
    agent = DeviceAgent.create(tmp_path / "d", "it's", device_name="x")
    agent.close()
    with pytest.raises(WrongPassphrase):
        DeviceAgent.open(tmp_path / "d", "it")  # what an unescaped quote would truncate to
    DeviceAgent.open(tmp_path / "d", "it's").close()


def test_missing_existing_and_empty(tmp_path: Path) -> None:
    with pytest.raises(DeviceNotInitialised, match="no device database at"):
        DeviceAgent.open(tmp_path / "nowhere", PASSPHRASE)
    assert not (tmp_path / "nowhere" / "device.db").exists()
    DeviceAgent.create(tmp_path / "d", PASSPHRASE, device_name="x").close()
    with pytest.raises(DeviceAlreadyExists):
        DeviceAgent.create(tmp_path / "d", PASSPHRASE, device_name="x")
    with pytest.raises(EmptyPassphrase):
        DeviceAgent.create(tmp_path / "e", "", device_name="x")
    assert not (tmp_path / "e").exists()


def test_pragmas(make_agent: MakeAgent) -> None:
    db = make_agent()._debug_db()
    assert db.one("PRAGMA journal_mode")[0] == "wal"
    assert db.one("PRAGMA secure_delete")[0] == 1
    assert db.one("PRAGMA foreign_keys")[0] == 1
    assert db.one("PRAGMA cipher_version")[0].startswith("4.")


def test_wal_autocheckpoint_set_on_create_and_open(tmp_path: Path) -> None:
    agent = DeviceAgent.create(tmp_path / "d", PASSPHRASE, device_name="x")
    assert agent._debug_db().one("PRAGMA wal_autocheckpoint")[0] == WAL_AUTOCHECKPOINT
    agent.close()
    with DeviceAgent.open(tmp_path / "d", PASSPHRASE) as again:
        assert again._debug_db().one("PRAGMA wal_autocheckpoint")[0] == WAL_AUTOCHECKPOINT


def test_migrations_recorded_and_idempotent(make_agent: MakeAgent) -> None:
    agent = make_agent()
    db = agent._debug_db()
    rows = db.all("SELECT id, name, applied_at FROM schema_migrations")
    assert [tuple(r)[:2] for r in rows] == [
        (1, "initial schema"),
        (2, "full memory record"),
        (3, "retrieval indexes"),
        (4, "writing memory: candidates and device-only classes"),
        (5, "sync under fire: resync marker and wipe confirmation"),
        (6, "indexes on the columns that reference data keys"),
        (7, "the import ledger: export packages imported once"),
        (8, "the device subset: uses, reasons, deferred evictions"),
        (9, "records a resync kept unseen, asked about on a duplicate"),
        (10, "sync status: when this device last synced"),
        (11, "derived rows stored once: WITHOUT ROWID indexes"),
    ]
    agent.close()
    again = DeviceAgent.open(agent.directory, PASSPHRASE, clock=TickingClock())
    rows2 = again._debug_db().all("SELECT id, name, applied_at FROM schema_migrations")
    assert [tuple(r) for r in rows2] == [tuple(r) for r in rows]
    again.close()


def test_new_migration_runs_once_in_one_transaction(tmp_path: Path) -> None:
    db = Database.create(tmp_path / "device.db", PASSPHRASE)
    ours = [m.id for m in MIGRATIONS]
    assert migrate(db, "t0") == ours
    n = ours[-1]
    extra = (*MIGRATIONS, Migration(n + 1, "extra", ("CREATE TABLE extra (x)",)))
    assert migrate(db, "t1", extra) == [n + 1]
    assert migrate(db, "t2", extra) == []
    assert applied(db) == [*ours, n + 1]
    broken = (*extra, Migration(n + 2, "broken", ("CREATE TABLE half (x)", "NOT SQL AT ALL")))
    with pytest.raises(MigrationFailed, match=rf"migration {n + 2} \(broken\)"):
        migrate(db, "t3", broken)
    assert applied(db) == [*ours, n + 1]
    assert db.one("SELECT 1 FROM sqlite_master WHERE name = 'half'") is None
    db.close()


def test_database_from_newer_memsync_is_refused(tmp_path: Path) -> None:
    db = Database.create(tmp_path / "device.db", PASSPHRASE)
    migrate(db, "t0")
    with db.atomic():
        db.execute("INSERT INTO schema_migrations VALUES (99, 'future', 't')")
    with pytest.raises(SchemaTooNew, match=r"\[99\]"):
        migrate(db, "t1")
    db.close()


def test_atomic_savepoints(tmp_path: Path) -> None:
    db = Database.create(tmp_path / "device.db", PASSPHRASE)
    with db.atomic():
        db.execute("CREATE TABLE t (x)")
    with db.atomic():
        db.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(ZeroDivisionError), db.atomic():
            db.execute("INSERT INTO t VALUES (2)")
            raise ZeroDivisionError
        db.execute("INSERT INTO t VALUES (3)")
    assert [r[0] for r in db.all("SELECT x FROM t ORDER BY x")] == [1, 3]
    with pytest.raises(RuntimeError), db.atomic():
        db.execute("INSERT INTO t VALUES (4)")
        with db.atomic():
            db.execute("INSERT INTO t VALUES (5)")
        raise RuntimeError
    assert [r[0] for r in db.all("SELECT x FROM t ORDER BY x")] == [1, 3]
    assert not db.in_transaction
    db.close()


# --- Invariant 3: append-only content, enforced by the database ---------------------


def test_update_of_sealed_content_is_refused(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(SENTENCE, "c1")
    record = agent.remember(SENTENCE, "c1").record_id
    db = agent._debug_db()
    with pytest.raises(IntegrityError, match=f"append-only: record {record} v1"):
        db.execute("UPDATE record_versions SET sealed = x'00' WHERE record_id = ?", (record,))
    with pytest.raises(IntegrityError, match="append-only: record"):
        db.execute("UPDATE record_versions SET key_id = 'key_other' WHERE record_id = ?", (record,))
    with pytest.raises(IntegrityError, match="append-only: episode ep_"):
        db.execute("UPDATE episodes SET sealed = x'00'")
    with pytest.raises(IntegrityError, match="append-only: data key key_"):
        db.execute("UPDATE data_keys SET dek = zeroblob(32)")
    # metadata is not content: sync state may change
    db.execute("UPDATE episodes SET sync_state = 'synced'")
    assert agent.list_records()[0].text == SENTENCE


def test_delete_without_shred_permit_is_refused(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(SENTENCE, "c1")
    record = agent.remember(SENTENCE, "c1").record_id
    db = agent._debug_db()
    with pytest.raises(IntegrityError, match="no shred permit"):
        db.execute("DELETE FROM record_versions WHERE record_id = ?", (record,))
    with pytest.raises(IntegrityError, match="no shred permit"):
        db.execute("DELETE FROM episodes")
    with pytest.raises(IntegrityError, match="no shred permit"):
        db.execute("DELETE FROM data_keys")
    assert agent.list_records()[0].text == SENTENCE
    assert len(agent.data_keys_for(record)) == 2


PROTECTED = r"(record_versions|episodes|data_keys|shred_permits|forgotten_episodes)"
FORBIDDEN = re.compile(
    rf"\b(UPDATE\s+{PROTECTED}\b|DELETE\s+FROM\s+{PROTECTED}\b|INSERT[\w\s]*INTO\s+shred_permits)",
    re.IGNORECASE,
)


def test_only_shred_py_removes_content() -> None:
    """Fails the build if device code updates or deletes content outside device/shred.py.

    ``UPDATE episodes SET sync_state`` and ``SET device_only`` are metadata (the trigger
    refuses content columns); they are the only allowed statements, matched exactly.
    """
    allowed = {
        "UPDATE episodes SET sync_state = ?, refusal_reason = ? WHERE episode_id = ?",
        "UPDATE episodes SET device_only = 1 WHERE episode_id = ?",
    }
    offenders = []
    for source in sorted(DEVICE_DIR.glob("*.py")):
        text = source.read_text()
        for match in FORBIDDEN.finditer(text):
            line = text[match.start() : text.find('"', match.start())]
            if source.name == "shred.py" or line in allowed:
                continue
            offenders.append(f"{source.name}: {line}")
    assert offenders == []
    # the scan is live: it sees shred.py's own statements
    assert len(FORBIDDEN.findall((DEVICE_DIR / "shred.py").read_text())) >= 5


def test_create_rolls_back_file_on_failure(tmp_path: Path) -> None:
    def broken_random(n: int) -> bytes:
        raise OSError("no entropy")

    with pytest.raises(OSError):
        DeviceAgent.create(tmp_path / "d", PASSPHRASE, device_name="x", random_bytes=broken_random)
    assert list((tmp_path / "d").glob("device.db*")) == []
    DeviceAgent.create(tmp_path / "d", PASSPHRASE, device_name="x", random_bytes=seeded(1)).close()
