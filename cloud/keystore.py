"""The key store: data keys wrapped by per-space keys, in a file of its own.

Invariants:
- The key store is separate from the record store; a copy of the record store alone
  opens nothing.
- Each space key (32 random bytes) is wrapped by the master key; each data key (DEK)
  is wrapped by its space key with ``protocol.sealing.seal`` and the binding
  ``memsync/1|<space>|dek|<key_id>|1``. Plain keys never reach the disk.
- ``destroy`` deletes rows with ``secure_delete`` on and then truncates the WAL, so
  neither the file nor its WAL holds a destroyed wrapped key; it is idempotent.
- ``destroy_space`` (the end of an account) deletes every key of one space the same
  way: its space key (so its subject-index key, derived from it, is gone too), its
  search key and any of its DEKs left; the space's keys leave this process's caches.
  Other spaces' rows are untouched. It is idempotent.
- A push creates its keys in a ``KeyBatch``: one transaction, written before the
  record store commits; the batch and its plain keys live for that one push only.
- The subject-index key of a space is derived from its space key (HMAC-SHA256), so
  it exists only where the space key does; the record store sees only its hashes.
- The search key of a space (32 random bytes, one per space, made with the space or on
  first use) is wrapped by the space key under ``memsync/1|<space>|search_key|<space>|1``;
  the retrieval indexes hold only terms blinded with it
  (``protocol.retrieval.lexical.blind``). It is a key of its own, not the subject-index
  key, so the two indexes' hashes cannot be matched against each other.

``KeyStore`` is the interface a KMS or Vault-like service could implement instead.
"""

from __future__ import annotations

import hmac
import os
import sqlite3
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Protocol

from cloud.errors import KeyStoreError
from cloud.files import private_file, private_folder
from protocol.errors import SealError
from protocol.ids import make_id
from protocol.sealing import KEY_BYTES, NONCE_BYTES, binding, open_sealed, seal

MASTER_KEY_ENV = "MEMSYNC_MASTER_KEY"
MASTER_KEY_FILE = "master.key"


class KeyStore(Protocol):
    """What the cloud needs from a key service."""

    path: Path

    def create_space_key(self, space_id: str) -> None: ...

    def create_data_key(self, space_id: str) -> tuple[str, bytes]:
        """Make a fresh DEK for one item; return ``(key_id, dek)``."""
        ...

    def data_key(self, space_id: str, key_id: str) -> bytes | None:
        """The plain DEK, or None when it was destroyed (or never existed in this space)."""
        ...

    def data_keys(self, space_id: str, key_ids: Iterable[str]) -> dict[str, bytes]:
        """``data_key`` for many keys at once; the missing ones absent."""
        ...

    def existing(self, key_ids: Iterable[str]) -> set[str]: ...

    def index_key(self, space_id: str) -> bytes:
        """The space's key for hashing subject-index entries (never stored in the clear)."""
        ...

    def search_key(self, space_id: str) -> bytes:
        """The space's key for blinding search-index terms (made on first use)."""
        ...

    def destroy(self, key_ids: Iterable[str]) -> None: ...

    def check_space(self, space_id: str) -> None:
        """Raise ``KeyStoreError`` naming the reason unless the key store can be read now
        and holds the space's key (an export asks before it starts)."""
        ...

    def destroy_space(self, space_id: str) -> None:
        """Destroy every key of the space: space key, search key, DEKs (idempotent)."""
        ...

    def batch(self) -> KeyBatch:
        """A batch for one push: its keys are written together by ``KeyBatch.write``."""
        ...

    def wrapped_keys_for(self, key_ids: Iterable[str]) -> dict[str, bytes]: ...

    def close(self) -> None: ...


