"""The pull's per-row change reader as it was before issue 21 (one or more SELECTs per
feed row), kept as the oracle of ``tests/cloud/test_pull_batch.py``: the page-at-a-time
``cloud.changes.ChangeReader`` must answer exactly what this answers.

Invariants: the code below is the product's reader of commit d106f15, unchanged but for
its name and a no-op ``load`` (so it can stand in for the new reader in a pull).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from nacl.public import PublicKey, SealedBox

from cloud.errors import StoreError
from cloud.store.base import ChangeRow, StoreSession
from cloud.store.sql_lineage import EPISODES_ONLY
from cloud.vault import Vault
from protocol.messages import (
    AnyChange,
    ArtifactChange,
    EpisodeChange,
    KeyDestruction,
    ProjectChange,
    RecordStateChange,
    RecordVersionChange,
)
from protocol.model import LifecycleState

FORGOTTEN = LifecycleState.FORGOTTEN.value


class PerRowReader:
    """Reads changes for one device inside the pull's transaction, row by row."""

    def __init__(
        self, s: StoreSession, vault: Vault, space_id: str, box: SealedBox[PublicKey]
    ) -> None:
        self.s = s
        self.vault = vault
        self.space_id = space_id
        self.box = box

    def load(self, rows: Iterable[ChangeRow]) -> None:
        """Reads nothing ahead: every ``read`` reads its own rows."""

    def read_page(self, rows: Sequence[ChangeRow]) -> list[AnyChange | None]:
        return [self.read(row) for row in rows]

    def read(self, row: ChangeRow) -> AnyChange | None:
        """The wire change for ``row``, or None when it must not (or need not) be sent."""
        reader = {
            "record_version": self._version,
            "record_state": self._state,
            "episode": self._episode,
            "artifact": self._artifact,
            "project": self._project,
            "key_destruction": self._destruction,
        }.get(row.kind)
        if reader is None:
            raise StoreError(f"change {row.seq} of {self.space_id} has unknown kind {row.kind!r}")
        return reader(row)

    def _missing(self, row: ChangeRow, what: str) -> StoreError:
        return StoreError(f"change {row.seq} of {self.space_id} names a missing {what}")

    def _version(self, row: ChangeRow) -> RecordVersionChange | None:
        assert row.record_id is not None and row.version is not None
        record = self.s.record(self.space_id, row.record_id)
        version = self.s.version(self.space_id, row.record_id, row.version)
        if record is None or version is None:
            raise self._missing(row, f"record version {row.record_id} v{row.version}")
        if record.lifecycle == FORGOTTEN:
            return None
        dek = self.vault.data_key(self.s, self.space_id, version.key_id)
        if dek is None:
            return None
        return RecordVersionChange(
            seq=row.seq,
            record_id=version.record_id,
            version=version.version,
            supersedes=version.supersedes,
            recorded_at=version.recorded_at,
            key_id=version.key_id,
            sealed_content=version.sealed_content,
            sealed_key=self.box.encrypt(dek),
        )

    def _state(self, row: ChangeRow) -> RecordStateChange | None:
        assert row.record_id is not None
        record = self.s.record(self.space_id, row.record_id)
        if record is None:
            raise self._missing(row, f"record {row.record_id}")
        if record.state_seq != row.seq:
            return None  # a later record_state change carries the state
        return self.state_now(row)

    def state_now(self, row: ChangeRow) -> RecordStateChange | None:
        """The record's whole current state as of ``row`` (None once it is forgotten)."""
        assert row.record_id is not None
        record = self.s.record(self.space_id, row.record_id)
        if record is None:
            raise self._missing(row, f"record {row.record_id}")
        if record.lifecycle == FORGOTTEN:
            return None
        return RecordStateChange(
            seq=row.seq,
            record_id=record.record_id,
            lifecycle_state=LifecycleState(record.lifecycle),
            current_version=record.current_version,
            usage_restriction=record.restriction(),
            superseded_by_record=record.superseded_by,
            conflicts_with=record.conflict_ids(),
            at=row.at,
        )

    def _episode(self, row: ChangeRow) -> EpisodeChange | None:
        assert row.episode_id is not None
        episode = self.s.episodes(self.space_id, [row.episode_id]).get(row.episode_id)
        if episode is None:
            raise self._missing(row, f"episode {row.episode_id}")
        dek = self.vault.data_key(self.s, self.space_id, episode.key_id)
        if dek is None:
            return None
        return EpisodeChange(
            seq=row.seq,
            episode_id=episode.episode_id,
            typed_at=episode.typed_at,
            key_id=episode.key_id,
            sealed_content=episode.sealed_content,
            sealed_key=self.box.encrypt(dek),
        )

    def _artifact(self, row: ChangeRow) -> ArtifactChange | None:
        assert row.artifact_id is not None
        artifact = self.s.artifacts(self.space_id, [row.artifact_id]).get(row.artifact_id)
        if artifact is None:
            raise self._missing(row, f"artifact {row.artifact_id}")
        dek = self.vault.data_key(self.s, self.space_id, artifact.key_id)
        if dek is None:
            return None
        return ArtifactChange(
            seq=row.seq,
            artifact_id=artifact.artifact_id,
            derived_from=self.s.parents_of(self.space_id, "artifact", artifact.artifact_id),
            created_at=artifact.created_at,
            key_id=artifact.key_id,
            sealed_content=artifact.sealed_content,
            sealed_key=self.box.encrypt(dek),
        )

    def _project(self, row: ChangeRow) -> ProjectChange | None:
        assert row.project is not None
        project = self.s.projects(self.space_id).get(row.project)
        if project is None:
            raise self._missing(row, f"project {row.project!r}")
        if project.seq != row.seq:
            return None  # a later project change carries the state
        return ProjectChange(seq=row.seq, project=project.name, open=project.open, at=row.at)

    def _destruction(self, row: ChangeRow) -> KeyDestruction | None:
        assert row.event_id is not None
        ev = self.s.forget_event(self.space_id, row.event_id)
        if ev is None:
            raise self._missing(row, f"forget event {row.event_id}")
        return KeyDestruction(
            seq=row.seq,
            event_id=ev.event_id,
            record_id=None if ev.record_id == EPISODES_ONLY else ev.record_id,
            key_ids=[k.key_id for k in ev.keys],
            episode_ids=sorted({k.episode_id for k in ev.keys if k.episode_id}),
            artifact_ids=sorted({k.artifact_id for k in ev.keys if k.artifact_id}),
            destroyed_at=ev.forgotten_at,
        )
