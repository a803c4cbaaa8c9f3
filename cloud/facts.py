"""Gathering ``protocol.rules.Facts`` for one operation from the record store.

Invariants:
- Facts come from the store and the key store, never from the caller's claims: the
  episodes a "said" check reads are opened from the episode log with their keys.
- The facts handed to ``decide`` equal what ``protocol.ledger.facts_for`` would hand
  it for the same history (records in creation order, derived records before
  artifacts), so the cloud decides exactly like the reference and the device.
- Forgotten content is absent: a record whose keys are gone has no content, a
  forgotten episode is unknown to "said" checks, but its id stays taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cloud.store.base import RecordRow, StoreSession, VersionRow
from cloud.vault import Vault
from protocol import subjects
from protocol.consolidation import accounted
from protocol.messages import EpisodeContent
from protocol.model import LifecycleState, RecordContent, SourceKind
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    Consolidate,
    Correct,
    Corroborate,
    ForgetArea,
    ForgetPermanently,
    Infer,
    MarkCandidate,
    Remember,
    RestrictUsage,
    SetProject,
)
from protocol.rules import (
    DerivedItem,
    EpisodeFacts,
    Facts,
    RecordFacts,
    episodes_named,
    related_keys,
)

FORGOTTEN = LifecycleState.FORGOTTEN.value
# the record events that are a decision about the record's words or use (not a flag
# another record set on it: usage, superseded, conflict)
DECISIONS = frozenset({"created", "version", "lifecycle"})


class FactsReader:
    """Reads what ``decide`` may look at, inside the push's transaction."""

    def __init__(
        self, s: StoreSession, vault: Vault, space_id: str, actor: str | None = None
    ) -> None:
        self.s = s
        self.vault = vault
        self.space_id = space_id
        self.actor = actor  # who pushed the op (a device id, or the consolidator's name)

    # --- single items -------------------------------------------------------------

    def content(self, row: RecordRow) -> RecordContent | None:
        """The current version's content of a live record (None when forgotten)."""
        if row.lifecycle == FORGOTTEN:
            return None
        version = self.s.version(self.space_id, row.record_id, row.current_version)
        return None if version is None else self._open(row.record_id, version)

    def _open(self, record_id: str, version: VersionRow) -> RecordContent | None:
        """One version of a record, opened (None once its key is forgotten)."""
        return self.vault.open(
            self.s,
            self.space_id,
            "record",
            record_id,
            version.version,
            version.key_id,
            version.sealed_content,
            RecordContent,
        )

    def record(self, row: RecordRow, *, with_content: bool = True) -> RecordFacts:
        lifecycle = LifecycleState(row.lifecycle)
        content = self.content(row) if with_content else None
        version = 0 if lifecycle is LifecycleState.FORGOTTEN else row.current_version
        return RecordFacts(row.record_id, lifecycle, version, content)

    def episodes(self, episode_ids: Iterable[str]) -> dict[str, EpisodeFacts]:
        """The named episodes whose content is still readable, opened with their keys."""
        out: dict[str, EpisodeFacts] = {}
        # a push's session keeps what it opened (dropped when the push ends)
        opened: dict[tuple[str, str], EpisodeContent] | None
        opened = getattr(self.s, "opened_episodes", None)
        for episode_id, row in self.s.episodes(self.space_id, episode_ids).items():
            key = (episode_id, row.key_id)
            content = None if opened is None else opened.get(key)
            if content is None or self.vault.data_key(self.s, self.space_id, row.key_id) is None:
                content = self.vault.open(
                    self.s,
                    self.space_id,
                    "episode",
                    episode_id,
                    1,
                    row.key_id,
                    row.sealed_content,
                    EpisodeContent,
                )
                if opened is not None and content is not None:
                    opened[key] = content
            if content is not None:
                out[episode_id] = EpisodeFacts(
                    episode_id,
                    content.conversation_id,
                    content.text,
                    row.typed_at,
                    content.source_kind,
                    content.source_id,
                )
        return out

    # --- what an op needs ---------------------------------------------------------

    def related(self, record_id: str, text: str, subject: str | None) -> list[RecordFacts]:
        """Active records the subject index finds for ``text``/``subject``."""
        return self.related_by_keys(record_id, subjects.lookup_keys(text, subject))

    def related_by_keys(self, record_id: str, keys: Sequence[str]) -> list[RecordFacts]:
        """Active records the subject index holds under any of ``keys``."""
        tokens = [self.vault.subject_token(self.space_id, key) for key in keys]
        found = self.s.records_with_subjects(self.space_id, tokens)
        ids = [r for r in found if r != record_id]
        rows = sorted(
            self.s.records(self.space_id, ids).values(),
            key=lambda r: (r.created_seq or 0, r.record_id),
        )
        return [self.record(row) for row in rows if row.lifecycle == LifecycleState.ACTIVE.value]

    def histories(self, keys: Iterable[str]) -> list[accounted.RecordHistory]:
        """Every record the history index keeps under ``keys`` (any lifecycle, any
        version), with each version it ever had and the position of its latest decision
        (``protocol.consolidation.accounted``). Opens only the records found."""
        tokens = [self.vault.subject_token(self.space_id, key) for key in keys]
        ids = self.s.records_with_history(self.space_id, tokens)
        return [self.history(row) for row in self.s.records(self.space_id, ids).values()]

    def history(self, row: RecordRow) -> accounted.RecordHistory:
        versions: list[accounted.VersionHistory] = []
        if row.lifecycle != FORGOTTEN:
            for version in self.s.versions(self.space_id, row.record_id):
                content = self._open(row.record_id, version)
                if content is not None:
                    versions.append(
                        accounted.VersionHistory(
                            version.version,
                            content.text,
                            tuple(content.source_episode_ids),
                            content.source_kind is SourceKind.USER_STATEMENT,
                        )
                    )
        decided = [
            event.seq
            for event in self.s.record_events(self.space_id, row.record_id)
            if DECISIONS & set(event.kind.split(","))
        ]
        return accounted.RecordHistory(
            row.record_id,
            LifecycleState(row.lifecycle),
            tuple(versions),
            max(decided, default=None),
        )

    def children(self, roots: Sequence[str]) -> dict[str, list[DerivedItem]]:
        """Derivation edges reachable from ``roots`` (forgotten items are not children)."""
        edges: dict[str, list[DerivedItem]] = {}
        seen = set(roots)
        frontier = set(roots)
        while frontier:
            rows = self.s.derivations_from(self.space_id, frontier)
            children = self.s.records(
                self.space_id, [r.child_id for r in rows if r.child_kind == "record"]
            )
            frontier = set()
            for row in rows:
                if row.child_kind == "record":
                    child = children.get(row.child_id)
                    if child is None or child.lifecycle == FORGOTTEN:
                        continue
                    if row.child_id not in seen:
                        seen.add(row.child_id)
                        frontier.add(row.child_id)
                edges.setdefault(row.parent_record_id, []).append(
                    DerivedItem(row.child_kind, row.child_id)
                )
        return edges

    def area_records(self, op: ForgetArea) -> list[str]:
        """Live records in the op's area (all live records for ``area: null``)."""
        out: list[str] = []
        for row in self.s.live_records(self.space_id):
            content = self.content(row)
            if content is not None and (op.area is None or op.area in content.life_areas):
                out.append(row.record_id)
        return out

    def known_records(
        self, record_ids: Iterable[str], *, with_content: bool = False
    ) -> dict[str, RecordFacts]:
        # for an artifact only existence and lifecycle matter; a derived record's rules
        # also ask whether a parent holds external content, so that is opened
        rows = self.s.records(self.space_id, record_ids)
        return {rid: self.record(row, with_content=with_content) for rid, row in rows.items()}

    def projects(self) -> dict[str, bool]:
        return {name: p.open for name, p in self.s.projects(self.space_id).items()}

    # --- the whole of it ------------------------------------------------------------

    def facts(self, op: AnyOperation) -> Facts:
        s, space = self.s, self.space_id
        record = None
        record_id = getattr(op, "record_id", None)
        if isinstance(record_id, str):
            row = s.record(space, record_id)
            record = None if row is None else self.record(row)
        episodes: dict[str, EpisodeFacts] = {}
        related: list[RecordFacts] = []
        children: dict[str, list[DerivedItem]] = {}
        area_records: list[str] = []
        known: dict[str, RecordFacts] = {}
        projects: dict[str, bool] = {}
        artifact_exists = False
        account_key = None
        candidate_marked = False
        if isinstance(op, AddEpisode):
            # only existence matters (an episode is written once, even after its content
            # was forgotten), so the content is not opened
            if s.episodes(space, [op.episode_id]):
                episodes[op.episode_id] = EpisodeFacts(op.episode_id, "", "")
        elif isinstance(op, Remember | Correct | MarkCandidate | Corroborate):
            episodes = self.episodes(
                episodes_named(op, record.content if record is not None else None)
            )
            if isinstance(op, Remember):
                related = self.related_by_keys(op.record_id, related_keys(op, episodes))
            if isinstance(op, MarkCandidate):
                candidate_marked = s.candidate_exists(space, op.episode_id, op.sentence)
        elif isinstance(op, Infer | Consolidate):
            episodes = self.episodes(op.content.source_episode_ids)
            related = self.related_by_keys(op.record_id, related_keys(op, episodes))
            known = self.known_records(op.content.derived_from, with_content=True)
        elif isinstance(op, AddArtifact):
            known = self.known_records(op.derived_from)
            artifact_exists = bool(s.artifacts(space, [op.artifact_id]))
        elif isinstance(op, ForgetPermanently):
            children = self.children([op.record_id])
            if record is None and op.episode_ids:
                episodes = self.episodes(op.episode_ids)
        elif isinstance(op, ForgetArea):
            account_key = s.account_key(space)
            area_records = self.area_records(op)
            children = self.children(area_records)
        if isinstance(op, Remember | RestrictUsage | SetProject):
            projects = self.projects()
        concurrent: list[int] = []
        if isinstance(op, Correct) and op.base_version is not None and record is not None:
            concurrent = [
                version
                for version, made_by in s.version_authors(space, op.record_id, op.base_version)
                if made_by is not None and made_by != self.actor
            ]
        return Facts(
            space_id=space,
            record=record,
            episodes=episodes,
            related=related,
            children=children,
            area_records=area_records,
            known_records=known,
            projects=projects,
            artifact_exists=artifact_exists,
            account_key=account_key,
            candidate_marked=candidate_marked,
            concurrent_versions=concurrent,
        )
