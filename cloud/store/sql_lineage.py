"""The lineage room (``cloud.store.rooms.lineage``): what was derived from what
(``derivations``), the subject index and the history index.

Invariants:
- Every query names the space.
- ``derivations``, ``subject_index`` and ``history_index`` are indexes, not content:
  they hold plaintext ids and keyed hashes only, and a forget deletes the rows of what
  it forgot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, Table, and_, delete, func, or_, select

from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store import statements_pull as qp
from cloud.store.base import DerivationRow

_CHUNK = 500
# the record id of a forget event that destroys episodes no forgotten record names
# (forgetting all memory of a space holding episodes but no record); never sent
EPISODES_ONLY = ""


def chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class LineageQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection
    _dialect: str

    def _insert_ignore(self, table: Table, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        self.conn.execute(q.insert_ignore(self._dialect, table), rows)

    # --- derivations ------------------------------------------------------------------

    def add_derivations(self, space_id: str, rows: Iterable[DerivationRow]) -> None:
        self._insert_ignore(
            t.derivations,
            [
                {
                    "space_id": space_id,
                    "parent_record_id": r.parent_record_id,
                    "child_kind": r.child_kind,
                    "child_id": r.child_id,
                    "seq": r.seq,
                    "position": r.position,
                }
                for r in rows
            ],
        )

    def derivations_from(self, space_id: str, parent_ids: Iterable[str]) -> list[DerivationRow]:
        """Edges out of ``parent_ids``: derived records in creation order, then artifacts."""
        c = t.derivations.c
        out: list[DerivationRow] = []
        for chunk in chunks(sorted(set(parent_ids))):
            rows = self.conn.execute(
                select(c.parent_record_id, c.child_kind, c.child_id, c.seq, c.position).where(
                    c.space_id == space_id, c.parent_record_id.in_(chunk)
                )
            )
            out.extend(DerivationRow(r[0], r[1], r[2], int(r[3]), r[4]) for r in rows)
        out.sort(key=lambda d: (d.child_kind != "record", d.seq, d.child_id))
        return out

    def parents_of(self, space_id: str, child_kind: str, child_id: str) -> list[str]:
        c = t.derivations.c
        rows = self.conn.execute(
            select(c.parent_record_id)
            .where(c.space_id == space_id, c.child_kind == child_kind, c.child_id == child_id)
            .order_by(c.position, c.parent_record_id)
        )
        return [r[0] for r in rows]

    def parents_of_many(
        self, space_id: str, child_kind: str, child_ids: Iterable[str]
    ) -> dict[str, list[str]]:
        """``parents_of`` for many children at once: each child's parents in the same
        order; a child with no parent is absent."""
        out: dict[str, list[str]] = {}
        for chunk in chunks(sorted(set(child_ids))):
            rows = self.conn.execute(
                qp.PARENTS_OF_MANY, {"sp": space_id, "kind": child_kind, "ids": chunk}
            )
            for child_id, parent_id in rows:
                out.setdefault(child_id, []).append(parent_id)
        return out

    def drop_derivations(
        self, space_id: str, record_ids: Iterable[str], artifact_ids: Iterable[str]
    ) -> None:
        """Forget the edges touching forgotten items (a skeleton keeps no source)."""
        c = t.derivations.c
        for chunk in chunks(sorted(set(record_ids))):
            self.conn.execute(
                delete(t.derivations).where(
                    c.space_id == space_id,
                    or_(
                        c.parent_record_id.in_(chunk),
                        and_(c.child_kind == "record", c.child_id.in_(chunk)),
                    ),
                )
            )
        for chunk in chunks(sorted(set(artifact_ids))):
            self.conn.execute(
                delete(t.derivations).where(
                    c.space_id == space_id, c.child_kind == "artifact", c.child_id.in_(chunk)
                )
            )

    # --- the subject index ------------------------------------------------------------

    def set_subject_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None:
        self.conn.execute(q.DROP_RECORD_SUBJECTS, {"sp": space_id, "rid": record_id})
        self._insert_ignore(
            t.subject_index,
            [
                {"space_id": space_id, "token": token, "record_id": record_id}
                for token in sorted(set(tokens))
            ],
        )

    def records_with_subjects(self, space_id: str, tokens: Sequence[str]) -> list[str]:
        """Every record kept under any of ``tokens``, once, in id order."""
        found: set[str] = set()
        for chunk in chunks(sorted(set(tokens))):
            rows = self.conn.execute(q.RECORDS_WITH_SUBJECTS, {"sp": space_id, "ids": chunk})
            found.update(r[0] for r in rows)
        return sorted(found)

    def drop_subject_tokens(self, space_id: str, record_ids: Iterable[str]) -> None:
        c = t.subject_index.c
        for chunk in chunks(sorted(set(record_ids))):
            self.conn.execute(
                delete(t.subject_index).where(c.space_id == space_id, c.record_id.in_(chunk))
            )

    # --- the history index ------------------------------------------------------------

    def add_history_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None:
        """Add a version's history tokens; earlier versions' tokens stay (insert only)."""
        self._insert_ignore(
            t.history_index,
            [
                {"space_id": space_id, "token": token, "record_id": record_id}
                for token in sorted(set(tokens))
            ],
        )

    def records_with_history(self, space_id: str, tokens: Sequence[str]) -> list[str]:
        """Every record that ever had any of ``tokens``, once, in id order."""
        c = t.history_index.c
        found: set[str] = set()
        for chunk in chunks(sorted(set(tokens))):
            rows = self.conn.execute(
                select(c.record_id).where(c.space_id == space_id, c.token.in_(chunk))
            )
            found.update(r[0] for r in rows)
        return sorted(found)

    def has_history(self, space_id: str, record_id: str) -> bool:
        """Whether the record has any history-index row (records older than migration
        13 have none until they are backfilled)."""
        c = t.history_index.c
        found = self.conn.execute(
            select(c.token).where(c.space_id == space_id, c.record_id == record_id).limit(1)
        ).first()
        return found is not None

    def episode_seq(self, space_id: str, episode_id: str) -> int | None:
        """Where the episode arrived in server order (its ``episode`` change, kept in the
        feed while the episode's key lives); None once it is gone."""
        c = t.changes.c
        value = self.conn.execute(
            select(func.min(c.seq)).where(
                c.space_id == space_id, c.episode_id == episode_id, c.kind == "episode"
            )
        ).scalar_one_or_none()
        return None if value is None else int(value)

    def drop_history_tokens(self, space_id: str, record_ids: Iterable[str]) -> None:
        c = t.history_index.c
        for chunk in chunks(sorted(set(record_ids))):
            self.conn.execute(
                delete(t.history_index).where(c.space_id == space_id, c.record_id.in_(chunk))
            )