def load_master_key(
    key_store_path: Path, random_bytes: Callable[[int], bytes], given: bytes | None = None
) -> bytes:
    """The master key: ``given``, else ``MEMSYNC_MASTER_KEY`` (hex), else ``master.key``.

    The file is created (mode 0600) beside the key store on first use.
    """
    if given is not None:
        if len(given) != KEY_BYTES:
            raise KeyStoreError(f"the master key is {KEY_BYTES} bytes, got {len(given)}")
        return given
    env = os.environ.get(MASTER_KEY_ENV)
    if env:
        try:
            key = bytes.fromhex(env.strip())
        except ValueError as exc:
            raise KeyStoreError(f"{MASTER_KEY_ENV} is not hex: {exc}") from exc
        if len(key) != KEY_BYTES:
            raise KeyStoreError(
                f"{MASTER_KEY_ENV} must be {KEY_BYTES} bytes ({2 * KEY_BYTES} hex digits), "
                f"got {len(key)} bytes"
            )
        return key
    path = key_store_path.parent / MASTER_KEY_FILE
    if not path.exists():
        private_folder(path.parent)
        key = random_bytes(KEY_BYTES)
        tmp = path.with_name(f".{MASTER_KEY_FILE}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(key)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(tmp, path)  # atomic; if another process won the race, use its key
        except FileExistsError:
            pass
        finally:
            os.unlink(tmp)
    key = path.read_bytes()
    if len(key) != KEY_BYTES:
        raise KeyStoreError(f"{path} holds {len(key)} bytes; a master key is {KEY_BYTES}")
    return key


_SCHEMA = """
CREATE TABLE IF NOT EXISTS space_keys (
    space_id TEXT PRIMARY KEY,
    wrapped BLOB NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS data_keys (
    key_id TEXT PRIMARY KEY,
    space_id TEXT NOT NULL REFERENCES space_keys(space_id),
    wrapped BLOB NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS data_keys_space ON data_keys(space_id);
CREATE TABLE IF NOT EXISTS search_keys (
    space_id TEXT PRIMARY KEY REFERENCES space_keys(space_id),
    wrapped BLOB NOT NULL,
    created_at TEXT NOT NULL
);
"""


class SqliteKeyStore:
    """The embedded key store: one SQLite file (WAL, secure_delete) and a master key."""

    def __init__(
        self,
        path: Path,
        master_key: bytes,
        random_bytes: Callable[[int], bytes],
        clock: Callable[[], datetime],
    ) -> None:
        self.path = path
        self._master = master_key
        self._random = random_bytes
        self._clock = clock
        self._lock = threading.Lock()
        self._space_keys: dict[str, bytes] = {}
        self._search_keys: dict[str, bytes] = {}
        private_file(path)  # wrapped keys only, but nobody else needs to read them
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA secure_delete=ON")
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("PRAGMA busy_timeout=30000")
        self._db.executescript(_SCHEMA)
        if self._db.execute("PRAGMA secure_delete").fetchone()[0] != 1:
            raise KeyStoreError(f"{path}: this SQLite build refuses PRAGMA secure_delete=ON")

    # --- space keys ------------------------------------------------------------------

    def create_space_key(self, space_id: str) -> None:
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM space_keys WHERE space_id = ?", (space_id,)
            ).fetchone()
            if row is not None:
                return
            key = self._random(KEY_BYTES)
            wrapped = seal(
                self._master,
                self._random(NONCE_BYTES),
                key,
                binding(space_id, "space_key", space_id, 1),
            )
            self._db.execute(
                "INSERT INTO space_keys (space_id, wrapped, created_at) VALUES (?, ?, ?)",
                (space_id, wrapped, self._clock().isoformat()),
            )
            self._space_keys[space_id] = key
        self.search_key(space_id)

    def _space_key(self, space_id: str) -> bytes:
        cached = self._space_keys.get(space_id)
        if cached is not None:
            return cached
        row = self._db.execute(
            "SELECT wrapped FROM space_keys WHERE space_id = ?", (space_id,)
        ).fetchone()
        if row is None:
            raise KeyStoreError(f"space {space_id} has no space key in {self.path}")
        try:
            key = open_sealed(self._master, row[0], binding(space_id, "space_key", space_id, 1))
        except SealError as exc:
            raise KeyStoreError(
                f"the space key of {space_id} does not open with this master key: {exc}"
            ) from exc
        self._space_keys[space_id] = key
        return key

    def check_space(self, space_id: str) -> None:
        """Read the store itself (never the cache): it answers and holds the space key."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT wrapped FROM space_keys WHERE space_id = ?", (space_id,)
                ).fetchone()
        except sqlite3.Error as exc:
            raise KeyStoreError(f"the key store {self.path} cannot be read: {exc}") from exc
        if row is None:
            raise KeyStoreError(f"the key store {self.path} holds no key for space {space_id}")

    def index_key(self, space_id: str) -> bytes:
        with self._lock:
            space_key = self._space_key(space_id)
        return hmac.new(
            space_key, f"memsync/1|subject-index|{space_id}".encode(), "sha256"
        ).digest()

    def search_key(self, space_id: str) -> bytes:
        """The space's search key; made (random, wrapped by the space key) on first use.

        Two processes making it at once both insert-or-ignore, then both read back the
        one row that won, so a space only ever has one search key.
        """
        cached = self._search_keys.get(space_id)
        if cached is not None:
            return cached
        where = binding(space_id, "search_key", space_id, 1)
        with self._lock:
            space_key = self._space_key(space_id)
            row = self._db.execute(
                "SELECT wrapped FROM search_keys WHERE space_id = ?", (space_id,)
            ).fetchone()
            if row is None:
                wrapped = seal(space_key, self._random(NONCE_BYTES), self._random(KEY_BYTES), where)
                self._db.execute(
                    "INSERT OR IGNORE INTO search_keys (space_id, wrapped, created_at) "
                    "VALUES (?, ?, ?)",
                    (space_id, wrapped, self._clock().isoformat()),
                )
                row = self._db.execute(
                    "SELECT wrapped FROM search_keys WHERE space_id = ?", (space_id,)
                ).fetchone()
            try:
                key = open_sealed(space_key, row[0], where)
            except SealError as exc:
                raise KeyStoreError(
                    f"the search key of {space_id} does not open with its space key: {exc}"
                ) from exc
            self._search_keys[space_id] = key
            return key

    # --- data keys -------------------------------------------------------------------

    def create_data_key(self, space_id: str) -> tuple[str, bytes]:
        batch = self.batch()
        key_id, dek = batch.create_data_key(space_id)
        batch.write()
        return key_id, dek

    def batch(self) -> KeyBatch:
        return KeyBatch(self)

    def _wrap_new(self, space_id: str) -> tuple[str, bytes, tuple[str, str, bytes, str]]:
        """A fresh DEK: ``(key_id, dek, the data_keys row holding it wrapped)``."""
        with self._lock:
            space_key = self._space_key(space_id)
        key_id = make_id("key", self._random(15))
        dek = self._random(KEY_BYTES)
        wrapped = seal(
            space_key, self._random(NONCE_BYTES), dek, binding(space_id, "dek", key_id, 1)
        )
        return key_id, dek, (key_id, space_id, wrapped, self._clock().isoformat())

    def _insert(self, rows: list[tuple[str, str, bytes, str]]) -> None:
        if not rows:
            return
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(
                    "INSERT INTO data_keys (key_id, space_id, wrapped, created_at) "
                    "VALUES (?, ?, ?, ?)",
                    rows,
                )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def data_key(self, space_id: str, key_id: str) -> bytes | None:
        with self._lock:
            row = self._db.execute(
                "SELECT wrapped FROM data_keys WHERE key_id = ? AND space_id = ?",
                (key_id, space_id),
            ).fetchone()
            return None if row is None else self._unwrap_dek(space_id, key_id, row[0])

    def _unwrap_dek(self, space_id: str, key_id: str, wrapped: bytes) -> bytes:
        """A data key opened with its space's key; ``KeyStoreError`` naming it if it won't."""
        try:
            return open_sealed(
                self._space_key(space_id), wrapped, binding(space_id, "dek", key_id, 1)
            )
        except SealError as exc:
            raise KeyStoreError(f"data key {key_id} of {space_id} does not open: {exc}") from exc

    def data_keys(self, space_id: str, key_ids: Iterable[str]) -> dict[str, bytes]:
        """The plain DEKs of ``key_ids`` in ``space_id`` (the missing ones absent), read by
        IN-lists of at most 500 keys."""
        wanted = sorted(set(key_ids))
        out: dict[str, bytes] = {}
        with self._lock:
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                # ``+space_id``: by the primary key, never the space's index (which the
                # planner would pick, reading every key of the space for a few)
                rows = self._db.execute(
                    f"SELECT key_id, wrapped FROM data_keys "
                    f"WHERE key_id IN ({marks}) AND +space_id = ?",
                    [*chunk, space_id],
                ).fetchall()
                for key_id, wrapped in rows:
                    out[key_id] = self._unwrap_dek(space_id, key_id, wrapped)
        return out

    def existing(self, key_ids: Iterable[str]) -> set[str]:
        wanted = sorted(set(key_ids))
        found: set[str] = set()
        with self._lock:
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                found.update(
                    r[0]
                    for r in self._db.execute(
                        f"SELECT key_id FROM data_keys WHERE key_id IN ({marks})", chunk
                    )
                )
        return found

    def wrapped_keys_for(self, key_ids: Iterable[str]) -> dict[str, bytes]:
        """The raw wrapped blobs, for forensic checks that they later vanish from the file."""
        wanted = sorted(set(key_ids))
        out: dict[str, bytes] = {}
        with self._lock:
            for chunk in _chunks(wanted):
                marks = ",".join("?" * len(chunk))
                out.update(
                    (r[0], bytes(r[1]))
                    for r in self._db.execute(
                        f"SELECT key_id, wrapped FROM data_keys WHERE key_id IN ({marks})", chunk
                    )
                )
        return out

    def destroy(self, key_ids: Iterable[str]) -> None:
        """Delete the wrapped keys, then checkpoint and truncate the WAL. Idempotent."""
        doomed = sorted(set(key_ids))
        deletes = [
            (f"DELETE FROM data_keys WHERE key_id IN ({','.join('?' * len(chunk))})", chunk)
            for chunk in _chunks(doomed)
        ]
        with self._lock:
            self._delete_and_truncate(deletes, f"key(s) {', '.join(doomed[:5])}")

    def destroy_space(self, space_id: str) -> None:
        """Delete every key of ``space_id`` (DEKs, search key, space key), then
        checkpoint and truncate the WAL, and drop its keys from the caches. Idempotent."""
        deletes = [
            (f"DELETE FROM {table} WHERE space_id = ?", [space_id])
            for table in ("data_keys", "search_keys", "space_keys")
        ]
        with self._lock:
            self._space_keys.pop(space_id, None)
            self._search_keys.pop(space_id, None)
            self._delete_and_truncate(deletes, f"the keys of space {space_id}")

    def _delete_and_truncate(self, deletes: list[tuple[str, list[str]]], what: str) -> None:
        """Run ``deletes`` in one transaction (under the lock), then truncate the WAL so no
        old copy of a deleted key stays in it; ``KeyStoreError`` naming ``what`` if a
        reader holds the WAL (the keys are deleted; the next sweep truncates)."""
        if deletes:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for statement, params in deletes:
                    self._db.execute(statement, params)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        busy, _, _ = self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if busy:
            raise KeyStoreError(
                f"{self.path}: the WAL could not be truncated (another reader holds it); "
                f"{what} are deleted but may linger in the WAL until the next sweep"
            )

    def close(self) -> None:
        with self._lock:
            self._space_keys.clear()
            self._search_keys.clear()
            self._db.close()


class KeyBatch:
    """The data keys one push creates and reads, written in one key-store transaction.

    Lives for one push call only (its plain DEKs are dropped with it). ``write`` must
    run before the record store commits the rows that name the keys; a batch never
    written (the push failed) leaves no key behind. It never decides whether a key is
    forgotten: ``cloud.vault`` asks the record store before every use.
    """

    def __init__(self, store: SqliteKeyStore) -> None:
        self._store = store
        self._rows: list[tuple[str, str, bytes, str]] = []
        self._deks: dict[tuple[str, str], bytes] = {}  # (space, key id) -> DEK, this push
        self._index_keys: dict[str, bytes] = {}

    def create_data_key(self, space_id: str) -> tuple[str, bytes]:
        key_id, dek, row = self._store._wrap_new(space_id)
        self._rows.append(row)
        self._deks[space_id, key_id] = dek
        return key_id, dek

    def data_key(self, space_id: str, key_id: str) -> bytes | None:
        dek = self._deks.get((space_id, key_id))
        if dek is None:
            dek = self._store.data_key(space_id, key_id)
            if dek is not None:
                self._deks[space_id, key_id] = dek
        return dek

    def data_keys(self, space_id: str, key_ids: Iterable[str]) -> dict[str, bytes]:
        wanted = set(key_ids)
        out = {k: self._deks[space_id, k] for k in wanted if (space_id, k) in self._deks}
        read = self._store.data_keys(space_id, wanted - out.keys())
        for key_id, dek in read.items():
            self._deks[space_id, key_id] = dek
        return out | read

    def index_key(self, space_id: str) -> bytes:
        key = self._index_keys.get(space_id)
        if key is None:
            key = self._index_keys[space_id] = self._store.index_key(space_id)
        return key

    def search_key(self, space_id: str) -> bytes:
        return self._store.search_key(space_id)

    def write(self) -> None:
        """Store the keys created so far, all in one transaction."""
        rows, self._rows = self._rows, []
        self._store._insert(rows)


def _chunks(items: list[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def open_key_store(
    path: Path,
    random_bytes: Callable[[int], bytes],
    clock: Callable[[], datetime],
    master_key: bytes | None = None,
) -> SqliteKeyStore:
    return SqliteKeyStore(
        path, load_master_key(path, random_bytes, master_key), random_bytes, clock
    )
