"""One protocol-3 pull page: the subset's enters and leaves first, then the feed,
filtered to what the device keeps.

Invariants:
- Every enter and leave the device has not confirmed comes before any feed row, so a
  device has applied a record's enter before it sees a feed change of that record.
- An entering record's content that the device's feed cursor has already passed
  (versions, source episodes, artifacts, its state) arrives in the page, before its
  ``subset`` change; what lies after the cursor the feed brings, in order, since the
  record is now a member. So every piece of content is sent once.
- A feed row of a record reaches the device only while the record is in its subset;
  an episode only while it is a source of one of them (or of no live record); an
  artifact only while one of its parents is. Projects and key destructions reach
  every device: a forget is announced to all, whatever they hold.
- A page reads no feed row past the position its subset was chosen at
  (``CloudService.pull``): a record committed between the choice and the read waits
  for the next pull's choice instead of being skipped as "not kept".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import assert_never

from cloud.changes import ChangeReader
from cloud.store.base import ChangeRow, RecordRow, StoreSession, SubsetLogRow
from cloud.subset import SubsetKeeper
from protocol.messages import (
    AnyChange,
    ArtifactChange,
    EpisodeChange,
    KeyDestruction,
    ProjectChange,
    RecordStateChange,
    RecordVersionChange,
    SubsetChange,
)

_RECORD_KINDS = ("record_version", "record_state")


@dataclass(slots=True)
class Page:
    changes: list[AnyChange] = field(default_factory=list)
    held: list[tuple[str, str]] = field(default_factory=list)

    def add(self, change: AnyChange | None) -> None:
        if change is None:
            return
        self.changes.append(change)
        match change:
            case RecordVersionChange():
                self.held.append(("record", change.record_id))
            case EpisodeChange():
                self.held.append(("episode", change.episode_id))
            case ArtifactChange():
                self.held.append(("artifact", change.artifact_id))
            case RecordStateChange() | ProjectChange() | KeyDestruction() | SubsetChange():
                pass  # sends no content the device then holds
            case _:
                assert_never(change)


class SubsetFeed:
    """Builds one page for one device inside the pull's transaction."""

    def __init__(
        self,
        s: StoreSession,
        reader: ChangeReader,
        keeper: SubsetKeeper,
        space_id: str,
        device_id: str,
    ) -> None:
        self.s = s
        self.reader = reader
        self.keeper = keeper
        self.space_id = space_id
        self.device_id = device_id
        self.members = keeper.members(s, space_id, device_id)

    def log(self, page: Page, entries: list[SubsetLogRow], cursor_seq: int) -> None:
        """The enters and leaves, for a device whose feed cursor is at ``cursor_seq``
        (the entering records read at once)."""
        records = self.s.records(self.space_id, [e.record_id for e in entries if e.entered])
        for entry in entries:
            if entry.entered:
                self._enter(page, entry, records.get(entry.record_id), cursor_seq)
            else:
                page.add(self._leave(entry, cursor_seq))

    def _leave(self, entry: SubsetLogRow, at_seq: int) -> SubsetChange:
        """A leave, with the episodes and artifacts no member of the subset needs."""
        episodes = [
            e
            for e in self.keeper.sources(self.space_id, entry.record_id)
            if not self.keeper.cited_by_any(self.space_id, e, self.members)
        ]
        children = [
            d.child_id
            for d in self.s.derivations_from(self.space_id, [entry.record_id])
            if d.child_kind == "artifact"
        ]
        parents = self.s.parents_of_many(self.space_id, "artifact", children)
        artifacts = [a for a in children if self.members.isdisjoint(parents.get(a, ()))]
        return SubsetChange(
            seq=at_seq,
            record_id=entry.record_id,
            entered=False,
            episode_ids=sorted(episodes),
            artifact_ids=sorted(artifacts),
            at=entry.at,
        )

    def _enter(
        self, page: Page, entry: SubsetLogRow, record: RecordRow | None, cursor_seq: int
    ) -> None:
        """The record's content the device's feed cursor has passed (what follows the
        cursor, the feed itself brings, now that the record is a member), then the
        ``subset`` change (``record``: the entering record's row, None if missing)."""
        if record is None or record.lifecycle == "permanently_forgotten":
            return  # forgotten since: its key destruction says so
        rid = record.record_id
        if cursor_seq > 0:
            self._passed_content(page, record, entry, cursor_seq)
        page.add(
            SubsetChange(
                seq=min(record.state_seq or cursor_seq, cursor_seq),
                record_id=rid,
                entered=True,
                reason=entry.reason,
                at=entry.at,
            )
        )

    def _passed_content(
        self, page: Page, record: RecordRow, entry: SubsetLogRow, cursor_seq: int
    ) -> None:
        rid = record.record_id
        rows: list[ChangeRow] = []  # read as one page: a statement per kind of item
        passed = self.s.version_seqs(self.space_id, rid)
        for version in self.s.versions(self.space_id, rid):
            seq = passed.get(version.version)
            if seq is not None and seq <= cursor_seq:
                rows.append(
                    ChangeRow(
                        seq=seq,
                        kind="record_version",
                        at=entry.at,
                        record_id=rid,
                        version=version.version,
                    )
                )
        sources = self.keeper.sources(self.space_id, rid)
        for episode_id, seq in sorted(self.s.feed_seqs(self.space_id, "episode", sources).items()):
            if seq <= cursor_seq:
                rows.append(ChangeRow(seq=seq, kind="episode", at=entry.at, episode_id=episode_id))
        children = [
            d.child_id
            for d in self.s.derivations_from(self.space_id, [rid])
            if d.child_kind == "artifact"
        ]
        for artifact_id, seq in sorted(
            self.s.feed_seqs(self.space_id, "artifact", children).items()
        ):
            if seq <= cursor_seq:
                rows.append(
                    ChangeRow(seq=seq, kind="artifact", at=entry.at, artifact_id=artifact_id)
                )
        for change in self.reader.read_page(rows):
            page.add(change)
        state_seq = record.state_seq
        if state_seq is not None and state_seq <= cursor_seq:
            page.add(
                self.reader.state_now(
                    ChangeRow(seq=state_seq, kind="record_state", at=entry.at, record_id=rid)
                )
            )

    def wanted_rows(self, rows: list[ChangeRow]) -> list[ChangeRow]:
        """The rows of ``rows`` this device gets, in order, the artifacts' parents read
        for them all at once."""
        artifact_ids = [r.artifact_id for r in rows if r.kind == "artifact" and r.artifact_id]
        parents = self.s.parents_of_many(self.space_id, "artifact", artifact_ids)
        return [row for row in rows if self._wanted(row, parents)]

    def _wanted(self, row: ChangeRow, parents: dict[str, list[str]]) -> bool:
        """Whether this device gets the feed row ``row`` (``parents``: the artifacts'
        parents, from ``parents_of_many``)."""
        if row.kind in _RECORD_KINDS:
            return row.record_id in self.members
        if row.kind == "episode":
            assert row.episode_id is not None
            citing = self.keeper.citing(self.space_id, row.episode_id)
            return not citing or not citing.isdisjoint(self.members)
        if row.kind == "artifact":
            assert row.artifact_id is not None
            of = parents.get(row.artifact_id, [])
            return not of or not self.members.isdisjoint(of)
        return True  # projects, key destructions
