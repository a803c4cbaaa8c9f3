"""Cloud retrieval: the fixed eight-step pipeline (``protocol.retrieval``) over a whole
space, the way ``device.retrieval`` runs it over one device's subset.

Invariants:
- The indexes (``cloud.search``) only propose ids. Each proposed record, each record
  related to one, and each companion (conflict partner, superseded predecessor) is
  re-read from the record store into a ``Candidate`` — lifecycle, current version
  opened with its key through the vault, usage restriction, flags, project state — and
  the pipeline filters on that, so an index holding something stale can never bring
  back a record that is not in use, invalid, a candidate, out of its area, sensitive
  without consent, or forgotten.
- Everything read for one query is read in one store transaction, so the candidates
  agree with each other. A query never indexes (``cloud.indexer`` does, after a push):
  it sees what is indexed when it runs.
- ``personalized=False`` (or ``limit`` 0) retrieves nothing: no index is read.
- A space is a wall: every query names it, and an id from another space is unknown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime

from cloud.search import SearchIndex
from cloud.store import SqlStore
from cloud.store.base import RecordRow, StoreSession, VersionRow
from cloud.vault import Vault
from protocol.model import LifeArea, LifecycleState, RecordContent, Sensitivity, UsageRestriction
from protocol.retrieval.block import MemoryBlock
from protocol.retrieval.gather import gather as gather_records
from protocol.retrieval.pipeline import retrieve
from protocol.retrieval.task import Candidate, SearchHits, Task

FORGOTTEN = LifecycleState.FORGOTTEN.value
ACTIVE = LifecycleState.ACTIVE.value


class CandidateReader:
    """Reads records' authoritative state inside one store transaction, in batches."""

    def __init__(self, s: StoreSession, vault: Vault, space_id: str) -> None:
        self.s = s
        self.vault = vault
        self.space_id = space_id
        self.projects = {name: p.open for name, p in s.projects(space_id).items()}
        self._rows: dict[str, RecordRow | None] = {}

    def rows(self, record_ids: Iterable[str]) -> dict[str, RecordRow]:
        wanted = set(record_ids)
        missing = sorted(wanted - set(self._rows))
        if missing:
            found = self.s.records(self.space_id, missing)
            for record_id in missing:
                self._rows[record_id] = found.get(record_id)
        return {r: row for r in wanted if (row := self._rows.get(r)) is not None}

    def _lifecycle(self, record_id: str) -> str | None:
        row = self._rows.get(record_id)
        return None if row is None else row.lifecycle

    def _contents(
        self, rows: list[RecordRow]
    ) -> dict[str, tuple[RecordContent | None, VersionRow]]:
        """The current version of each live record, opened (None: its key is forgotten)."""
        live = {r.record_id: r.current_version for r in rows if r.lifecycle != FORGOTTEN}
        versions = self.s.versions_at(self.space_id, live)
        deks = self.vault.data_keys(self.s, self.space_id, {v.key_id for v in versions.values()})
        out: dict[str, tuple[RecordContent | None, VersionRow]] = {}
        for record_id, v in versions.items():
            dek = deks.get(v.key_id)
            content = (
                None
                if dek is None
                else self.vault.open_with(
                    dek,
                    self.space_id,
                    "record",
                    record_id,
                    v.version,
                    v.sealed_content,
                    RecordContent,
                )
            )
            out[record_id] = (content, v)
        return out

    def _said_on(self, contents: Iterable[RecordContent]) -> dict[str, datetime]:
        """``typed_at`` of every source episode still held (a forgotten one is gone)."""
        ids = sorted({e for c in contents if c.said_at is None for e in c.source_episode_ids})
        if not ids:
            return {}
        gone = self.s.forgotten_episode_ids(self.space_id, ids)
        episodes = self.s.episodes(self.space_id, ids)
        return {e: row.typed_at for e, row in episodes.items() if e not in gone}

    def load(self, ids: Iterable[str], into: dict[str, Candidate]) -> None:
        """Add the candidates of ``ids`` not yet in ``into`` (unknown ids are skipped)."""
        wanted = sorted(set(ids) - set(into))
        known = self.rows(wanted)
        rows = [known[r] for r in wanted if r in known]
        if not rows:
            return
        refs = {r.superseded_by for r in rows if r.superseded_by}
        refs.update(o for r in rows for o in json.loads(r.conflicts or "[]"))
        self.rows(refs)  # the lifecycles the flags below depend on, in one query
        opened = self._contents(rows)
        replaced = self.s.superseded_by_records(self.space_id, [r.record_id for r in rows])
        typed = self._said_on(c for c, _ in opened.values() if c is not None)
        for row in rows:
            content, version = opened.get(row.record_id, (None, None))
            into[row.record_id] = self.candidate(row, content, version, replaced, typed)

    def candidate(
        self,
        row: RecordRow,
        content: RecordContent | None,
        version: VersionRow | None,
        replaced: dict[str, list[str]],
        typed: dict[str, datetime],
    ) -> Candidate:
        record_id = row.record_id
        learned_at = None if version is None else version.recorded_at
        usage = (
            UsageRestriction.model_validate_json(row.usage_restriction)
            if row.usage_restriction
            else None
        )
        superseded_by = row.superseded_by
        if superseded_by is not None and self._lifecycle(superseded_by) != ACTIVE:
            superseded_by = None  # only an active newer record replaces it
        conflicts = [
            other
            for other in json.loads(row.conflicts or "[]")
            if self._lifecycle(other) not in (None, FORGOTTEN)
        ]
        said_on = None
        if content is not None:  # said_at, else the first source episode still held
            said_on = content.said_at or next(
                (typed[e] for e in content.source_episode_ids if e in typed), learned_at
            )
        return Candidate(
            record_id=record_id,
            lifecycle=LifecycleState(row.lifecycle),
            content=content,
            learned_at=learned_at,
            version=None if version is None else version.version,
            usage_area=None if usage is None else usage.area,
            usage_project=None if usage is None else usage.project,
            project_open=content is None
            or content.project is None
            or self.projects.get(content.project, True),
            superseded_by=superseded_by,
            supersedes=tuple(replaced.get(record_id, ())),
            conflicts_with=tuple(conflicts),
            said_on=said_on,
        )


