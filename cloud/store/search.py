"""The search room (``cloud.store.rooms.search``): queries for the retrieval indexes
(migration 4), the lexical index and sealed vectors.

Invariants:
- Every query names the space, and an index only ever answers record ids (with a
  score); the caller re-reads each record's authoritative state before using one.
- The lexical index holds blinded terms only (``protocol.retrieval.lexical.blind``
  under the space's search key), never a word: on PostgreSQL a ``tsvector`` in
  ``record_search.terms`` (GIN index, ``@@`` / ``ts_rank``); on SQLite an FTS5 table
  ``record_fts`` (bm25) whose row ``record_search.fts_rowid`` names.
- ``record_vectors.sealed`` is a packed vector sealed with the record version's data
  key; nothing here opens it.
- Every write to a space's indexes bumps ``spaces.search_generation`` in the same
  transaction, so a cache keyed by it never outlives a change.
- ``drop_search(..., purge=True)`` (forgetting) deletes a record's rows; on SQLite it
  then merges the FTS5 index (``optimize``), so the deleted entries leave the index
  segments too (``secure_delete`` zeroes the freed space).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, func, insert, or_, select, text, update

from cloud.store import schema as t
from cloud.store.base import VersionRow
from cloud.store.sql_lineage import chunks

FORGOTTEN = "permanently_forgotten"
# PostgreSQL's text-search parser reads a token like "2e6ab..." as a number followed by
# a word; a leading letter keeps every blinded term one lexeme, in documents and queries.
TS_PREFIX = "t"


def ts_document(terms: Sequence[str]) -> str:
    """Blinded terms as text for ``to_tsvector('simple', ...)``."""
    return " ".join(TS_PREFIX + term for term in terms)


def ts_any_of(terms: Iterable[str]) -> str:
    """A ``to_tsquery('simple', ...)`` query matching any of the blinded terms."""
    return " | ".join(TS_PREFIX + term for term in sorted(set(terms)))


def fts_any_of(terms: Iterable[str]) -> str:
    """An FTS5 ``MATCH`` query matching any of the blinded terms."""
    return " OR ".join(sorted(set(terms)))


@dataclass(frozen=True, slots=True)
class IndexRow:
    """One record's index entries at one version."""

    record_id: str
    version: int
    terms: tuple[str, ...]  # blinded
    model_id: str
    sealed_vector: bytes


@dataclass(frozen=True, slots=True)
class SealedVector:
    record_id: str
    version: int
    key_id: str  # the version's data key, which sealed the vector
    sealed: bytes


_FTS_ROWIDS = text(
    "SELECT fts_rowid FROM record_search WHERE space_id = :sp AND record_id IN :ids"
).bindparams(bindparam("ids", expanding=True))
_FTS_DELETE = text("DELETE FROM record_fts WHERE rowid IN :ids").bindparams(
    bindparam("ids", expanding=True)
)
_FTS_INSERT = text(
    "INSERT INTO record_fts (rowid, space_id, record_id, terms) VALUES (:rowid, :sp, :rid, :doc)"
)
_SQLITE_SEARCH_INSERT = text(
    "INSERT INTO record_search (space_id, record_id, version, fts_rowid) "
    "VALUES (:sp, :rid, :version, :rowid)"
)
_FTS_OPTIMIZE = text("INSERT INTO record_fts (record_fts) VALUES ('optimize')")
_FTS_LEXICAL = text(
    "SELECT record_id, -bm25(record_fts) FROM record_fts "
    "WHERE record_fts MATCH :q AND space_id = :sp "
    "ORDER BY bm25(record_fts), record_id LIMIT :n"
)
_FTS_TERM = text(
    "SELECT record_id FROM record_fts WHERE record_fts MATCH :q AND space_id = :sp "
    "ORDER BY record_id LIMIT :n"
)
_FTS_TERMS = text(
    "SELECT record_id, terms FROM record_fts WHERE record_fts MATCH :q AND space_id = :sp"
)
_PG_TERMS = text(
    "SELECT record_id, tsvector_to_array(terms) FROM record_search "
    "WHERE space_id = :sp AND terms @@ to_tsquery('simple', :q)"
)
_PG_INSERT = text(
    "INSERT INTO record_search (space_id, record_id, version, terms) "
    "VALUES (:sp, :rid, :version, to_tsvector('simple', :doc))"
)
_PG_LEXICAL = text(
    "SELECT record_id, ts_rank(terms, query) AS rank "
    "FROM record_search, to_tsquery('simple', :q) AS query "
    "WHERE space_id = :sp AND terms @@ query ORDER BY rank DESC, record_id LIMIT :n"
)
_PG_TERM = text(
    "SELECT record_id FROM record_search "
    "WHERE space_id = :sp AND terms @@ to_tsquery('simple', :q) ORDER BY record_id LIMIT :n"
)


