"""Queries for the memory-record tables: account keys, the record history log,
artifacts, derivations, the subject index and projects.

Invariants:
- Every query names the space.
- ``artifacts`` and ``record_events`` are only ever inserted (triggers refuse the rest).
- ``derivations``, ``subject_index`` and ``history_index`` are indexes, not content:
  they hold plaintext ids and keyed hashes only, and a forget deletes the rows of what
  it forgot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from sqlalchemy import Connection, Table, and_, delete, func, insert, or_, select, update

from cloud.store import schema as t
from cloud.store import statements as q
from cloud.store.base import ArtifactRow, DerivationRow, ProjectRow, RecordEventRow

_CHUNK = 500
# the record id of a forget event that destroys episodes no forgotten record names
# (forgetting all memory of a space holding episodes but no record); never sent
EPISODES_ONLY = ""


def chunks(items: list[Any]) -> Iterator[list[Any]]:
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]


class MemoryQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection
    _dialect: str

    def _insert_ignore(self, table: Table, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        self.conn.execute(q.insert_ignore(self._dialect, table), rows)

    # --- the account key (strong authentication) ------------------------------------

    def account_key(self, space_id: str) -> bytes | None:
        c = t.spaces.c
        value = self.conn.execute(
            select(c.account_key).where(c.space_id == space_id)
        ).scalar_one_or_none()
        return None if value is None else bytes(value)

    def set_account_key(self, space_id: str, key: bytes) -> None:
        c = t.spaces.c
        self.conn.execute(
            update(t.spaces)
            .where(c.space_id == space_id, c.account_key.is_(None))
            .values(account_key=key)
        )

    def replace_account_key(self, space_id: str, old: bytes, new: bytes) -> bool:
        """Swap the space's account key ``old`` for ``new``; False (nothing written) when
        ``old`` is not the key registered now."""
        c = t.spaces.c
        done = self.conn.execute(
            update(t.spaces)
            .where(c.space_id == space_id, c.account_key == old)
            .values(account_key=new)
        )
        return bool(done.rowcount == 1)

    # --- episodes and record history -------------------------------------------------

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

    # --- artifacts --------------------------------------------------------------------

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

    # --- projects ---------------------------------------------------------------------

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