class CloudRetrieval:
    """Recall over whole spaces of one record store."""

    def __init__(self, store: SqlStore, vault: Vault, index: SearchIndex) -> None:
        self.store = store
        self.vault = vault
        self.index = index

    def gather(
        self, space_id: str, task: Task, *, lexical: bool = True, vector: bool = True
    ) -> tuple[list[Candidate], SearchHits]:
        """What the indexes propose, and the authoritative state of every record involved:
        hits, records related to them, and their companions (``lexical``/``vector``
        switch an index off, for evaluation). Reads the indexes as they are: indexing
        runs after pushes (``cloud.indexer``), never here."""
        if not task.personalized or task.limit <= 0:
            return [], SearchHits()
        vec = self.index.vector_hits(space_id, task.query) if vector else {}
        with self.store.session(space_id) as s:
            reader = CandidateReader(s, self.vault, space_id)
            return gather_records(
                lexical=self.index.lexical_hits(s, space_id, task.query) if lexical else {},
                vector=vec,
                vector_searched=vector,
                load=reader.load,
                related=lambda contents: self.index.related(s, space_id, contents),
                task=task,
            )

    def recall(
        self,
        space_id: str,
        query: str,
        *,
        now: datetime,
        area: LifeArea | None = None,
        project: str | None = None,
        personalized: bool = True,
        factual: bool | None = None,
        consents: frozenset[Sensitivity] = frozenset(),
        limit: int = 5,
        lexical: bool = True,
        vector: bool = True,
    ) -> MemoryBlock:
        """Run the pipeline over the whole space (``lexical``/``vector``: see ``gather``)."""
        task = Task(
            query=query,
            now=now,
            area=area,
            project=project,
            personalized=personalized,
            factual=factual,
            consents=frozenset(consents),
            limit=limit,
        )
        candidates, hits = self.gather(space_id, task, lexical=lexical, vector=vector)
        return retrieve(task, candidates, hits)
