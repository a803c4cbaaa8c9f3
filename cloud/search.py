"""The cloud's search indexes over a whole space: blinded lexical terms and sealed vectors.

Invariants:
- The indexes hold each live record's CURRENT version only; ``record_search`` and
  ``record_vectors`` say which version, and a vector names the model that made it.
  Vectors of any other model are never searched (they are re-made by ``catch_up``).
- A push writes no index row, and a query never indexes: ``catch_up`` indexes every
  record whose current version is not indexed, run after a push commits by
  ``cloud.indexer`` (in the background) and by the worker's reindex job. A query
  answers from what is indexed; ``unindexed`` says how many live records it cannot
  see yet. Embedding runs in batches, outside any transaction; the rows are written
  under the space lock after re-checking that each record is still live at that
  version and its data key is not forgotten.
- One catch-up per space runs at a time in a process (a lock per space), and one
  across the processes of a PostgreSQL store (``cloud.store.advisory``): a second
  process is refused at once (``try_catch_up`` answers None) and embeds nothing. On
  SQLite processes may overlap, and the re-check makes the later writer's rows the
  same as the earlier's.
- The lexical index holds only terms blinded with the space's search key (key store);
  a vector is sealed with its record version's data key (binding kind ``vector``), so
  destroying the record's keys makes it unreadable. Both are derived data, deleted in
  the forget transaction (``cloud.effects.Forgetting``).
- An index only proposes ids with scores; ``cloud.retrieval`` re-reads each record's
  authoritative state and the pipeline decides.
- The unsealed vector matrix is cached in this process per space, keyed by the
  space's ``search_generation`` (bumped by every index write and delete, in the same
  transaction), so a query never reads a matrix that misses a change. A refresh opens
  only the vectors it does not hold yet; ``prune`` drops a space's forgotten vectors
  from memory right after the push that forgot them.
- Several processes may serve one store, so this cache must not keep what another
  process forgot: ``drop_unindexed`` runs on every change notification
  (``cloud.live``, PostgreSQL NOTIFY across processes) and drops from memory every
  cached vector the space no longer indexes, opening nothing new. The cache is then
  marked incomplete (it keeps its old generation), so the next query refreshes it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cloud.store import SqlStore
from cloud.store.advisory import try_index_lock
from cloud.store.base import StoreSession
from cloud.store.search import IndexRow
from cloud.vault import Vault
from protocol.embedding import DIM, Embedder
from protocol.model import LifecycleState, RecordContent
from protocol.retrieval import lexical, searchable_text, vectors
from protocol.retrieval.relations import relation_of, relation_terms
from protocol.retrieval.task import Relation

LEXICAL_LIMIT = 50
VECTOR_LIMIT = 50
RELATED_LIMIT = 20
CATCH_UP_CHUNK = 256  # records read, embedded and written per transaction
CATCH_UP_PASSES = 3  # a record corrected during a pass is caught by the next one
VECTOR_KIND = "vector"  # the sealing binding kind of a record version's vector
FORGOTTEN = LifecycleState.FORGOTTEN.value


def blinded_terms(content: RecordContent, key: bytes) -> tuple[str, ...]:
    """What the lexical index holds for one version: the words of its searchable text
    (``protocol.retrieval.searchable_text``) and its relation terms, blinded."""
    plain = lexical.terms(searchable_text(content)) + relation_terms(content)
    return tuple(lexical.blind_all(plain, key))


@dataclass(frozen=True, slots=True)
class _Vectors:
    """One space's unsealed vectors at one generation."""

    generation: int  # complete as of this generation
    model_id: str
    ids: tuple[str, ...]
    packed: dict[tuple[str, int], bytes]  # (record id, version) -> vectors.pack()
    matrix: vectors.Packed
    listed: int = -1  # the generation ``drop_unindexed`` last checked it against


