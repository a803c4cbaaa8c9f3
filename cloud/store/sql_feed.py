"""The feed room (``cloud.store.rooms.feed``): the space's sequence, the change feed,
its compaction and which device holds what.

Invariants:
- Sequence numbers come from ``spaces.next_seq`` under the space lock; server order is
  total per space and a seq is never given twice.
- Compaction deletes only rows that carry nothing any more (``_compactable``) and
  raises the feed floor in the same transaction.
- A ``NOTIFY`` (PostgreSQL) is sent inside the transaction, so it is heard only if the
  transaction commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Table,
    and_,
    delete,
    func,
    literal,
    or_,
    select,
    text,
    update,
)

from cloud.errors import StoreError
from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store.base import (
    ChangeRow,
    CompactionReport,
)
from cloud.store.sql_lineage import chunks

_chunks = chunks


# the PostgreSQL channel on which a commit that moved a space's change feed says so
CHANGES_CHANNEL = "memsync_changes"
_NOTIFY_CHANGED = text("SELECT pg_notify(:channel, :sp)")


class FeedQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection
    _dialect: str

    def _insert_ignore(self, table: Table, rows: list[dict[str, Any]]) -> None:
        raise NotImplementedError  # provided by ``LineageQueries``

    def allocate_seq(self, space_id: str) -> int:
        """The next sequence number of the space (call only under ``lock=True``)."""
        seq = self.conn.execute(q.ALLOCATE_SEQ, {"sp": space_id}).scalar_one_or_none()
        if seq is None:
            raise StoreError(f"space {space_id} does not exist; no sequence number to give")
        return int(seq)

    def notify_changed(self, space_id: str) -> None:
        """PostgreSQL: ``NOTIFY`` the live-pull channel with the space id, inside this
        transaction, so it is delivered only if the transaction commits (``cloud.live``).
        SQLite has no other process to tell: the service wakes its own waiters."""
        if self._dialect == "postgresql":
            self.conn.execute(_NOTIFY_CHANGED, {"channel": CHANGES_CHANNEL, "sp": space_id})

    def last_seq(self, space_id: str) -> int:
        c = t.spaces.c
        seq = self.conn.execute(
            select(c.next_seq).where(c.space_id == space_id)
        ).scalar_one_or_none()
        return 0 if seq is None else int(seq) - 1

    def add_change(self, space_id: str, row: ChangeRow) -> None:
        self.conn.execute(
            q.INSERT_CHANGE,
            {
                "space_id": space_id,
                "seq": row.seq,
                "kind": row.kind,
                "record_id": row.record_id,
                "version": row.version,
                "episode_id": row.episode_id,
                "event_id": row.event_id,
                "at": row.at,
                "artifact_id": row.artifact_id,
                "project": row.project,
            },
        )

    def changes_after(self, space_id: str, seq: int, limit: int) -> list[ChangeRow]:
        c = t.changes.c
        rows = self.conn.execute(
            select(
                c.seq,
                c.kind,
                c.at,
                c.record_id,
                c.version,
                c.episode_id,
                c.event_id,
                c.artifact_id,
                c.project,
            )
            .where(c.space_id == space_id, c.seq > seq)
            .order_by(c.seq)
            .limit(limit)
        )
        return [
            ChangeRow(
                seq=int(r[0]),
                kind=r[1],
                at=r[2],
                record_id=r[3],
                version=r[4],
                episode_id=r[5],
                event_id=None if r[6] is None else int(r[6]),
                artifact_id=r[7],
                project=r[8],
            )
            for r in rows
        ]

    def feed_floor(self, space_id: str) -> int:
        c = t.spaces.c
        floor = self.conn.execute(
            select(c.feed_floor).where(c.space_id == space_id)
        ).scalar_one_or_none()
        return 0 if floor is None else int(floor)

    def compact_changes(self, space_id: str) -> CompactionReport:
        """Delete the feed rows that no longer carry anything (``_compactable``) and raise
        the space's feed floor to the highest seq deleted. Call under ``lock=True``."""
        c = t.changes.c
        gone = _compactable()
        counted = self.conn.execute(
            select(c.kind, func.count(), func.max(c.seq))
            .where(c.space_id == space_id, gone)
            .group_by(c.kind)
        ).all()
        deleted = tuple(sorted((str(kind), int(n)) for kind, n, _top in counted))
        highest = max((int(top) for _kind, _n, top in counted), default=0)
        previous = self.feed_floor(space_id)
        if counted:
            self.conn.execute(delete(t.changes).where(c.space_id == space_id, gone))
        floor = max(previous, highest)
        if floor != previous:
            s = t.spaces.c
            self.conn.execute(
                update(t.spaces).where(s.space_id == space_id).values(feed_floor=floor)
            )
        kinds: dict[str, int] = {
            str(kind): int(n)
            for kind, n in self.conn.execute(
                select(c.kind, func.count()).where(c.space_id == space_id).group_by(c.kind)
            )
        }
        return CompactionReport(
            space_id=space_id,
            deleted=deleted,
            kept_destructions=kinds.get("key_destruction", 0),
            remaining=sum(kinds.values()),
            previous_floor=previous,
            floor=floor,
        )

    def add_holdings(self, space_id: str, device_id: str, items: Iterable[tuple[str, str]]) -> None:
        rows = [
            {"space_id": space_id, "device_id": device_id, "item_kind": k, "item_id": i}
            for k, i in sorted(set(items))
        ]
        self._insert_ignore(t.holdings, rows)

    def holders(self, space_id: str, items: Iterable[tuple[str, str]]) -> set[str]:
        c = t.holdings.c
        found: set[str] = set()
        wanted = list(items)
        for kind in ("record", "episode", "artifact"):
            ids = sorted({i for k, i in wanted if k == kind})
            for chunk in _chunks(ids):
                rows = self.conn.execute(
                    select(c.device_id)
                    .where(c.space_id == space_id, c.item_kind == kind, c.item_id.in_(chunk))
                    .distinct()
                )
                found.update(r[0] for r in rows)
        return found


