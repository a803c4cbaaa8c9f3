"""The subset room (``cloud.store.rooms.subset``): the record store's queries for the
device subset (``cloud.subset``).

Invariants:
- Every query names the space and, but for record uses, the device.
- These tables hold ids, times, counts and rule settings; never content, and never a
  record's type or area (a log row's ``reason`` names the rule class that chose it and
  is deleted once the device confirmed it).
- ``subset_log`` gens only grow for a device: a device's cursor names the last one it
  applied, and everything up to it is deleted when it pulls again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, Table, delete, func, insert, select, union, update

from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store.base import RecordRow, SubsetLogRow, SubsetStateRow
from cloud.store.sql_lineage import chunks


def _aware(value: Any) -> datetime:
    """An aggregate skips the column's type: SQLite hands back text or a naive time."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    assert isinstance(value, datetime)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class SubsetQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection
    _dialect: str

    def _insert_ignore(self, table: Table, rows: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    @staticmethod
    def _record_row(row: Any) -> RecordRow:
        raise NotImplementedError

    # --- policies and pins ----------------------------------------------------------

    def subset_policy(self, space_id: str, device_id: str) -> str | None:
        c = t.subset_policies.c
        return self.conn.execute(
            select(c.policy).where(c.space_id == space_id, c.device_id == device_id)
        ).scalar_one_or_none()

    def set_subset_policy(self, space_id: str, device_id: str, policy: str, at: datetime) -> None:
        c = t.subset_policies.c
        where = (c.space_id == space_id, c.device_id == device_id)
        done = self.conn.execute(
            update(t.subset_policies).where(*where).values(policy=policy, updated_at=at)
        )
        if done.rowcount == 0:
            self.conn.execute(
                insert(t.subset_policies).values(
                    space_id=space_id, device_id=device_id, policy=policy, updated_at=at
                )
            )

    def pins(self, space_id: str, device_id: str) -> list[str]:
        c = t.subset_pins.c
        rows = self.conn.execute(
            select(c.record_id)
            .where(c.space_id == space_id, c.device_id == device_id)
            .order_by(c.record_id)
        )
        return [r[0] for r in rows]

    def set_pin(
        self, space_id: str, device_id: str, record_id: str, pinned: bool, at: datetime
    ) -> None:
        if pinned:
            self._insert_ignore(
                t.subset_pins,
                [
                    {
                        "space_id": space_id,
                        "device_id": device_id,
                        "record_id": record_id,
                        "pinned_at": at,
                    }
                ],
            )
        else:
            c = t.subset_pins.c
            self.conn.execute(
                delete(t.subset_pins).where(
                    c.space_id == space_id, c.device_id == device_id, c.record_id == record_id
                )
            )

    # --- members, the log, the state ------------------------------------------------

    def subset_members(self, space_id: str, device_id: str) -> set[str]:
        c = t.subset_members.c
        rows = self.conn.execute(
            select(c.record_id).where(c.space_id == space_id, c.device_id == device_id)
        )
        return {r[0] for r in rows}

    def subset_members_among(
        self, space_id: str, device_id: str, record_ids: Iterable[str]
    ) -> set[str]:
        """Which of ``record_ids`` are in the device's subset (IN-list lookups)."""
        c = t.subset_members.c
        out: set[str] = set()
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(
                select(c.record_id).where(
                    c.space_id == space_id, c.device_id == device_id, c.record_id.in_(chunk)
                )
            )
            out.update(r[0] for r in rows)
        return out

    def add_subset_members(self, space_id: str, device_id: str, record_ids: Iterable[str]) -> None:
        self._insert_ignore(
            t.subset_members,
            [
                {"space_id": space_id, "device_id": device_id, "record_id": r}
                for r in sorted(set(record_ids))
            ],
        )

    def remove_subset_members(
        self, space_id: str, device_id: str, record_ids: Iterable[str]
    ) -> None:
        c = t.subset_members.c
        for chunk in chunks(sorted(set(record_ids))):
            self.conn.execute(
                delete(t.subset_members).where(
                    c.space_id == space_id, c.device_id == device_id, c.record_id.in_(chunk)
                )
            )

    def clear_subset(self, space_id: str, device_id: str) -> None:
        """Forget what this device was told (it starts its pull over): members and log."""
        for table in (t.subset_members, t.subset_log):
            c = table.c
            self.conn.execute(delete(table).where(c.space_id == space_id, c.device_id == device_id))

    def add_subset_log(self, space_id: str, device_id: str, rows: Sequence[SubsetLogRow]) -> None:
        if rows:
            self.conn.execute(
                insert(t.subset_log),
                [
                    {
                        "space_id": space_id,
                        "device_id": device_id,
                        "gen": r.gen,
                        "record_id": r.record_id,
                        "entered": r.entered,
                        "reason": r.reason,
                        "at": r.at,
                    }
                    for r in rows
                ],
            )

    def subset_log_after(
        self, space_id: str, device_id: str, gen: int, limit: int
    ) -> list[SubsetLogRow]:
        c = t.subset_log.c
        rows = self.conn.execute(
            select(c.gen, c.record_id, c.entered, c.reason, c.at)
            .where(c.space_id == space_id, c.device_id == device_id, c.gen > gen)
            .order_by(c.gen)
            .limit(limit)
        )
        return [SubsetLogRow(int(r[0]), r[1], bool(r[2]), r[3], r[4]) for r in rows]

    def confirm_subset_log(self, space_id: str, device_id: str, gen: int) -> list[str]:
        """Delete the log up to ``gen`` (the device applied it); return the records whose
        last confirmed entry is a leave (the device no longer holds them)."""
        c = t.subset_log.c
        mine = (c.space_id == space_id, c.device_id == device_id, c.gen <= gen)
        rows = self.conn.execute(select(c.record_id, c.entered).where(*mine).order_by(c.gen)).all()
        if not rows:
            return []
        last: dict[str, bool] = {}
        for record_id, entered in rows:
            last[record_id] = bool(entered)
        self.conn.execute(delete(t.subset_log).where(*mine))
        return sorted(r for r, entered in last.items() if not entered)

    def subset_state(self, space_id: str, device_id: str) -> SubsetStateRow | None:
        c = t.subset_state.c
        row = self.conn.execute(
            select(c.gen, c.evaluated_seq, c.evaluated_at, c.summary).where(
                c.space_id == space_id, c.device_id == device_id
            )
        ).first()
        if row is None:
            return None
        return SubsetStateRow(int(row[0]), int(row[1]), row[2], row[3])

    def save_subset_state(self, space_id: str, device_id: str, state: SubsetStateRow) -> None:
        c = t.subset_state.c
        values = {
            "gen": state.gen,
            "evaluated_seq": state.evaluated_seq,
            "evaluated_at": state.evaluated_at,
            "summary": state.summary,
        }
        done = self.conn.execute(
            update(t.subset_state)
            .where(c.space_id == space_id, c.device_id == device_id)
            .values(**values)
        )
        if done.rowcount == 0:
            self.conn.execute(
                insert(t.subset_state).values(space_id=space_id, device_id=device_id, **values)
            )

    def mark_subsets_stale(self, space_id: str, device_id: str | None = None) -> None:
        """The next pull of the device (of every device, for None) chooses again."""
        c = t.subset_state.c
        query = update(t.subset_state).where(c.space_id == space_id)
        if device_id is not None:
            query = query.where(c.device_id == device_id)
        self.conn.execute(query.values(evaluated_seq=-1))

    # --- what the policy reads --------------------------------------------------------

    def add_record_uses(
        self, space_id: str, device_id: str, uses: Iterable[tuple[str, int, datetime]]
    ) -> bool:
        """A device's running counts: each only ever rises (an older report changes
        nothing). Returns whether any count or time moved."""
        c = t.record_uses.c
        moved = False
        for record_id, count, at in uses:
            where = (c.space_id == space_id, c.device_id == device_id, c.record_id == record_id)
            held = self.conn.execute(select(c.uses, c.last_used_at).where(*where)).first()
            if held is None:
                self.conn.execute(
                    insert(t.record_uses).values(
                        space_id=space_id,
                        device_id=device_id,
                        record_id=record_id,
                        uses=count,
                        last_used_at=at,
                    )
                )
                moved = True
            elif count > int(held[0]) or at > held[1]:
                self.conn.execute(
                    update(t.record_uses)
                    .where(*where)
                    .values(uses=max(count, int(held[0])), last_used_at=max(held[1], at))
                )
                moved = True
        return moved

    def record_uses(self, space_id: str) -> dict[str, tuple[int, datetime]]:
        """Per record: the uses of every device added up, and the latest use."""
        c = t.record_uses.c
        rows = self.conn.execute(
            select(c.record_id, func.sum(c.uses), func.max(c.last_used_at))
            .where(c.space_id == space_id)
            .group_by(c.record_id)
        )
        return {r[0]: (int(r[1]), _aware(r[2])) for r in rows}

    def version_seqs(self, space_id: str, record_id: str) -> dict[int, int]:
        """Where each version of the record sits in the change feed: version -> seq."""
        c = t.changes.c
        rows = self.conn.execute(
            select(c.version, c.seq).where(
                c.space_id == space_id, c.record_id == record_id, c.kind == "record_version"
            )
        )
        return {int(r[0]): int(r[1]) for r in rows}

    def feed_seqs(self, space_id: str, kind: str, item_ids: Iterable[str]) -> dict[str, int]:
        """The feed seq of each episode (``kind`` "episode") or artifact ("artifact")."""
        c = t.changes.c
        column = c.episode_id if kind == "episode" else c.artifact_id
        out: dict[str, int] = {}
        for chunk in chunks(sorted(set(item_ids))):
            rows = self.conn.execute(
                select(column, c.seq).where(
                    c.space_id == space_id, c.kind == kind, column.in_(chunk)
                )
            )
            out.update({r[0]: int(r[1]) for r in rows})
        return out

    def records_changed_since(self, space_id: str, seq: int) -> list[RecordRow]:
        """Records created or whose state changed after ``seq`` (forgotten ones included);
        every record when ``seq`` is negative."""
        c = t.records.c
        query = select(*q.RECORD_COLS).where(c.space_id == space_id)
        if seq >= 0:
            # each side on its own index (``records_state``, ``records_created``): what
            # changed is read, not every record of the space
            changed = union(
                select(c.record_id).where(c.space_id == space_id, c.state_seq > seq),
                select(c.record_id).where(c.space_id == space_id, c.created_seq > seq),
            )
            query = query.where(c.record_id.in_(changed))
        return [self._record_row(r) for r in self.conn.execute(query.order_by(c.record_id))]

    def record_sizes(self, space_id: str, record_ids: Iterable[str]) -> dict[str, int]:
        """The bytes of sealed content of every version of each record."""
        c = t.record_versions.c
        out: dict[str, int] = {}
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(
                select(c.record_id, func.sum(func.length(c.sealed_content)))
                .where(c.space_id == space_id, c.record_id.in_(chunk))
                .group_by(c.record_id)
            )
            out.update({r[0]: int(r[1] or 0) for r in rows})
        return out

    def holdings_of(self, space_id: str, device_id: str, kind: str) -> set[str]:
        c = t.holdings.c
        rows = self.conn.execute(
            select(c.item_id).where(
                c.space_id == space_id, c.device_id == device_id, c.item_kind == kind
            )
        )
        return {r[0] for r in rows}

    def drop_holdings(
        self, space_id: str, device_id: str, kind: str, item_ids: Iterable[str]
    ) -> None:
        c = t.holdings.c
        for chunk in chunks(sorted(set(item_ids))):
            self.conn.execute(
                delete(t.holdings).where(
                    c.space_id == space_id,
                    c.device_id == device_id,
                    c.item_kind == kind,
                    c.item_id.in_(chunk),
                )
            )
