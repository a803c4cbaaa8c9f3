"""The export room (``cloud.store.rooms.export``): keyset pages of a space's records and
episodes, the version chains of one page, the devices' history, and the ``exports``
table.

Invariants:
- Every query names the space.
- Pages are keyset pages in id order (``id > after``, at most ``limit`` rows), so an
  export holds one page at a time however large the space is.
- The ``exports`` table holds ids, times and an outcome, never content or keys; an
  export id is started at most once per space (``start_export`` answers False after).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select, update

from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store.base import DeviceHistoryRow, EpisodeRow, ExportRow, RecordRow, VersionRow
from cloud.store.sql_lineage import chunks

FORGOTTEN = "permanently_forgotten"


class ExportQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection
    _dialect: str

    # provided by ``SqlSession`` (the one place rows become dataclasses)
    @staticmethod
    def _record_row(row: Any) -> RecordRow:
        raise NotImplementedError

    @staticmethod
    def _version_row(row: Any) -> VersionRow:
        raise NotImplementedError

    def records_page(
        self, space_id: str, after: str | None, limit: int, *, forgotten: bool | None = None
    ) -> list[RecordRow]:
        """Up to ``limit`` records with an id above ``after``, in id order; only the
        permanently forgotten ones (``forgotten=True``), only the others (False), or all."""
        c = t.records.c
        query = select(*q.RECORD_COLS).where(c.space_id == space_id)
        if after is not None:
            query = query.where(c.record_id > after)
        if forgotten is True:
            query = query.where(c.lifecycle == FORGOTTEN)
        elif forgotten is False:
            query = query.where(c.lifecycle != FORGOTTEN)
        rows = self.conn.execute(query.order_by(c.record_id).limit(limit))
        return [self._record_row(r) for r in rows]

    def versions_of(self, space_id: str, record_ids: Iterable[str]) -> dict[str, list[VersionRow]]:
        """Every version of each named record, oldest first (records without any: absent)."""
        c = t.record_versions.c
        cols = (c.record_id, c.version, c.supersedes, c.recorded_at, c.key_id, c.sealed_content)
        out: dict[str, list[VersionRow]] = {}
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(
                select(*cols)
                .where(c.space_id == space_id, c.record_id.in_(chunk))
                .order_by(c.record_id, c.version)
            )
            for r in rows:
                out.setdefault(r[0], []).append(self._version_row(r))
        return out

    def episodes_page(self, space_id: str, after: str | None, limit: int) -> list[EpisodeRow]:
        """Up to ``limit`` episodes with an id above ``after``, in id order."""
        c = t.episodes.c
        query = select(c.episode_id, c.typed_at, c.key_id, c.sealed_content).where(
            c.space_id == space_id
        )
        if after is not None:
            query = query.where(c.episode_id > after)
        rows = self.conn.execute(query.order_by(c.episode_id).limit(limit))
        return [EpisodeRow(r[0], r[1], r[2], bytes(r[3])) for r in rows]

    def device_history(self, space_id: str) -> list[DeviceHistoryRow]:
        """Every device ever enrolled in the space: names and times only (no credential
        hash, no public key, and not when it last reached the cloud: a liveness stamp
        that replays may move and nothing decides on)."""
        c = t.devices.c
        rows = self.conn.execute(
            select(c.device_id, c.name, c.enrolled_at, c.revoked_at)
            .where(c.space_id == space_id)
            .order_by(c.enrolled_at, c.device_id)
        )
        return [DeviceHistoryRow(r[0], r[1], r[2], r[3]) for r in rows]

    # --- the exports table (one export per id; the audit log) -----------------------

    def start_export(
        self,
        space_id: str,
        export_id: str,
        device_id: str,
        at: datetime,
        include_sensitive: bool,
    ) -> bool:
        """Record that ``export_id`` starts now; False (nothing written) if it already did.
        Call under the space lock, so two starts of one id cannot both win."""
        if self.export(space_id, export_id) is not None:
            return False
        self.conn.execute(
            insert(t.exports).values(
                space_id=space_id,
                export_id=export_id,
                device_id=device_id,
                started_at=at,
                include_sensitive=include_sensitive,
                outcome="streaming",
            )
        )
        return True

    def finish_export(self, space_id: str, export_id: str, at: datetime, outcome: str) -> None:
        c = t.exports.c
        self.conn.execute(
            update(t.exports)
            .where(c.space_id == space_id, c.export_id == export_id, c.finished_at.is_(None))
            .values(finished_at=at, outcome=outcome)
        )

    def export(self, space_id: str, export_id: str) -> ExportRow | None:
        c = t.exports.c
        row = self.conn.execute(
            select(
                c.export_id,
                c.device_id,
                c.started_at,
                c.finished_at,
                c.include_sensitive,
                c.outcome,
            ).where(c.space_id == space_id, c.export_id == export_id)
        ).first()
        if row is None:
            return None
        return ExportRow(row[0], row[1], row[2], row[3], bool(row[4]), row[5])
