"""One pulled page's plain rows, read and written set-at-a-time (issue 21 item 2).

At the page's start the local state of every item the page names (records' lifecycles,
versions held, episodes held or forgotten, data keys held) is read with IN-list queries;
the common changes (a new record's version, a record's state, a new episode) are decided
against that and their rows held here, then written with one ``executemany`` per table.

Invariants:
- Read-your-writes within a page: a decision sees every earlier change of the page
  (held rows update the cache as they are queued); a record inserted by its version
  change and stated by its record_state change in the same page is ONE inserted row
  with its final fields, the same row an INSERT then an UPDATE leaves.
- ``flush`` writes the queued rows in the order a per-change apply would have, table by
  table (keys, records, state updates, versions, episodes, events, derivations), so
  rowids, event sequence numbers and foreign keys come out the same. It runs before
  anything reads the tables outside this cache (the rare per-row paths, the page's
  derived rows at its end) and before the cursor moves, inside the page's transaction:
  a page that fails leaves nothing.
- ``forget`` drops the cache after a rare path (a shred, a provisional move, a subset
  change) that may have changed what it holds; later reads go to the store, row by row.
- Every write to a record's row or versions first tells the change feed
  (``device.changes.touch``), at the point the per-change path would have written it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from device import catalog, changes, store
from device.db import Database
from device.sync_state import SyncState
from protocol.messages import (
    AnyChange,
    EpisodeChange,
    RecordStateChange,
    RecordVersionChange,
)

_CHUNK = 500  # ids per IN-list
_NO_CONFLICTS = json.dumps([])  # the records table's default conflicts_with


def _chunks(ids: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(ids), _CHUNK):
        yield list(ids[start : start + _CHUNK])


class PageRows:
    """The page's cache of local state and its queued rows (see the module docstring)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._lifecycle: dict[str, str | None] = {}  # record -> lifecycle (None: not held)
        self._versions: dict[str, set[int]] = {}  # record -> versions held
        self._episodes: dict[str, tuple[bool, bool]] = {}  # episode -> (forgotten, held)
        self._keys: dict[str, bytes | None] = {}  # key -> bytes held (None: not held)
        self._new_keys: list[tuple[str, bytes, str]] = []
        self._new_records: dict[str, list[Any]] = {}
        self._states: list[tuple[Any, ...]] = []
        self._new_versions: list[tuple[Any, ...]] = []
        self._new_episodes: list[tuple[Any, ...]] = []
        self._events: list[tuple[Any, ...]] = []
        self._derivations: list[tuple[str, str, str]] = []

    # --- reading ---------------------------------------------------------------------

    def load(self, page_changes: Sequence[AnyChange]) -> None:
        """Read the local state of every record, episode and key the page names."""
        records: dict[str, None] = {}
        episodes: dict[str, None] = {}
        keys: dict[str, None] = {}
        for change in page_changes:
            if isinstance(change, RecordVersionChange | RecordStateChange):
                records[change.record_id] = None
            if isinstance(change, RecordVersionChange):
                keys[change.key_id] = None
            elif isinstance(change, EpisodeChange):
                episodes[change.episode_id] = None
                keys[change.key_id] = None
        for part in _chunks(list(records)):
            marks = catalog.marks(part)
            self._lifecycle.update(dict.fromkeys(part))
            for row in self.db.all(
                f"SELECT record_id, lifecycle FROM records WHERE record_id IN ({marks})", part
            ):
                self._lifecycle[row[0]] = row[1]
            self._versions.update({record_id: set() for record_id in part})
            for row in self.db.all(
                f"SELECT record_id, version FROM record_versions WHERE record_id IN ({marks})",
                part,
            ):
                self._versions[row[0]].add(int(row[1]))
        for part in _chunks(list(episodes)):
            marks = catalog.marks(part)
            held = self._ids(f"SELECT episode_id FROM episodes WHERE episode_id IN ({marks})", part)
            gone = self._ids(
                f"SELECT episode_id FROM forgotten_episodes WHERE episode_id IN ({marks})", part
            )
            self._episodes.update({e: (e in gone, e in held) for e in part})
        for part in _chunks(list(keys)):
            self._keys.update(dict.fromkeys(part))
            for row in self.db.all(
                f"SELECT key_id, dek FROM data_keys WHERE key_id IN ({catalog.marks(part)})",
                part,
            ):
                self._keys[row[0]] = bytes(row[1])

    def _ids(self, sql: str, params: list[str]) -> set[str]:
        return {row[0] for row in self.db.all(sql, params)}

    def lifecycle(self, record_id: str) -> str | None:
        """The record's lifecycle here, None when its row is not held."""
        if record_id not in self._lifecycle:
            row = store.record_row(self.db, record_id)
            self._lifecycle[record_id] = None if row is None else row["lifecycle"]
        return self._lifecycle[record_id]

    def version_held(self, record_id: str, version: int) -> bool:
        if record_id not in self._versions:
            rows = self.db.all(
                "SELECT version FROM record_versions WHERE record_id = ?", (record_id,)
            )
            self._versions[record_id] = {int(row[0]) for row in rows}
        return version in self._versions[record_id]

    def episode_known(self, episode_id: str) -> tuple[bool, bool]:
        """(forgotten here, held here), as ``store.episode_known``."""
        if episode_id not in self._episodes:
            self._episodes[episode_id] = store.episode_known(self.db, episode_id)
        return self._episodes[episode_id]

    def forget(self) -> None:
        """A rare path may have changed anything: read the store again from now on."""
        self.flush()
        self._lifecycle.clear()
        self._versions.clear()
        self._episodes.clear()
        self._keys.clear()

    # --- queueing ----------------------------------------------------------------------

    def put_key_once(self, key_id: str, dek: bytes) -> bytes | None:
        """As ``store.put_key_once`` (origin ``cloud``): the bytes already held, or None
        when the key is queued now."""
        if key_id not in self._keys:
            self._keys[key_id] = store.get_key(self.db, key_id)
        held = self._keys[key_id]
        if held is None:
            self._keys[key_id] = dek
            self._new_keys.append((key_id, dek, "cloud"))
        return held

    def insert_record(self, record_id: str, lifecycle: str, current_version: int | None) -> None:
        """A new synced record row (its usage and flags unset until a state sets them)."""
        changes.touch(self.db, record_id)
        self._lifecycle[record_id] = lifecycle
        self._versions.setdefault(record_id, set())
        self._new_records[record_id] = [
            record_id,
            lifecycle,
            current_version,
            SyncState.SYNCED,
            None,
            None,
            None,
            None,
            _NO_CONFLICTS,
        ]

    def set_pulled_state(self, row: tuple[Any, ...]) -> None:
        """Queue ``store.SET_PULLED_STATE`` with ``row`` (``store.pulled_state_row``); a
        record inserted in this page and not yet written takes the state into its one
        INSERT instead."""
        lifecycle, synced, current_version, area, project, superseded, conflicts_json, record_id = (
            row
        )
        changes.touch(self.db, record_id)
        self._lifecycle[record_id] = lifecycle
        new = self._new_records.get(record_id)
        if new is None:
            self._states.append(row)
            return
        new[1:] = [
            lifecycle,
            current_version,
            synced,
            None,  # refusal_reason
            area,
            project,
            superseded,
            conflicts_json,
        ]

    def insert_version(self, record_id: str, version: int, row: tuple[Any, ...]) -> None:
        """``row`` is (supersedes, epistemic_state, recorded_at, bound_space, key_id,
        sealed), as ``store.insert_version``."""
        changes.touch(self.db, record_id)
        self.version_held(record_id, version)  # the versions held are known before adding
        self._versions[record_id].add(version)
        self._new_versions.append((record_id, version, *row))

    def add_derivations(self, child_id: str, parents: Iterable[str]) -> None:
        """As ``catalog.add_derivations`` for a record."""
        self._derivations.extend((p, "record", child_id) for p in sorted(set(parents)))

    def insert_episode(self, episode_id: str, row: tuple[Any, ...]) -> None:
        """``row`` is (conversation_id, typed_at, bound_space, key_id, sealed, sync_state)."""
        self._episodes[episode_id] = (False, True)
        self._new_episodes.append((episode_id, *row))

    def log_event(self, record_id: str, at: str, lifecycle: str, version: int | None) -> None:
        self._events.append((record_id, at, lifecycle, version))

    # --- writing -------------------------------------------------------------------------

    def flush(self) -> None:
        """Write every queued row, one statement per table, in the per-change order."""
        if not self.db.in_transaction:
            raise RuntimeError("a page's rows are written only inside its transaction")
        writes: list[tuple[str, list[Any]]] = [
            ("INSERT INTO data_keys (key_id, dek, origin) VALUES (?, ?, ?)", self._new_keys),
            (
                "INSERT INTO records (record_id, lifecycle, current_version, sync_state, "
                "refusal_reason, usage_area, usage_project, superseded_by, conflicts_with) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                list(self._new_records.values()),
            ),
            (store.SET_PULLED_STATE, self._states),
            (
                "INSERT INTO record_versions (record_id, version, supersedes, "
                "epistemic_state, recorded_at, bound_space, key_id, sealed) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                self._new_versions,
            ),
            (
                "INSERT INTO episodes (episode_id, conversation_id, typed_at, bound_space, "
                "key_id, sealed, sync_state) VALUES (?, ?, ?, ?, ?, ?, ?)",
                self._new_episodes,
            ),
            (
                "INSERT INTO record_events (record_id, at, lifecycle, version) VALUES (?, ?, ?, ?)",
                self._events,
            ),
            (
                "INSERT OR IGNORE INTO derivations (parent_id, child_kind, child_id) "
                "VALUES (?, ?, ?)",
                self._derivations,
            ),
        ]
        for sql, rows in writes:
            if rows:
                self.db.executemany(sql, rows)
        self._new_keys = []
        self._new_records = {}
        self._states = []
        self._new_versions = []
        self._new_episodes = []
        self._events = []
        self._derivations = []
