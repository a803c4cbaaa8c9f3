"""The device's search indexes: FTS5 over blinded stemmed terms, and int8 sentence
vectors, both inside the SQLCipher database.

Invariants:
- The indexes hold a record's CURRENT readable version only; ``record_search`` and
  ``record_vectors`` say which version that is, and a vector names the model that
  made it. Vectors of any other model are never searched.
- They are derived data: written in the transaction that writes the version, and
  deleted by ``drop`` (called only by ``device.shred``) in the one that shreds it,
  which also merges the FTS5 segments (``merge_if_needed``) before it commits.
- A ``Blinder`` (each term's HMAC computed once) lives for one batch of index writes
  (one ``index`` call, one pulled page) and is then dropped: it holds terms in the
  clear and never outlives the rows written from them.
- An index only proposes ids with scores; ``device.retrieval`` re-reads each record's
  authoritative state and the pipeline decides. Reading never writes.
- The in-memory vector matrix (``device.vector_index``) is keyed by
  ``search_state.generation``, a random token every index write sets; a write in this
  process updates the matrix in place when it was current, and any generation it did
  not follow makes the next query rebuild it, so a query never reads a matrix that
  misses a change. A dropped record's row leaves the matrix in the same call. The
  memo of relation-term holders (record ids) is keyed by the same generation.
- A database embeds with the process's default model (``device.embedder``) unless a
  tester assigned it another embedder (``assign_embedder``, by database path, e.g. the
  simulator's stub where retrieval is not under test); every vector names the model
  that made it, so vectors of the two never meet in a search.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from device import store, version_cache
from device.db import Database
from device.embedder import MODEL_DIR_ENV, default_embedder
from device.vector_index import VectorIndex
from protocol.embedding import DIM
from protocol.model import LifecycleState, RecordContent
from protocol.retrieval import lexical, searchable_text, vectors
from protocol.retrieval.relations import relation_of, relation_terms
from protocol.retrieval.task import Relation

LEXICAL_LIMIT = 50
VECTOR_LIMIT = 50
RELATED_LIMIT = 10
FORGOTTEN = LifecycleState.FORGOTTEN.value


class TextEmbedder(Protocol):
    """What the indexes need of an embedder (``protocol.embedding.Embedder`` is one)."""

    @property
    def model_id(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


_assigned: dict[str, TextEmbedder] = {}
_assigned_lock = threading.Lock()


def _path_key(path: Path | str) -> str:
    return version_cache.database_key(path)


def assign_embedder(db_path: Path, embedder: TextEmbedder | None) -> None:
    """Have the device database at ``db_path`` embed with ``embedder`` in this process
    (``None``: the default model again). For testers; the app never calls it."""
    with _assigned_lock:
        if embedder is None:
            _assigned.pop(_path_key(db_path), None)
        else:
            _assigned[_path_key(db_path)] = embedder


def assigned_embedder(db_path: Path) -> TextEmbedder | None:
    """The embedder assigned to the database at ``db_path``; None: the default model."""
    with _assigned_lock:
        return _assigned.get(_path_key(db_path))


def embedder_for(db: Database) -> TextEmbedder:
    """The embedder this database's vectors are made with."""
    if _assigned:
        assigned = assigned_embedder(db.path)
        if assigned is not None:
            return assigned
    known = (os.environ.get(MODEL_DIR_ENV), default_embedder)
    embedder = _default.get(known)
    if embedder is None:  # resolving the model folder costs a few syscalls: once
        embedder = _default[known] = default_embedder()
    return embedder


_default: dict[tuple[str | None, Callable[[], TextEmbedder]], TextEmbedder] = {}


def search_key(db: Database) -> bytes:
    return bytes(db.one("SELECT search_key FROM search_state")[0])


def generation(db: Database) -> int:
    return int(db.one("SELECT generation FROM search_state")[0])


def _bump(db: Database) -> int:
    """Move the index to a new generation: a random token (never ``+ 1``), so a rolled-back
    write's generation is never reached again by another writer; returns it."""
    db.execute("UPDATE search_state SET generation = random()")
    return generation(db)


def _rowid(db: Database, record_id: str) -> int | None:
    row = db.one("SELECT rowid FROM records WHERE record_id = ?", (record_id,))
    return None if row is None else int(row[0])


def _unindex(db: Database, record_id: str) -> None:
    rowid = _rowid(db, record_id)
    if rowid is not None and db.one(
        "SELECT 1 FROM record_search WHERE record_id = ?", (record_id,)
    ):
        db.execute("DELETE FROM record_fts WHERE rowid = ?", (rowid,))
    db.execute("DELETE FROM record_search WHERE record_id = ?", (record_id,))
    db.execute("DELETE FROM record_vectors WHERE record_id = ?", (record_id,))


# record ids per statement when many are read or deleted at once
_CHUNK = 500