class SearchQueries:
    """Mixed into ``SqlSession``; ``conn`` is that session's connection."""

    conn: Connection
    _dialect: str

    # --- the generation counter -------------------------------------------------------

    def search_generation(self, space_id: str) -> int:
        c = t.spaces.c
        value = self.conn.execute(
            select(c.search_generation).where(c.space_id == space_id)
        ).scalar_one_or_none()
        return 0 if value is None else int(value)

    def _bump(self, space_id: str) -> None:
        c = t.spaces.c
        self.conn.execute(
            update(t.spaces)
            .where(c.space_id == space_id)
            .values(search_generation=c.search_generation + 1)
        )

    # --- what needs indexing ------------------------------------------------------------

    def stale_for_search(self, space_id: str, model_id: str) -> list[tuple[str, int]]:
        """``(record_id, current_version)`` of every live record whose indexes do not hold
        its current version (or hold another model's vector)."""
        query = self._stale(
            space_id, model_id, select(t.records.c.record_id, t.records.c.current_version)
        )
        query = query.order_by(t.records.c.record_id)
        return [(row[0], int(row[1])) for row in self.conn.execute(query)]

    def count_stale_for_search(self, space_id: str, model_id: str) -> int:
        """How many live records ``stale_for_search`` would list (one aggregate query)."""
        query = self._stale(space_id, model_id, select(func.count()))
        return int(self.conn.execute(query).scalar_one())

    @staticmethod
    def _stale(space_id: str, model_id: str, query: Any) -> Any:
        r, s, v = t.records.c, t.record_search.c, t.record_vectors.c
        return query.select_from(
            t.records.outerjoin(
                t.record_search, and_(s.space_id == r.space_id, s.record_id == r.record_id)
            ).outerjoin(
                t.record_vectors, and_(v.space_id == r.space_id, v.record_id == r.record_id)
            )
        ).where(
            r.space_id == space_id,
            r.lifecycle != FORGOTTEN,
            or_(
                s.version.is_(None),
                s.version != r.current_version,
                v.version.is_(None),
                v.version != r.current_version,
                v.model_id != model_id,
            ),
        )

    # --- writing ------------------------------------------------------------------------

    def _delete_rows(self, space_id: str, record_ids: list[str]) -> int:
        """Delete the records' index rows; return how many FTS5 rows went (SQLite)."""
        s, v = t.record_search.c, t.record_vectors.c
        deleted = 0
        for chunk in chunks(record_ids):
            if self._dialect == "sqlite":
                found = self.conn.execute(_FTS_ROWIDS, {"sp": space_id, "ids": chunk})
                rowids = [int(row[0]) for row in found]
                if rowids:
                    self.conn.execute(_FTS_DELETE, {"ids": rowids})
                    deleted += len(rowids)
            self.conn.execute(
                delete(t.record_search).where(s.space_id == space_id, s.record_id.in_(chunk))
            )
            self.conn.execute(
                delete(t.record_vectors).where(v.space_id == space_id, v.record_id.in_(chunk))
            )
        return deleted

    def index_records(self, space_id: str, rows: Sequence[IndexRow]) -> None:
        """Replace the index entries of each record with ``rows`` (one per record)."""
        if not rows:
            return
        self._delete_rows(space_id, sorted({r.record_id for r in rows}))
        if self._dialect == "sqlite":
            # explicit rowids: this transaction is the only writer (BEGIN IMMEDIATE)
            top = self.conn.execute(text("SELECT coalesce(max(rowid), 0) FROM record_fts"))
            first = int(top.scalar_one()) + 1
            self.conn.execute(
                _FTS_INSERT,
                [
                    {
                        "rowid": first + i,
                        "sp": space_id,
                        "rid": r.record_id,
                        "doc": " ".join(r.terms),
                    }
                    for i, r in enumerate(rows)
                ],
            )
            self.conn.execute(
                _SQLITE_SEARCH_INSERT,
                [
                    {"sp": space_id, "rid": r.record_id, "version": r.version, "rowid": first + i}
                    for i, r in enumerate(rows)
                ],
            )
        else:
            self.conn.execute(
                _PG_INSERT,
                [
                    {
                        "sp": space_id,
                        "rid": r.record_id,
                        "version": r.version,
                        "doc": ts_document(r.terms),
                    }
                    for r in rows
                ],
            )
        self.conn.execute(
            insert(t.record_vectors),
            [
                {
                    "space_id": space_id,
                    "record_id": r.record_id,
                    "version": r.version,
                    "model_id": r.model_id,
                    "sealed": r.sealed_vector,
                }
                for r in rows
            ],
        )
        self._bump(space_id)

    def drop_search(self, space_id: str, record_ids: Iterable[str], *, purge: bool) -> None:
        """Delete every index entry of ``record_ids``; with ``purge`` (forgetting), also
        merge SQLite's FTS5 segments so the deleted entries leave the index itself."""
        wanted = sorted(set(record_ids))
        if not wanted:
            return
        if self._delete_rows(space_id, wanted) and purge:
            # one segment again: the deleted rows' entries (and any older version's a
            # re-index left behind) are gone from the index, not just masked
            self.conn.execute(_FTS_OPTIMIZE)
        self._bump(space_id)

    # --- reading ------------------------------------------------------------------------

    def lexical_matches(self, space_id: str, terms: Sequence[str], limit: int) -> dict[str, float]:
        """Records sharing any blinded term, best first: ``{record_id: score}`` (higher is
        better; FTS5 ``-bm25`` on SQLite, ``ts_rank`` on PostgreSQL)."""
        if not terms or limit <= 0:
            return {}
        if self._dialect == "sqlite":
            rows = self.conn.execute(
                _FTS_LEXICAL, {"q": fts_any_of(terms), "sp": space_id, "n": limit}
            )
        else:
            rows = self.conn.execute(
                _PG_LEXICAL, {"q": ts_any_of(terms), "sp": space_id, "n": limit}
            )
        return {row[0]: float(row[1]) for row in rows}

    def records_with_term(self, space_id: str, term: str, limit: int) -> list[str]:
        """The first ``limit`` records (by id) whose index holds one blinded term."""
        if self._dialect == "sqlite":
            rows = self.conn.execute(_FTS_TERM, {"q": term, "sp": space_id, "n": limit})
        else:
            rows = self.conn.execute(_PG_TERM, {"q": ts_any_of([term]), "sp": space_id, "n": limit})
        return [row[0] for row in rows]

    def records_with_terms(
        self, space_id: str, terms: Iterable[str], limit: int
    ) -> dict[str, list[str]]:
        """For each blinded term, the first ``limit`` records (by id) whose index holds
        it, in one query: ``records_with_term`` for many terms at once."""
        wanted = sorted(set(terms))
        found: dict[str, list[str]] = {term: [] for term in wanted}
        for chunk in chunks(wanted):
            if self._dialect == "sqlite":
                rows = self.conn.execute(_FTS_TERMS, {"q": fts_any_of(chunk), "sp": space_id})
                held = ((r[0], str(r[1]).split()) for r in rows)
            else:
                rows = self.conn.execute(_PG_TERMS, {"q": ts_any_of(chunk), "sp": space_id})
                held = ((r[0], [x[len(TS_PREFIX) :] for x in r[1]]) for r in rows)
            for record_id, doc in held:
                for term in set(doc).intersection(chunk):
                    found[term].append(record_id)
        return {term: sorted(ids)[:limit] for term, ids in found.items()}

    def vector_listing(self, space_id: str, model_id: str) -> list[tuple[str, int]]:
        """``(record_id, version)`` of every vector of ``model_id`` in the space, by id."""
        v = t.record_vectors.c
        rows = self.conn.execute(
            select(v.record_id, v.version)
            .where(v.space_id == space_id, v.model_id == model_id)
            .order_by(v.record_id)
        )
        return [(row[0], int(row[1])) for row in rows]

    def sealed_vectors(
        self, space_id: str, model_id: str, record_ids: Iterable[str]
    ) -> list[SealedVector]:
        """The sealed vectors of ``record_ids`` with the data key of the version each holds."""
        v, rv = t.record_vectors.c, t.record_versions.c
        out: list[SealedVector] = []
        for chunk in chunks(sorted(set(record_ids))):
            rows = self.conn.execute(
                select(v.record_id, v.version, rv.key_id, v.sealed)
                .select_from(
                    t.record_vectors.join(
                        t.record_versions,
                        and_(
                            rv.space_id == v.space_id,
                            rv.record_id == v.record_id,
                            rv.version == v.version,
                        ),
                    )
                )
                .where(v.space_id == space_id, v.model_id == model_id, v.record_id.in_(chunk))
            )
            out.extend(SealedVector(r[0], int(r[1]), r[2], bytes(r[3])) for r in rows)
        return out

    def superseded_by_records(
        self, space_id: str, record_ids: Iterable[str]
    ) -> dict[str, list[str]]:
        """For each of ``record_ids``, the records whose ``superseded_by`` names it (the
        ones it replaced), by id; records that replaced none are left out."""
        r = t.records.c
        out: dict[str, list[str]] = {}
        for chunk in chunks(sorted(set(record_ids))):
            # no ORDER BY: with it SQLite walks the space's primary key instead of
            # seeking records_superseded_by
            rows = self.conn.execute(
                select(r.superseded_by, r.record_id).where(
                    r.space_id == space_id, r.superseded_by.in_(chunk)
                )
            )
            for newer, older in rows:
                out.setdefault(newer, []).append(older)
        return {newer: sorted(older) for newer, older in out.items()}

    def versions_at(self, space_id: str, wanted: Mapping[str, int]) -> dict[str, VersionRow]:
        """One version of each record: ``{record_id: version}`` -> its row."""
        v = t.record_versions.c
        out: dict[str, VersionRow] = {}
        for chunk in chunks(sorted(wanted)):
            rows = self.conn.execute(
                select(
                    v.record_id, v.version, v.supersedes, v.recorded_at, v.key_id, v.sealed_content
                ).where(v.space_id == space_id, v.record_id.in_(chunk))
            )
            for row in rows:
                if wanted[row[0]] == row[1]:
                    out[row[0]] = VersionRow(row[0], row[1], row[2], row[3], row[4], bytes(row[5]))
        return out