def _destroyed_key(space_id: Any, key_id: Any) -> ColumnElement[bool]:
    """``key_id`` is named by a forget event whose keys the key store has destroyed."""
    k, e = t.forget_keys.c, t.forget_events.c
    return (
        select(literal(1))
        .where(
            k.space_id == space_id,
            k.key_id == key_id,
            e.space_id == k.space_id,
            e.event_id == k.event_id,
            e.keys_destroyed_at.is_not(None),
        )
        .exists()
    )


def _compactable() -> ColumnElement[bool]:
    """The feed rows (of ``changes``) that no longer carry anything to any device:

    - a ``record_state`` that is not its record's latest, or whose record is forgotten
      (the reader sends neither; the skeleton travels with the key destruction);
    - a ``project`` change that is not its project's latest;
    - a ``record_version``, ``episode`` or ``artifact`` whose data key was destroyed;
    - a ``key_destruction`` that no registered, unrevoked device still has to
      acknowledge (every such device that held the content acked it; revoked devices
      do not block: they are refused and wipe everything when they next connect).
    """
    c = t.changes.c
    r, p = t.records.c, t.projects.c
    v, ep, art = t.record_versions.c, t.episodes.c, t.artifacts.c
    fp, d = t.forget_pending.c, t.devices.c
    latest_state = (
        select(literal(1))
        .where(
            r.space_id == c.space_id,
            r.record_id == c.record_id,
            r.state_seq == c.seq,
            r.lifecycle != "permanently_forgotten",
        )
        .exists()
    )
    latest_project = (
        select(literal(1))
        .where(p.space_id == c.space_id, p.name == c.project, p.seq == c.seq)
        .exists()
    )

    def destroyed(space: Any, key: Any, *same: Any) -> Any:
        """The content row matched by ``same`` has had its key destroyed."""
        return select(literal(1)).where(*same, _destroyed_key(space, key)).exists()

    version_gone = destroyed(
        v.space_id,
        v.key_id,
        v.space_id == c.space_id,
        v.record_id == c.record_id,
        v.version == c.version,
    )
    episode_gone = destroyed(
        ep.space_id, ep.key_id, ep.space_id == c.space_id, ep.episode_id == c.episode_id
    )
    artifact_gone = destroyed(
        art.space_id, art.key_id, art.space_id == c.space_id, art.artifact_id == c.artifact_id
    )
    awaited = (
        select(literal(1))
        .where(
            fp.space_id == c.space_id,
            fp.event_id == c.event_id,
            fp.acked_at.is_(None),
            d.space_id == fp.space_id,
            d.device_id == fp.device_id,
            d.revoked_at.is_(None),
        )
        .exists()
    )
    return or_(
        and_(c.kind == "record_state", ~latest_state),
        and_(c.kind == "project", ~latest_project),
        and_(c.kind == "record_version", version_gone),
        and_(c.kind == "episode", episode_gone),
        and_(c.kind == "artifact", artifact_gone),
        and_(c.kind == "key_destruction", ~awaited),
    )
