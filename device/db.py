"""The SQLCipher connection: opening with a passphrase, pragmas, and transactions.

Invariants:
- The database is always SQLCipher-encrypted: an empty passphrase is refused, and the
  key is set before anything is read or written.
- A wrong passphrase is detected on the first read, before any write or pragma that
  could touch the file, and is reported as ``WrongPassphrase``; the file is unchanged.
- ``open_existing`` never creates a file (URI ``mode=rw``).
- Transactions are explicit (``isolation_level=None``): ``Database.atomic()`` opens
  ``BEGIN IMMEDIATE`` at the outermost level and a SAVEPOINT when nested; an exception
  rolls back exactly the level it escaped from.
- One connection, used from any thread one at a time: a re-entrant lock is held for
  each statement and for the whole of an outermost transaction, so a live-sync thread
  and the user's calls never interleave inside one transaction.
- The passphrase is stretched by SQLCipher's PBKDF2-HMAC-SHA512 with its default
  iteration count, unless the database was created with another count: then the count
  (not a secret) is kept beside it in ``<db>.kdf`` and every open uses it, so a
  database only ever opens with the count it was made with. Only simulations lower it
  (``docs/simulator-scale.md``); a device the user makes never has the file.
- The database's folder is 0700 and the database (so its -wal and -shm) and its
  ``.kdf`` file are created 0600, whatever the umask.
- A ``TransactionObserver`` (``Database.observer``, set by ``device.changes``) hears
  the end of every outermost transaction: ``before_commit`` inside it (it may read),
  ``after_commit`` once COMMIT succeeded and the lock is released, ``discarded`` on a
  rollback or a failed COMMIT. A savepoint's rollback is not reported: the observer
  diffs what it saw before against what is there at the commit.
- WAL mode with ``secure_delete`` on; the WAL is auto-checkpointed every
  ``WAL_AUTOCHECKPOINT`` pages (fewer checkpoint fsyncs on the write path); a forget
  still truncates it at once (``Database.checkpoint``).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import sqlcipher3

from device.errors import (
    DeviceAlreadyExists,
    DeviceNotInitialised,
    EmptyPassphrase,
    WrongPassphrase,
)

DB_FILENAME = "device.db"
CACHE_KIB = 32 * 1024
# ~40 MB of 4 KiB frames: the default (1000) fsyncs a checkpoint every dozen or so writes
WAL_AUTOCHECKPOINT = 10_000

# SQLCipher 4's PBKDF2-HMAC-SHA512 iterations for a passphrase (what PRAGMA key uses)
DEFAULT_KDF_ITERATIONS = 256_000
KDF_SUFFIX = ".kdf"
MAX_KDF_ITERATIONS = 10_000_000

DatabaseError = sqlcipher3.DatabaseError
IntegrityError = sqlcipher3.IntegrityError


def key_pragma(passphrase: str) -> str:
    """``PRAGMA key`` with the passphrase as a properly escaped SQL string literal."""
    if not passphrase:
        raise EmptyPassphrase()
    if "\x00" in passphrase:
        raise ValueError("a passphrase cannot contain a NUL character")
    return "PRAGMA key = '" + passphrase.replace("'", "''") + "'"


def kdf_file(path: Path) -> Path:
    return Path(f"{path}{KDF_SUFFIX}")


def _checked_iterations(count: int, where: str) -> int:
    if not 1 <= count <= MAX_KDF_ITERATIONS:
        raise ValueError(
            f"{where}: {count} PBKDF2 iterations is out of range (1 to {MAX_KDF_ITERATIONS})"
        )
    return count


def kdf_iterations(path: Path) -> int:
    """The PBKDF2 iterations the database at ``path`` was made with."""
    marker = kdf_file(path)
    if not marker.is_file():
        return DEFAULT_KDF_ITERATIONS
    text = marker.read_text(encoding="ascii", errors="replace").strip()
    if not text.isdigit():
        raise ValueError(f"{marker}: expected a number of PBKDF2 iterations, found {text[:40]!r}")
    return _checked_iterations(int(text), str(marker))


def _private_folder(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    if folder.stat().st_mode & 0o077:
        os.chmod(folder, 0o700)


def _private_file(path: Path) -> Path:
    """``path`` created empty (or kept), readable and writable by its owner only."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        # never open an existing file: closing a descriptor drops this process's POSIX
        # locks on it (SQLite's included)
        if path.stat().st_mode & 0o077:
            os.chmod(path, 0o600)
        return path
    os.close(fd)
    return path


def _connect(path: Path, mode: str) -> Any:
    uri = f"file:{quote(str(path))}?mode={mode}"
    return sqlcipher3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)