class SearchIndex:
    """Indexes and searches every space of one record store (one per ``CloudService``)."""

    def __init__(self, store: SqlStore, vault: Vault, embedder: Callable[[], Embedder]) -> None:
        self._store = store
        self._vault = vault
        self._embedder = embedder
        self._lock = threading.Lock()
        self._cache: dict[str, _Vectors] = {}
        self._indexing: dict[str, threading.Lock] = {}  # one catch-up per space at a time
        # space -> (model id, last seq) at which a catch-up left nothing stale: every
        # version change takes a seq, so while the seq stays the index cannot fall behind
        self._caught_up: dict[str, tuple[str, int]] = {}
        # called whenever vectors are cached: the service starts listening for changes
        self.on_cache: Callable[[], None] = lambda: None
        self._heard = 0  # change notifications heard (a cache built meanwhile re-checks)
        self._closing = False  # set by ``close``: a catch-up stops between chunks

    def embedder(self) -> Embedder:
        return self._embedder()

    # --- indexing ---------------------------------------------------------------------

    def catch_up(self, space_id: str) -> int:
        """Index every live record of the space whose current version is not indexed
        (or whose vector is another model's); return how many records were indexed
        (0 when another process is indexing the space right now)."""
        return self.try_catch_up(space_id) or 0

    def try_catch_up(self, space_id: str) -> int | None:
        """``catch_up``, or None at once when another process holds the space's
        indexing lock (it indexes what this one would have)."""
        model_id = self.embedder().model_id
        with self._lock:
            indexing = self._indexing.setdefault(space_id, threading.Lock())
        # a second caller in this process waits, then finds the work done
        with indexing, try_index_lock(self._store.engine, space_id) as granted:
            return self._catch_up(space_id, model_id) if granted else None

    def unindexed(self, space_id: str) -> int:
        """How many live records of the space the indexes do not hold at their current
        version (with this model's vector): what a query cannot see yet."""
        model_id = self.embedder().model_id
        with self._store.reader() as s:
            seq = s.last_seq(space_id)  # read first: the count sees at least this state
            if self._caught_up.get(space_id) == (model_id, seq):
                return 0  # nothing changed since this process last found nothing stale
            behind = s.count_stale_for_search(space_id, model_id)
        if behind == 0:  # indexed (perhaps by another process) as of ``seq``
            with self._lock:
                self._caught_up[space_id] = (model_id, seq)
        return behind

    def _catch_up(self, space_id: str, model_id: str) -> int:
        total = 0
        for _ in range(CATCH_UP_PASSES):
            with self._store.reader() as s:  # reads hold up no pull
                seq = s.last_seq(space_id)
                if self._caught_up.get(space_id) == (model_id, seq):
                    break
                stale = s.stale_for_search(space_id, model_id)
            indexed = 0
            for start in range(0, len(stale), CATCH_UP_CHUNK):
                if self._closing:
                    return total + indexed  # the service is closing: stop between chunks
                indexed += self._index(space_id, stale[start : start + CATCH_UP_CHUNK])
            total += indexed
            if indexed == len(stale):
                self._caught_up[space_id] = (model_id, seq)  # all of it, as of ``seq``
            if indexed == 0:
                break  # nothing (readable) left to index
        return total

    def _index(self, space_id: str, items: Sequence[tuple[str, int]]) -> int:
        embedder = self.embedder()
        opened: list[tuple[str, int, str, RecordContent]] = []
        with self._store.reader() as s:
            for record_id, number in items:
                version = s.version(space_id, record_id, number)
                if version is None:
                    continue
                content = self._vault.open(
                    s,
                    space_id,
                    "record",
                    record_id,
                    number,
                    version.key_id,
                    version.sealed_content,
                    RecordContent,
                )
                if content is not None:
                    opened.append((record_id, number, version.key_id, content))
        if not opened:
            return 0
        key = self._vault.search_key(space_id)
        terms = [blinded_terms(content, key) for *_, content in opened]
        embedded = embedder.embed([searchable_text(content) for *_, content in opened])
        with self._store.session(space_id, lock=True) as s:
            now = s.records(space_id, [record_id for record_id, *_ in opened])
            deks = self._vault.data_keys(s, space_id, {key_id for _, _, key_id, _ in opened})
            rows: list[IndexRow] = []
            for (record_id, number, key_id, _), doc, vector in zip(
                opened, terms, embedded, strict=True
            ):
                row = now.get(record_id)
                dek = deks.get(key_id)
                if row is None or row.lifecycle == FORGOTTEN or row.current_version != number:
                    continue  # forgotten or corrected since it was read
                if dek is None:
                    continue  # its key is named by a forget: nothing may be derived
                sealed = self._vault.seal_derived(
                    dek, space_id, VECTOR_KIND, record_id, number, vectors.pack(vector)
                )
                rows.append(IndexRow(record_id, number, doc, embedder.model_id, sealed))
            s.index_records(space_id, rows)
        return len(rows)

    # --- reading ----------------------------------------------------------------------

    def lexical_hits(
        self, s: StoreSession, space_id: str, query: str, limit: int = LEXICAL_LIMIT
    ) -> dict[str, float]:
        """Records whose current version shares a stemmed term with the query, scored."""
        plain = lexical.terms(query)
        if not plain:
            return {}
        blinded = lexical.blind_all(plain, self._vault.search_key(space_id))
        return s.lexical_matches(space_id, blinded, limit)

    def vector_hits(self, space_id: str, query: str, limit: int = VECTOR_LIMIT) -> dict[str, float]:
        """Records whose current version is nearest the query in meaning (exact cosine)."""
        m = self._vectors(space_id)
        if not m.ids:
            return {}
        q = self.embedder().embed([query])[0]
        return {m.ids[i]: score for i, score in vectors.nearest(m.matrix, np.asarray(q), limit)}

    def related(
        self,
        s: StoreSession,
        space_id: str,
        contents: dict[str, RecordContent],
        limit: int = RELATED_LIMIT,
    ) -> dict[str, list[tuple[str, Relation]]]:
        """Records sharing a person, project or source episode with each given record."""
        key = self._vault.search_key(space_id)
        terms = {
            record_id: [(term, lexical.blind(term, key)) for term in relation_terms(content)]
            for record_id, content in contents.items()
        }
        found = s.records_with_terms(
            space_id, {blinded for pairs in terms.values() for _, blinded in pairs}, limit
        )
        out: dict[str, list[tuple[str, Relation]]] = {}
        for record_id, pairs in sorted(terms.items()):
            links: list[tuple[str, Relation]] = []
            for term, blinded in pairs:
                kind = relation_of(term)
                links.extend((other, kind) for other in found[blinded] if other != record_id)
            if links:
                out[record_id] = links
        return out

    # --- the vector cache ---------------------------------------------------------------

    def _vectors(self, space_id: str) -> _Vectors:
        model_id = self.embedder().model_id
        with self._lock:
            cached = self._cache.get(space_id)
            heard = self._heard
        with self._store.session(space_id) as s:
            generation = s.search_generation(space_id)
            same_model = cached is not None and cached.model_id == model_id
            if same_model and cached is not None and cached.generation == generation:
                return cached
            listing = s.vector_listing(space_id, model_id)
            held = cached.packed if same_model and cached is not None else {}
            packed = {item: held[item] for item in listing if item in held}
            missing = [item[0] for item in listing if item not in held]
            sealed = s.sealed_vectors(space_id, model_id, missing)
            deks = self._vault.data_keys(s, space_id, {v.key_id for v in sealed})
        for v in sealed:
            dek = deks.get(v.key_id)
            if dek is None:
                continue  # forgotten: it can never be read again
            packed[v.record_id, v.version] = self._vault.open_derived(
                dek, space_id, VECTOR_KIND, v.record_id, v.version, v.sealed
            )
        order = [item for item in listing if item in packed]
        built = _Vectors(
            generation,
            model_id,
            tuple(record_id for record_id, _ in order),
            {item: packed[item] for item in order},
            vectors.stack([packed[item] for item in order], DIM),
        )
        with self._lock:
            current = self._cache.get(space_id)
            if current is None or current.generation <= generation:
                self._cache[space_id] = built
            missed = self._heard != heard
        self.on_cache()
        if missed:  # a change was heard while this was read: it may have forgotten some
            self.drop_unindexed(space_id)
        return built

    def prune(self, space_id: str) -> None:
        """Bring a cached space up to its generation now (after a push that forgot), so
        forgotten vectors leave this process's memory without waiting for a query."""
        with self._lock:
            cached = self._cache.get(space_id)
        if cached is None:
            return
        with self._store.session(space_id) as s:
            if s.search_generation(space_id) == cached.generation:
                return
        self._vectors(space_id)  # re-lists the space: what is no longer indexed is dropped

    def drop_unindexed(self, space_id: str | None) -> None:
        """A change notification for ``space_id`` (None: any space may have changed):
        drop the cached vectors the space no longer indexes (forgotten, perhaps by
        another process), without opening new ones."""
        with self._lock:
            self._heard += 1
        if space_id is None:
            with self._lock:
                spaces = list(self._cache)
            for each in spaces:
                self.drop_unindexed(each)
            return
        with self._lock:
            cached = self._cache.get(space_id)
        if cached is None:
            return
        with self._store.session(space_id) as s:
            generation = s.search_generation(space_id)
            if generation in (cached.generation, cached.listed):
                return
            listing = set(s.vector_listing(space_id, cached.model_id))
        order = [item for item in cached.packed if item in listing]
        pruned = _Vectors(
            cached.generation,  # still what it was complete at: a query refreshes it
            cached.model_id,
            tuple(record_id for record_id, _ in order),
            {item: cached.packed[item] for item in order},
            vectors.stack([cached.packed[item] for item in order], DIM),
            listed=generation,
        )
        with self._lock:
            if self._cache.get(space_id) is cached:  # else a refresh replaced it meanwhile
                self._cache[space_id] = pruned

    def close(self) -> None:
        """The service is closing: a catch-up under way stops after its current chunk
        (what it wrote is complete rows; the rest stays stale, for the next process)."""
        self._closing = True

    def evict(self, space_id: str | None = None) -> None:
        """Drop the cached vectors of one space (or of all)."""
        with self._lock:
            if space_id is None:
                self._cache.clear()
                self._caught_up.clear()
            else:
                self._cache.pop(space_id, None)
                self._caught_up.pop(space_id, None)