@dataclass(frozen=True, slots=True)
class _Held:
    """What the indexes hold of one record: its row id, an FTS row, a vector row."""

    record_id: str
    rowid: int | None
    searched: bool
    vectored: bool


def _index_rows(db: Database, record_ids: Sequence[str]) -> dict[str, _Held]:
    """For each record, its row id and whether index rows exist: one statement per
    ``_CHUNK`` records (a record without a row is absent)."""
    out: dict[str, _Held] = {}
    wanted = list(dict.fromkeys(record_ids))
    for start in range(0, len(wanted), _CHUNK):
        part = wanted[start : start + _CHUNK]
        rows = db.all(
            "SELECT r.record_id, r.rowid, "
            "EXISTS (SELECT 1 FROM record_search s WHERE s.record_id = r.record_id), "
            "EXISTS (SELECT 1 FROM record_vectors v WHERE v.record_id = r.record_id) "
            f"FROM records r WHERE r.record_id IN ({','.join('?' for _ in part)})",
            part,
        )
        for row in rows:
            out[row[0]] = _Held(row[0], int(row[1]), bool(row[2]), bool(row[3]))
    return out


def _unindex_all(db: Database, held: Mapping[str, _Held]) -> None:
    """Delete the index rows these records have (an FTS row only where ``record_search``
    says one was written: a contentless FTS5 table cannot tell)."""
    searched = [h for h in held.values() if h.searched]
    db.executemany("DELETE FROM record_fts WHERE rowid = ?", [(h.rowid,) for h in searched])
    db.executemany(
        "DELETE FROM record_search WHERE record_id = ?", [(h.record_id,) for h in searched]
    )
    db.executemany(
        "DELETE FROM record_vectors WHERE record_id = ?",
        [(h.record_id,) for h in held.values() if h.vectored],
    )


def drop(db: Database, record_id: str) -> None:
    """Delete every index row of a record (shredding; the caller holds the transaction
    and calls ``merge_if_needed`` before it commits); its row leaves the in-memory matrix."""
    before = generation(db)
    _unindex(db, record_id)
    db.execute("UPDATE search_state SET needs_merge = 1")
    _follow(db, before, _bump(db), None, [(record_id, None)])


def merge_if_needed(db: Database) -> None:
    """Rewrite the FTS5 index as one segment if a record was dropped: a deleted entry
    can otherwise survive inside an older segment until FTS5 happens to merge it."""
    if db.one("SELECT needs_merge FROM search_state")[0]:
        db.execute("INSERT INTO record_fts (record_fts) VALUES ('optimize')")
        db.execute("UPDATE search_state SET needs_merge = 0")


class Blinder:
    """``lexical.blind`` under one search key, each term's HMAC computed once.

    Lives for one batch of index writes (a pulled page, one ``index`` call) and is then
    dropped: it holds terms in the clear, so it must never outlive the rows it wrote
    (a record shredded later must leave no cache of its words behind)."""

    __slots__ = ("_done", "_key")

    def __init__(self, key: bytes) -> None:
        self._key = key
        self._done: dict[str, str] = {}

    @property
    def key(self) -> bytes:
        return self._key

    def blind(self, term: str) -> str:
        done = self._done.get(term)
        if done is None:
            done = self._done[term] = lexical.blind(term, self._key)
        return done

    def document(self, content: RecordContent) -> str:
        """The FTS document of a record: its blinded word and relation terms."""
        plain = lexical.terms(searchable_text(content)) + relation_terms(content)
        return lexical.document([self.blind(term) for term in plain])

    def __len__(self) -> int:
        return len(self._done)


def document_for(content: RecordContent, key: bytes) -> str:
    """The FTS document of a record: its blinded word and relation terms."""
    return Blinder(key).document(content)


