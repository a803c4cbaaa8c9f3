"""The sealed words of a batch of queued ops, read set-at-a-time (``device.sync_push``).

Invariants:
- What an op gets is exactly what ``store.open_episode`` / ``store.open_version`` give
  for the row it names: the same row, opened with its own data key under the same
  binding; a row that is gone is ``None`` (the caller names the op), a row whose key is
  gone raises the same ``LookupError``, a tampered one the same ``SealError``.
- A handful of IN-list statements per batch, whatever its size: the episodes with their
  keys, the record versions with theirs. Reading never writes, and nothing read is kept
  beyond the batch (the opened words go into the request, then are dropped).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from device import store
from device.db import Database
from protocol.model import EpisodeContent, RecordContent

CHUNK = 400  # items per IN list (a version binds two variables)

_EPISODES = (
    "SELECT e.episode_id, e.bound_space, e.sealed, k.dek FROM episodes e "
    "LEFT JOIN data_keys k ON k.key_id = e.key_id WHERE e.episode_id IN ({marks})"
)
_VERSIONS = (
    "SELECT v.record_id, v.version, v.bound_space, v.sealed, k.dek FROM record_versions v "
    "LEFT JOIN data_keys k ON k.key_id = v.key_id "
    "WHERE (v.record_id, v.version) IN (VALUES {marks})"
)
_EPISODE_KINDS = frozenset({"add_episode"})
_VERSION_KINDS = frozenset({"remember", "correct", "revise_rule", "infer", "consolidate"})


def _chunks(items: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), CHUNK):
        yield items[start : start + CHUNK]


def version_of(row: Any) -> int:
    """The version a queued op names (an op queued without one names the first)."""
    return int(row["version"] or 1)


class SealedRows:
    """The episode and version rows the queued ``rows`` name, each with its key."""

    def __init__(self, db: Database, rows: Sequence[Any]) -> None:
        episode_ids = sorted({r["episode_id"] for r in rows if r["kind"] in _EPISODE_KINDS})
        versions = sorted(
            {(r["record_id"], version_of(r)) for r in rows if r["kind"] in _VERSION_KINDS}
        )
        self._episodes: dict[str, Any] = {}
        for part in _chunks(episode_ids):
            sql = _EPISODES.format(marks=",".join("?" * len(part)))
            self._episodes.update((r[0], r) for r in db.all(sql, list(part)))
        self._versions: dict[tuple[str, int], Any] = {}
        for vpart in _chunks(versions):
            params = [value for pair in vpart for value in pair]
            sql = _VERSIONS.format(marks=",".join("(?, ?)" for _ in vpart))
            self._versions.update(((r[0], int(r[1])), r) for r in db.all(sql, params))

    def episode(self, episode_id: str) -> EpisodeContent | None:
        """The episode opened by the store's own ``open_episode_with``; None: not held."""
        row = self._episodes.get(episode_id)
        if row is None:
            return None
        return store.open_episode_with(row, None if row["dek"] is None else bytes(row["dek"]))

    def version(self, record_id: str, version: int) -> RecordContent | None:
        """The version opened by the store's own ``open_version_with``; None: not held."""
        row = self._versions.get((record_id, version))
        if row is None:
            return None
        return store.open_version_with(row, None if row["dek"] is None else bytes(row["dek"]))