def _configure(conn: Any, passphrase: str, path: Path, iterations: int) -> None:
    conn.row_factory = sqlcipher3.Row
    conn.execute(key_pragma(passphrase))
    if iterations != DEFAULT_KDF_ITERATIONS:
        conn.execute(f"PRAGMA kdf_iter = {int(iterations)}")
    conn.execute("PRAGMA cipher_log_level = NONE")
    try:
        # The first read: SQLCipher checks the key (HMAC of page 1) here.
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlcipher3.DatabaseError as exc:
        conn.close()
        if "not a database" in str(exc):
            raise WrongPassphrase(path) from None
        raise
    conn.execute("PRAGMA journal_mode = WAL").fetchone()
    conn.execute("PRAGMA secure_delete = ON")
    conn.execute(f"PRAGMA wal_autocheckpoint = {WAL_AUTOCHECKPOINT}").fetchone()
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = NORMAL")
    # decrypted pages kept in memory: retrieval reads scattered rows (measured at 100k
    # records: 8 MB default -> 32 MB took a query from ~460 ms to ~290 ms)
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")


class TransactionObserver(Protocol):
    """Told how each outermost transaction ended (``device.changes.ChangeHub``)."""

    def before_commit(self) -> object: ...
    def after_commit(self, sealed: object) -> None: ...
    def discarded(self) -> None: ...


class Database:
    """One SQLCipher connection with explicit, nestable transactions."""

    def __init__(self, conn: Any, path: Path) -> None:
        self.conn = conn
        self.path = path
        self._depth = 0
        self._lock = threading.RLock()
        self.observer: TransactionObserver | None = None

    @classmethod
    def create(cls, path: Path, passphrase: str, *, kdf_iterations: int | None = None) -> Database:
        """A new database; ``kdf_iterations`` other than the default is for simulations
        only (it is kept in ``<path>.kdf``, which every open then needs)."""
        key_pragma(passphrase)  # refuse an empty passphrase before touching the disk
        iterations = _checked_iterations(
            DEFAULT_KDF_ITERATIONS if kdf_iterations is None else kdf_iterations, str(path)
        )
        if path.exists():
            raise DeviceAlreadyExists(path)
        _private_folder(path.parent)
        marker = kdf_file(path)
        if iterations != DEFAULT_KDF_ITERATIONS:
            _private_file(marker).write_text(f"{iterations}\n", encoding="ascii")
        else:
            marker.unlink(missing_ok=True)  # a stale marker would make this one unopenable
        _private_file(path)  # SQLite gives its -wal and -shm files this file's mode
        try:
            conn = _connect(path, "rwc")
            _configure(conn, passphrase, path, iterations)
        except BaseException:
            for leftover in (path, marker):
                leftover.unlink(missing_ok=True)  # nothing half-made stays behind
            raise
        return cls(conn, path)

    @classmethod
    def open_existing(cls, path: Path, passphrase: str) -> Database:
        key_pragma(passphrase)
        if not path.is_file():
            raise DeviceNotInitialised(path)
        iterations = kdf_iterations(path)
        conn = _connect(path, "rw")
        _configure(conn, passphrase, path, iterations)
        return cls(conn, path)

    @property
    def in_transaction(self) -> bool:
        return self._depth > 0

    @contextmanager
    def atomic(self) -> Iterator[Any]:
        """A transaction (outermost) or a savepoint (nested); yields the connection."""
        observer, sealed, committed = self.observer, None, False
        with self._lock:  # held until the outermost transaction ends
            depth = self._depth
            savepoint = f"sp_{depth}"
            if depth == 0:
                self.conn.execute("BEGIN IMMEDIATE")
            else:
                self.conn.execute(f"SAVEPOINT {savepoint}")
            self._depth += 1
            try:
                yield self.conn
            except BaseException:
                self._depth = depth
                if depth == 0:
                    if observer is not None:
                        observer.discarded()
                    self.conn.execute("ROLLBACK")
                else:
                    self.conn.execute(f"ROLLBACK TO {savepoint}")
                    self.conn.execute(f"RELEASE {savepoint}")
                raise
            else:
                self._depth = depth
                if depth == 0:
                    if observer is not None:
                        sealed = observer.before_commit()
                    try:
                        self.conn.execute("COMMIT")
                    except BaseException:
                        if observer is not None:
                            observer.discarded()
                        raise
                    committed = True
                else:
                    self.conn.execute(f"RELEASE {savepoint}")
        if committed and observer is not None:
            observer.after_commit(sealed)  # outside the lock: listeners may read and write

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self.conn.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Any:
        with self._lock:
            return self.conn.executemany(sql, rows)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with self._lock:
            return self.conn.execute(sql, params).fetchone()

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            return list(self.conn.execute(sql, params).fetchall())

    def checkpoint(self) -> None:
        """Fold the WAL into the main file and truncate it (after shredding)."""
        with self._lock:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()

    def close(self) -> None:
        with self._lock:
            self.conn.close()