def index(
    db: Database,
    items: Sequence[tuple[str, int, RecordContent]],
    *,
    unindexed: Sequence[str] = (),
    before: int | None = None,
    blinder: Blinder | None = None,
) -> None:
    """(Re)index records at the given current versions, embedding them in one batch
    (``unindexed``: records whose index rows the caller already deleted since generation
    ``before``; the in-memory matrix follows both). The rows are read, deleted and
    written a statement per kind for the whole batch, not per record; ``blinder``
    (under this database's search key) lets a caller share the blinded terms of a page.
    A record named twice is indexed once, at its last entry."""
    if not items and not unindexed:
        return
    if before is None:
        before = generation(db)
    latest = {record_id: (record_id, version, content) for record_id, version, content in items}
    batch = list(latest.values())
    if blinder is None:
        blinder = Blinder(search_key(db))
    embedder = embedder_for(db)
    embedded = embedder.embed([searchable_text(content) for _, _, content in batch])
    held = _index_rows(db, list(latest))
    missing = [record_id for record_id in latest if record_id not in held]
    if missing:
        raise LookupError(f"record {missing[0]} has no row to index")
    _unindex_all(db, held)
    changes: list[tuple[str, bytes | None]] = [(record_id, None) for record_id in unindexed]
    fts: list[tuple[int | None, str]] = []
    searched: list[tuple[str, int]] = []
    vectored: list[tuple[str, int, str, bytes]] = []
    for (record_id, version, content), vector in zip(batch, embedded, strict=True):
        fts.append((held[record_id].rowid, blinder.document(content)))
        searched.append((record_id, version))
        blob = vectors.pack(vector)
        vectored.append((record_id, version, embedder.model_id, blob))
        changes.append((record_id, blob))
    db.executemany("INSERT INTO record_fts (rowid, terms) VALUES (?, ?)", fts)
    db.executemany("INSERT INTO record_search (record_id, version) VALUES (?, ?)", searched)
    db.executemany(
        "INSERT INTO record_vectors (record_id, version, model_id, vector) VALUES (?, ?, ?, ?)",
        vectored,
    )
    _follow(db, before, _bump(db), embedder.model_id, changes)


def stale(
    db: Database,
    record_ids: Iterable[str] | None = None,
    *,
    other_models: bool = True,
    limit: int | None = None,
) -> list[tuple[str, int]]:
    """Records whose index does not hold their current version, or (``other_models``)
    whose vector another embedding model made."""
    model_id = embedder_for(db).model_id
    another = "OR v.model_id != ?" if other_models else "AND ? IS NOT NULL"
    sql = (
        "SELECT r.record_id, r.current_version FROM records r "
        "LEFT JOIN record_search s ON s.record_id = r.record_id "
        "LEFT JOIN record_vectors v ON v.record_id = r.record_id "
        "WHERE r.lifecycle != ? AND r.current_version IS NOT NULL AND ("
        "s.version IS NULL OR s.version != r.current_version OR v.model_id IS NULL "
        f"{another})"
    )
    params: list[Any] = [FORGOTTEN, model_id]
    if record_ids is not None:
        wanted = sorted(set(record_ids))
        if not wanted:
            return []
        sql += f" AND r.record_id IN ({','.join('?' for _ in wanted)})"
        params.extend(wanted)
    sql += " ORDER BY r.record_id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return [(row[0], int(row[1])) for row in db.all(sql, params)]


def catch_up(
    db: Database,
    record_ids: Iterable[str] | None = None,
    *,
    other_models: bool = True,
    limit: int | None = None,
    known: Mapping[tuple[str, int], RecordContent] | None = None,
    blinder: Blinder | None = None,
) -> int:
    """Index what is stale (all records, or the ones named; at most ``limit``); the
    caller holds the transaction. ``known``: contents the caller already opened, by
    (record, version), so they are not opened again (a pulled page's). Returns how many
    records were looked at."""
    items = []
    before = generation(db)
    gone: list[str] = []
    looked = stale(db, record_ids, other_models=other_models, limit=limit)
    for record_id, version in looked:
        content = None if known is None else known.get((record_id, version))
        if content is None:
            row = store.version_row(db, record_id, version)
            if row is None:
                continue
            try:
                content = store.open_version(db, row)
            except Exception:  # a version whose key is gone has nothing to index
                _unindex(db, record_id)
                gone.append(record_id)
                continue
        items.append((record_id, version, content))
    index(db, items, unindexed=gone, before=before, blinder=blinder)
    return len(looked)


# --- reading -----------------------------------------------------------------------


def lexical_hits(db: Database, query: str, limit: int = LEXICAL_LIMIT) -> dict[str, float]:
    """Record ids whose current version shares a stemmed term with the query, bm25-scored."""
    plain = lexical.terms(query)
    if not plain:
        return {}
    match = lexical.any_of(lexical.blind_all(plain, search_key(db)))
    rows = db.all(
        "SELECT r.record_id, -bm25(record_fts) FROM record_fts "
        "JOIN records r ON r.rowid = record_fts.rowid "
        "WHERE record_fts MATCH ? ORDER BY bm25(record_fts), r.record_id LIMIT ?",
        (match, limit),
    )
    return {row[0]: float(row[1]) for row in rows}


_INDEXES: dict[str, VectorIndex] = {}
_indexes_lock = threading.Lock()


def _follow(
    db: Database,
    before: int,
    after: int,
    model_id: str | None,
    changes: Sequence[tuple[str, bytes | None]],
) -> None:
    """Apply an index write to the in-memory matrix: removals always (a dropped row
    never stays in memory), additions only if it was current at ``before`` (and of
    ``model_id``); a matrix that was not is dropped, and the next query rebuilds it."""
    key = _path_key(db.path)
    with _indexes_lock:
        m = _INDEXES.get(key)
        if m is None:
            return
        for record_id, blob in changes:
            if blob is None:
                m.remove(record_id)
        if m.generation != before or (model_id is not None and m.model_id != model_id):
            del _INDEXES[key]
            return
        for record_id, blob in changes:
            if blob is not None:
                m.upsert(record_id, blob)
        m.generation = after


