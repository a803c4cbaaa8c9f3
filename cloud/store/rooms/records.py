"""The records room of the record store: records' state rows, their sealed versions,
episodes, the record history log, artifacts and projects.

Implemented by ``cloud/store/sql_records.py`` ``RecordQueries``;
``cloud.store.base.StoreSession`` is every room at once.

Invariants:
- Every method names the space it reads or writes (except where it says so).
- Versions, episodes, artifacts and history events are only ever inserted; a record's
  *state* row is the one thing that changes.
- A forgotten record keeps a skeleton: its id, ``permanently_forgotten`` and when.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Iterable
    from datetime import datetime

    from cloud.store.base import (
        ArtifactRow,
        EpisodeRow,
        ProjectRow,
        RecordEventRow,
        RecordRow,
        VersionRow,
    )


class RecordsRoom(Protocol):
    """Records' state rows, their sealed versions, episodes, the record history log, artifacts."""

    def record(self, space_id: str, record_id: str) -> RecordRow | None: ...
    def records(self, space_id: str, record_ids: Iterable[str]) -> dict[str, RecordRow]: ...
    def live_records(self, space_id: str) -> list[RecordRow]: ...
    def insert_record(
        self,
        space_id: str,
        record_id: str,
        lifecycle: str,
        version: int,
        at: datetime,
        created_seq: int,
    ) -> None: ...
    def set_record_state(self, space_id: str, record_id: str, **values: object) -> None: ...
    def insert_version(self, space_id: str, row: VersionRow) -> None: ...
    def version_authors(
        self, space_id: str, record_id: str, after: int
    ) -> list[tuple[int, str | None]]:
        """``(version, made_by)`` of the record's versions after ``after``, in order."""
        ...

    def version(self, space_id: str, record_id: str, version: int) -> VersionRow | None: ...
    def versions(self, space_id: str, record_id: str) -> list[VersionRow]: ...
    def version_rows(
        self, space_id: str, keys: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], VersionRow]:
        """The versions named by ``(record_id, version)`` pairs; the missing ones absent."""
        ...

    def mark_forgotten(self, space_id: str, record_id: str, at: datetime, seq: int) -> None: ...
    def insert_episode(self, space_id: str, row: EpisodeRow) -> None: ...
    def episodes(self, space_id: str, episode_ids: Iterable[str]) -> dict[str, EpisodeRow]: ...
    def all_episode_ids(self, space_id: str) -> list[str]: ...
    def add_record_event(self, space_id: str, row: RecordEventRow) -> None: ...
    def record_events(self, space_id: str, record_id: str) -> list[RecordEventRow]: ...
    def insert_artifact(self, space_id: str, row: ArtifactRow) -> None: ...
    def artifacts(self, space_id: str, artifact_ids: Iterable[str]) -> dict[str, ArtifactRow]: ...
    def projects(self, space_id: str) -> dict[str, ProjectRow]: ...
    def set_project(self, space_id: str, row: ProjectRow) -> None: ...
