"""A per-process cache of opened record versions, for retrieval's batch reads.

Invariants:
- An entry is keyed by (database file, record id, version, key id) and holds the
  opened ``RecordContent`` of exactly that sealed version under exactly that key.
- Every path that destroys content or keys (``device.shred``: forget, pulled key
  destruction, eviction, retiring a provisional version, shredding episodes and
  artifacts, wiping) drops the entries it touches in the same call, before its
  transaction commits; a wipe drops the whole database's entries.
- An entry is never trusted alone: a reader (``device.batch``) uses it only when the
  version row and its data key still exist in the database under the same key id,
  and drops it when they do not. So content forgotten by another connection (another
  agent on the same file in this process) can never be returned from it either.
- At most one entry per record (the version retrieval last opened); bounded (least
  recently used out first); nothing is ever written to disk.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

from protocol.model import RecordContent

CAPACITY = 10_000  # opened versions kept per process (~6.5 KB each, so ~65 MB at most)

Key = tuple[str, str, int, str]  # database, record id, version, key id

_lock = threading.Lock()
_entries: OrderedDict[Key, RecordContent] = OrderedDict()
_by_record: dict[tuple[str, str], set[Key]] = {}
_by_key: dict[tuple[str, str], set[Key]] = {}


@functools.lru_cache(maxsize=256)
def _resolved(path: str) -> str:
    return str(Path(path).resolve())


def database_key(path: Path | str) -> str:
    """How a database file is named in the cache (its resolved path; a key already
    resolved names itself)."""
    return _resolved(str(path))


def get(key: Key) -> RecordContent | None:
    with _lock:
        content = _entries.get(key)
        if content is not None:
            _entries.move_to_end(key)
        return content


def put(key: Key, content: RecordContent) -> None:
    with _lock:
        if key in _entries:
            _entries.move_to_end(key)
            return
        for older in list(_by_record.get((key[0], key[1]), ())):
            _drop(older)  # one opened version per record: the current one
        _entries[key] = content
        _by_record.setdefault((key[0], key[1]), set()).add(key)
        _by_key.setdefault((key[0], key[3]), set()).add(key)
        while len(_entries) > CAPACITY:
            _drop(next(iter(_entries)))


def _drop(key: Key) -> None:
    _entries.pop(key, None)
    for index, sub in ((_by_record, (key[0], key[1])), (_by_key, (key[0], key[3]))):
        keys = index.get(sub)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del index[sub]


def discard(key: Key) -> None:
    with _lock:
        _drop(key)


def forget_records(path: Path | str, record_ids: Iterable[str]) -> None:
    """Drop every opened version of these records of the database at ``path``."""
    db = database_key(path)
    with _lock:
        for record_id in record_ids:
            for key in list(_by_record.get((db, record_id), ())):
                _drop(key)


def forget_keys(path: Path | str, key_ids: Iterable[str]) -> None:
    """Drop every opened version sealed under these data keys."""
    db = database_key(path)
    with _lock:
        for key_id in key_ids:
            for key in list(_by_key.get((db, key_id), ())):
                _drop(key)


def forget_database(path: Path | str) -> None:
    """Drop every entry of the database at ``path`` (a wipe)."""
    db = database_key(path)
    with _lock:
        for key in [k for k in _entries if k[0] == db]:
            _drop(key)


def held(path: Path | str) -> set[Key]:
    """The keys cached for a database (for tests and the forensic check)."""
    db = database_key(path)
    with _lock:
        return {k for k in _entries if k[0] == db}


def contents(path: Path | str) -> list[RecordContent]:
    """The opened contents cached for a database (for tests and the forensic check)."""
    db = database_key(path)
    with _lock:
        return [c for k, c in _entries.items() if k[0] == db]
