"""Turning rows of the ``changes`` feed into the wire changes one device pulls, a page
at a time.

Invariants:
- Content whose key a forget names (committed) or that is gone from the key store is
  never sent; the key-destruction event stands for it. A forgotten record sends no
  version and no state: its skeleton arrives with the key-destruction event.
- A ``record_state`` (or ``project``) change carries the whole current state and is
  sent only at the record's (project's) latest state change, which comes after every
  version the state names, so a device never sees a state ahead of its content.
- Data keys leave the cloud only sealed to the pulling device's public key.
- A page is read set-at-a-time (issue 21): ``load`` reads what its rows name with one
  IN-list statement per kind of item (records, versions, episodes, artifacts, their
  parents, forget events, projects, data keys), chunked; ``read`` then builds each
  change from memory, in the caller's order, and a row naming a missing item raises
  only when that row is read, exactly as the per-row reads did
  (``tests/cloud/test_pull_batch.py`` holds them as the oracle).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from nacl.public import PublicKey, SealedBox

from cloud.errors import StoreError
from cloud.store.base import (
    ArtifactRow,
    ChangeRow,
    EpisodeRow,
    ForgetEventRow,
    ProjectRow,
    RecordRow,
    StoreSession,
    VersionRow,
)
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
KINDS = frozenset(
    {"record_version", "record_state", "episode", "artifact", "project", "key_destruction"}
)


@dataclass(slots=True)
class Loaded:
    """What one ``load`` read: the items its rows name, and their usable data keys."""

    rows: set[ChangeRow] = field(default_factory=set)
    records: dict[str, RecordRow] = field(default_factory=dict)
    versions: dict[tuple[str, int], VersionRow] = field(default_factory=dict)
    episodes: dict[str, EpisodeRow] = field(default_factory=dict)
    artifacts: dict[str, ArtifactRow] = field(default_factory=dict)
    parents: dict[str, list[str]] = field(default_factory=dict)
    events: dict[int, ForgetEventRow] = field(default_factory=dict)
    projects: dict[str, ProjectRow] = field(default_factory=dict)
    deks: dict[str, bytes] = field(default_factory=dict)  # never a forgotten one


class ChangeReader:
    """Reads changes for one device inside the pull's transaction."""

    def __init__(
        self, s: StoreSession, vault: Vault, space_id: str, box: SealedBox[PublicKey]
    ) -> None:
        self.s = s
        self.vault = vault
        self.space_id = space_id
        self.box = box
        self._loaded = Loaded()

    def load(self, rows: Iterable[ChangeRow]) -> None:
        """Read everything ``rows`` need, a statement per kind of item (and chunk).
        Replaces what an earlier ``load`` read."""
        rows = list(rows)
        s, sp = self.s, self.space_id
        got = Loaded(rows=set(rows))
        record_ids = {r.record_id for r in rows if r.record_id is not None}
        version_keys = {
            (r.record_id, r.version)
            for r in rows
            if r.kind == "record_version" and r.record_id is not None and r.version is not None
        }
        episode_ids = {r.episode_id for r in rows if r.kind == "episode" and r.episode_id}
        artifact_ids = {r.artifact_id for r in rows if r.kind == "artifact" and r.artifact_id}
        event_ids = {
            r.event_id for r in rows if r.kind == "key_destruction" and r.event_id is not None
        }
        if record_ids:
            got.records = s.records(sp, record_ids)
        if version_keys:
            got.versions = s.version_rows(sp, version_keys)
        if episode_ids:
            got.episodes = s.episodes(sp, episode_ids)
        if artifact_ids:
            got.artifacts = s.artifacts(sp, artifact_ids)
            got.parents = s.parents_of_many(sp, "artifact", got.artifacts)
        if event_ids:
            got.events = s.forget_events(sp, event_ids)
        if any(r.kind == "project" for r in rows):
            got.projects = s.projects(sp)
        key_ids = {
            v.key_id
            for v in got.versions.values()
            if (rec := got.records.get(v.record_id)) is not None and rec.lifecycle != FORGOTTEN
        }
        key_ids.update(e.key_id for e in got.episodes.values())
        key_ids.update(a.key_id for a in got.artifacts.values())
        if key_ids:
            got.deks = self.vault.data_keys(s, sp, key_ids)
        self._loaded = got

    def read_page(self, rows: Sequence[ChangeRow]) -> list[AnyChange | None]:
        """``read`` of every row, after one ``load`` of them all."""
        self.load(rows)
        return [self.read(row) for row in rows]

    def read(self, row: ChangeRow) -> AnyChange | None:
        """The wire change for ``row``, or None when it must not (or need not) be sent.
        A row the last ``load`` did not read is loaded alone first."""
        if row.kind in KINDS and row not in self._loaded.rows:
            self.load([row])
        match row.kind:
            case "record_version":
                return self._version(row)
            case "record_state":
                return self._state(row)
            case "episode":
                return self._episode(row)
            case "artifact":
                return self._artifact(row)
            case "project":
                return self._project(row)
            case "key_destruction":
                return self._destruction(row)
            case _:
                raise StoreError(
                    f"change {row.seq} of {self.space_id} has unknown kind {row.kind!r}"
                )

    def _missing(self, row: ChangeRow, what: str) -> StoreError:
        return StoreError(f"change {row.seq} of {self.space_id} names a missing {what}")

    def _version(self, row: ChangeRow) -> RecordVersionChange | None:
        assert row.record_id is not None and row.version is not None
        got = self._loaded
        record = got.records.get(row.record_id)
        version = got.versions.get((row.record_id, row.version))
        if record is None or version is None:
            raise self._missing(row, f"record version {row.record_id} v{row.version}")
        if record.lifecycle == FORGOTTEN:
            return None
        dek = got.deks.get(version.key_id)
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
        record = self._loaded.records.get(row.record_id)
        if record is None:
            raise self._missing(row, f"record {row.record_id}")
        if record.state_seq != row.seq:
            return None  # a later record_state change carries the state
        return self._state_of(row, record)

    def state_now(self, row: ChangeRow) -> RecordStateChange | None:
        """The record's whole current state as of ``row`` (None once it is forgotten)."""
        assert row.record_id is not None
        if row not in self._loaded.rows:
            self.load([row])
        record = self._loaded.records.get(row.record_id)
        if record is None:
            raise self._missing(row, f"record {row.record_id}")
        return self._state_of(row, record)

    @staticmethod
    def _state_of(row: ChangeRow, record: RecordRow) -> RecordStateChange | None:
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
        episode = self._loaded.episodes.get(row.episode_id)
        if episode is None:
            raise self._missing(row, f"episode {row.episode_id}")
        dek = self._loaded.deks.get(episode.key_id)
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
        got = self._loaded
        artifact = got.artifacts.get(row.artifact_id)
        if artifact is None:
            raise self._missing(row, f"artifact {row.artifact_id}")
        dek = got.deks.get(artifact.key_id)
        if dek is None:
            return None
        return ArtifactChange(
            seq=row.seq,
            artifact_id=artifact.artifact_id,
            derived_from=list(got.parents.get(artifact.artifact_id, ())),
            created_at=artifact.created_at,
            key_id=artifact.key_id,
            sealed_content=artifact.sealed_content,
            sealed_key=self.box.encrypt(dek),
        )

    def _project(self, row: ChangeRow) -> ProjectChange | None:
        assert row.project is not None
        project = self._loaded.projects.get(row.project)
        if project is None:
            raise self._missing(row, f"project {row.project!r}")
        if project.seq != row.seq:
            return None  # a later project change carries the state
        return ProjectChange(seq=row.seq, project=project.name, open=project.open, at=row.at)

    def _destruction(self, row: ChangeRow) -> KeyDestruction | None:
        assert row.event_id is not None
        ev = self._loaded.events.get(row.event_id)
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