def vector_index(db: Database) -> VectorIndex:
    """The database's vectors of its model as one in-memory int8 matrix, current."""
    model_id = embedder_for(db).model_id
    gen = generation(db)
    key = _path_key(db.path)
    with _indexes_lock:
        cached = _INDEXES.get(key)
        if cached is not None and cached.generation == gen and cached.model_id == model_id:
            return cached
    rows = db.all(
        "SELECT record_id, vector FROM record_vectors WHERE model_id = ? ORDER BY record_id",
        (model_id,),
    )
    built = VectorIndex(
        model_id, gen, [r[0] for r in rows], vectors.stack([bytes(r[1]) for r in rows], DIM)
    )
    with _indexes_lock:
        _INDEXES[key] = built
    return built


def forget_cache(db: Database) -> None:
    """Drop (and overwrite) the database's in-memory matrix; the next query rebuilds it."""
    with _indexes_lock:
        old = _INDEXES.pop(_path_key(db.path), None)
    if old is not None:
        for record_id in old.ids():
            old.remove(record_id)


def vector_hits(db: Database, query: str, limit: int = VECTOR_LIMIT) -> dict[str, float]:
    """Record ids whose current version is nearest the query in meaning, by cosine."""
    m = vector_index(db)
    if not m.rows:
        return {}
    q = embedder_for(db).embed([query])[0]
    return dict(m.nearest(np.asarray(q), limit))


RELATED_TERMS_PER_STATEMENT = 40


def _holders(db: Database, blinded: Sequence[str], limit: int) -> list[list[str]]:
    """For each blinded term, the record ids of its first ``limit`` FTS5 rows, sorted:
    one statement per ``RELATED_TERMS_PER_STATEMENT`` terms (a UNION ALL of bounded
    subqueries), not one per term."""
    memo = _holders_memo(db, limit)
    wanted = [term for term in dict.fromkeys(blinded) if term not in memo]
    found: dict[str, list[str]] = {term: [] for term in wanted}
    step = RELATED_TERMS_PER_STATEMENT
    for start in range(0, len(wanted), step):
        part = wanted[start : start + step]
        sql = " UNION ALL ".join(
            f"SELECT {j}, record_id FROM records WHERE rowid IN "
            "(SELECT rowid FROM record_fts WHERE record_fts MATCH ? LIMIT ?)"
            for j in range(len(part))
        )
        params: list[Any] = []
        for term in part:
            params.extend((term, limit))
        for row in db.all(sql, params):
            found[part[int(row[0])]].append(row[1])
    with _indexes_lock:
        for term, ids in found.items():
            memo[term] = tuple(sorted(ids))
    return [list(memo[term]) for term in blinded]


HOLDERS_MEMO_TERMS = 50_000
_HOLDERS: dict[str, tuple[int, int, dict[str, tuple[str, ...]]]] = {}


def _holders_memo(db: Database, limit: int) -> dict[str, tuple[str, ...]]:
    """Per process and database, the holders of each blinded relation term already looked
    up at the current ``generation`` (record ids only, re-read as candidates anyway):
    every index write moves the generation and so empties it."""
    key, gen = _path_key(db.path), generation(db)
    with _indexes_lock:
        held = _HOLDERS.get(key)
        if held is None or held[0] != gen or held[1] != limit or len(held[2]) > HOLDERS_MEMO_TERMS:
            held = _HOLDERS[key] = (gen, limit, {})
        return held[2]


def related(
    db: Database, contents: dict[str, RecordContent], limit: int = RELATED_LIMIT
) -> dict[str, list[tuple[str, Relation]]]:
    """Records that share a person, project or source episode with each given record:
    the first ``limit`` per term in index order (FTS5 stops there; no sort over every
    record that names, say, "sister"), every term read in one batch (``_holders``)."""
    key = search_key(db)
    terms = {record_id: relation_terms(content) for record_id, content in sorted(contents.items())}
    unique = list(dict.fromkeys(t for ts in terms.values() for t in ts))
    if not unique:
        return {}
    found = _holders(db, [lexical.blind(t, key) for t in unique], limit + 1)
    holders = dict(zip(unique, found, strict=True))
    out: dict[str, list[tuple[str, Relation]]] = {}
    for record_id, record_terms in terms.items():
        links: list[tuple[str, Relation]] = []
        for term in record_terms:
            kind = relation_of(term)
            links.extend((other, kind) for other in holders[term] if other != record_id)
        if links:
            out[record_id] = links
    return out
