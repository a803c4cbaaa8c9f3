"""The records room (``cloud.store.rooms.records``): records' state rows, their versions,
episodes, the record history log, artifacts and projects.

Invariants:
- Every query names the space.
- ``record_versions``, ``episodes``, ``artifacts`` and ``record_events`` are only ever
  inserted (triggers refuse the rest); a record's *state* row is the one thing that
  changes, and only in the columns ``_STATE_COLUMNS`` names.
- Plain columns are ids, times, states and key ids; everything descriptive is sealed.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    insert,
    select,
    update,
)

from cloud.errors import StoreError
from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store import statements_pull as qp
from cloud.store.base import (
    ArtifactRow,
    EpisodeRow,
    ProjectRow,
    RecordEventRow,
    RecordRow,
    VersionRow,
)
from cloud.store.migration_steps import LEGACY_EPISTEMIC_PLACEHOLDER
from cloud.store.sql_lineage import _CHUNK, chunks

_chunks = chunks


class RecordQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection

    _RECORD_COLS = q.RECORD_COLS

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

    _VERSION_COLS = (
        t.record_versions.c.record_id,
        t.record_versions.c.version,
        t.record_versions.c.supersedes,
        t.record_versions.c.recorded_at,
        t.record_versions.c.key_id,
        t.record_versions.c.sealed_content,
    )

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

    def version_rows(
        self, space_id: str, keys: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], VersionRow]:
        """The versions named by ``(record_id, version)`` pairs (the missing ones absent),
        by row-value IN-lists of half a chunk (two bound parameters a pair)."""
        wanted = sorted(set(keys))
        out: dict[tuple[str, int], VersionRow] = {}
        half = _CHUNK // 2
        for start in range(0, len(wanted), half):
            rows = self.conn.execute(
                qp.VERSIONS_AT, {"sp": space_id, "ids": wanted[start : start + half]}
            )
            for r in rows:
                row = self._version_row(r)
                out[row.record_id, row.version] = row
        return out

    def versions(self, space_id: str, record_id: str) -> list[VersionRow]:
        c = t.record_versions.c
        rows = self.conn.execute(
            select(*self._VERSION_COLS)
            .where(c.space_id == space_id, c.record_id == record_id)
            .order_by(c.version)
        )
        return [self._version_row(r) for r in rows]

    def mark_forgotten(self, space_id: str, record_id: str, at: datetime, seq: int) -> None:
        """The record becomes a skeleton at feed seq ``seq``: the forget is its last state
        change (``state_seq``), so whatever reads the records changed since a seq sees it."""
        c = t.records.c
        self.conn.execute(
            update(t.records)
            .where(c.space_id == space_id, c.record_id == record_id)
            .values(
                lifecycle="permanently_forgotten",
                forgotten_at=at,
                state_seq=seq,
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

    def all_episode_ids(self, space_id: str) -> list[str]:
        c = t.episodes.c
        rows = self.conn.execute(
            select(c.episode_id).where(c.space_id == space_id).order_by(c.episode_id)
        )
        return [r[0] for r in rows]

    def add_record_event(self, space_id: str, row: RecordEventRow) -> None:
        self.conn.execute(
            q.INSERT_RECORD_EVENT,
            {
                "space_id": space_id,
                "record_id": row.record_id,
                "seq": row.seq,
                "at": row.at,
                "kind": row.kind,
                "lifecycle": row.lifecycle,
                "version": row.version,
            },
        )

    def record_events(self, space_id: str, record_id: str) -> list[RecordEventRow]:
        c = t.record_events.c
        rows = self.conn.execute(
            select(c.record_id, c.seq, c.at, c.kind, c.lifecycle, c.version)
            .where(c.space_id == space_id, c.record_id == record_id)
            .order_by(c.seq)
        )
        return [RecordEventRow(r[0], int(r[1]), r[2], r[3], r[4], r[5]) for r in rows]

    def insert_artifact(self, space_id: str, row: ArtifactRow) -> None:
        self.conn.execute(
            insert(t.artifacts).values(
                space_id=space_id,
                artifact_id=row.artifact_id,
                created_at=row.created_at,
                key_id=row.key_id,
                sealed_content=row.sealed_content,
            )
        )

    def artifacts(self, space_id: str, artifact_ids: Iterable[str]) -> dict[str, ArtifactRow]:
        c = t.artifacts.c
        out: dict[str, ArtifactRow] = {}
        for chunk in chunks(sorted(set(artifact_ids))):
            rows = self.conn.execute(
                select(c.artifact_id, c.created_at, c.key_id, c.sealed_content).where(
                    c.space_id == space_id, c.artifact_id.in_(chunk)
                )
            )
            for r in rows:
                out[r[0]] = ArtifactRow(r[0], r[1], r[2], bytes(r[3]))
        return out

    def projects(self, space_id: str) -> dict[str, ProjectRow]:
        rows = self.conn.execute(q.PROJECTS, {"sp": space_id})
        return {r[0]: ProjectRow(r[0], bool(r[1]), r[2], int(r[3])) for r in rows}

    def set_project(self, space_id: str, row: ProjectRow) -> None:
        c = t.projects.c
        values = {"is_open": row.open, "updated_at": row.updated_at, "seq": row.seq}
        done = self.conn.execute(
            update(t.projects).where(c.space_id == space_id, c.name == row.name).values(**values)
        )
        if done.rowcount == 0:
            self.conn.execute(insert(t.projects).values(space_id=space_id, name=row.name, **values))
