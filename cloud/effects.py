"""Performing the effects ``protocol.rules.decide`` returned, inside the push's transaction.

Invariants:
- Each effect is performed exactly as ``protocol.ledger._perform`` performs it; the
  content sealed is the effect's own (rules built it), never rebuilt here.
- Content rows (record versions, episodes, artifacts) are only inserted. A correction
  is a new sealed version pointing at the old one; state lives in ``records``.
- Every op that touches a record ends with one ``record_state`` change and one
  ``record_events`` entry per touched record (the whole state after the op).
- A forget marks skeletons (their ``state_seq`` the forget's seq: whatever reads the
  records changed since a seq sees it), writes one key-destruction event per record
  (its version keys, the source episodes it claims, the artifacts derived from it), marks every
  device holding any of those items pending, and drops the record's subject-index,
  history-index, search-index (lexical and vector) and derivation rows; the keys themselves are
  destroyed after commit (``ensure_destroyed``). The destroyed episodes' waiting
  consolidator work is dropped in the same transaction.
- Work for the consolidator is queued with the effects that make it: a marked
  candidate (ready once its conversation ended), a behaviour event, external content
  or a connected source's episode; a consolidated record resolves its candidates.
  Conversation ids reach the queue only as keyed tokens (``cloud.consolidator.tokens``).
- Writes on behalf of the consolidator (``device_id=None``) make no holder: only
  devices hold copies that a forget must wait for.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import assert_never

from cloud.consolidator.hints import seal_hint
from cloud.consolidator.tokens import conversation_token
from cloud.store.base import (
    ArtifactRow,
    ChangeRow,
    DerivationRow,
    EpisodeRow,
    ForgetKey,
    ProjectRow,
    RecordEventRow,
    StoreSession,
    VersionRow,
)
from cloud.store.sql_lineage import EPISODES_ONLY
from cloud.vault import Vault
from protocol import subjects
from protocol.consolidation import accounted
from protocol.messages import EpisodeContent
from protocol.model import ArtifactContent, LifecycleState, RecordContent, SourceKind
from protocol.operations import AddArtifact, AddEpisode, AnyOperation, MarkCandidate, SetProject
from protocol.rules import (
    AddVersion,
    CreateArtifact,
    CreateCandidate,
    CreateEpisode,
    CreateRecord,
    Effect,
    EndConversation,
    FlagConflict,
    FlagSuperseded,
    ForgetRecords,
    ResolveCandidates,
    SetLifecycle,
    SetProjectState,
    SetUsage,
)
from protocol.sentences import split_sentences

log = logging.getLogger("memsync.cloud")
FORGOTTEN = LifecycleState.FORGOTTEN.value
# the consolidator's item kind for an episode from each source (none: nothing to do)
WORK_FOR_SOURCE = {
    SourceKind.USER_BEHAVIOUR: "behaviour",
    SourceKind.EXTERNAL_CONTENT: "external",
    SourceKind.CONNECTED_SOURCE: "external",
}


# who applied an op (``applied_ops.device_id``) and made its versions
# (``record_versions.made_by``) when no device pushed it
SYSTEM_ACTOR = "system:consolidator"


class EffectWriter:
    """Performs one accepted op's effects for the device that pushed it (``device_id``),
    or for the consolidator (``device_id=None``: nothing becomes a holding)."""

    def __init__(
        self, s: StoreSession, vault: Vault, space_id: str, device_id: str | None, now: datetime
    ) -> None:
        self.s = s
        self.vault = vault
        self.space_id = space_id
        self.device_id = device_id
        self.actor = device_id or SYSTEM_ACTOR  # who made what this op writes
        self.now = now
        self._touched: dict[str, list[str]] = {}  # record id -> what changed, in order

    def perform(self, op: AnyOperation, effect: Effect) -> None:
        match effect:
            case CreateEpisode():
                assert isinstance(op, AddEpisode)
                self._episode(op)
            case CreateRecord():
                self._version(
                    effect.record_id, effect.version, None, effect.content, effect.lifecycle_state
                )
                self._touch(effect.record_id, "created")
            case AddVersion():
                self._version(effect.record_id, effect.version, effect.supersedes, effect.content)
                self._state(
                    effect.record_id,
                    current_version=effect.version,
                    lifecycle=effect.lifecycle_state.value,
                )
                self._touch(effect.record_id, "version")
            case SetLifecycle():
                self._state(effect.record_id, lifecycle=effect.lifecycle_state.value)
                self._touch(effect.record_id, "lifecycle")
            case SetUsage():
                usage = None if effect.restriction is None else effect.restriction.model_dump_json()
                self._state(effect.record_id, usage_restriction=usage)
                self._touch(effect.record_id, "usage")
            case FlagSuperseded():
                self._state(effect.record_id, superseded_by=effect.by_record)
                self._touch(effect.record_id, "superseded")
            case FlagConflict():
                row = self.s.record(self.space_id, effect.record_id)
                known = set(json.loads(row.conflicts)) if row and row.conflicts else set()
                self._state(
                    effect.record_id, conflicts=json.dumps(sorted({*known, effect.other_record}))
                )
                self._touch(effect.record_id, "conflict")
            case CreateArtifact():
                assert isinstance(op, AddArtifact)
                self._artifact(op, effect)
            case SetProjectState():
                assert isinstance(op, SetProject)
                seq = self.s.allocate_seq(self.space_id)
                self.s.set_project(
                    self.space_id, ProjectRow(effect.project, effect.open, self.now, seq)
                )
                self.change(seq, "project", project=effect.project)
            case CreateCandidate():
                assert isinstance(op, MarkCandidate)
                token = conversation_token(self.vault, self.space_id, effect.conversation_id)
                # the device's class, sealed: the consolidator may raise it, never drop it
                hint = seal_hint(
                    self.vault, self.s, self.space_id, effect.episode_id, effect.sentence,
                    op.sensitivity,
                )  # fmt: skip
                self.s.add_work_item(
                    self.space_id,
                    effect.episode_id,
                    effect.sentence,
                    "candidate",
                    token,
                    self.now,
                    device_hint=hint,
                )
            case EndConversation():
                token = conversation_token(self.vault, self.space_id, effect.conversation_id)
                self.s.end_conversation(self.space_id, token, self.now)
            case ResolveCandidates():
                refs = [(ref.episode_id, ref.sentence) for ref in effect.candidates]
                if refs:
                    self.s.resolve_work(self.space_id, refs, effect.record_id)
            case ForgetRecords():
                Forgetting(self).forget(effect)
            case _:
                assert_never(effect)

    def finish(self) -> None:
        """One ``record_state`` change and history entry per record the op touched."""
        for record_id, kinds in self._touched.items():
            row = self.s.record(self.space_id, record_id)
            if row is None or row.lifecycle == FORGOTTEN:
                continue
            if "created" not in kinds and not self.s.has_history(self.space_id, record_id):
                # a record older than the history index gets the keys of all its
                # versions the first time it changes
                self._index_history(record_id)
            seq = self.s.allocate_seq(self.space_id)
            self._state(record_id, state_seq=seq)
            self.change(seq, "record_state", record_id=record_id)
            self.s.add_record_event(
                self.space_id,
                RecordEventRow(
                    record_id, seq, self.now, ",".join(kinds), row.lifecycle, row.current_version
                ),
            )
        self._touched.clear()

    # --- helpers ------------------------------------------------------------------

    def _touch(self, record_id: str, kind: str) -> None:
        self._touched.setdefault(record_id, []).append(kind)

    def _state(self, record_id: str, **values: object) -> None:
        self.s.set_record_state(self.space_id, record_id, **values)

    def change(
        self,
        seq: int,
        kind: str,
        *,
        record_id: str | None = None,
        version: int | None = None,
        episode_id: str | None = None,
        event_id: int | None = None,
        artifact_id: str | None = None,
        project: str | None = None,
    ) -> None:
        self.s.add_change(
            self.space_id,
            ChangeRow(
                seq=seq,
                kind=kind,
                at=self.now,
                record_id=record_id,
                version=version,
                episode_id=episode_id,
                event_id=event_id,
                artifact_id=artifact_id,
                project=project,
            ),
        )

    def _episode(self, op: AddEpisode) -> None:
        content = EpisodeContent(
            conversation_id=op.conversation_id,
            text=op.text,
            source_kind=op.source_kind,
            source_id=op.source_id,
        )
        key_id, sealed = self.vault.seal_new(self.space_id, "episode", op.episode_id, 1, content)
        self.s.insert_episode(self.space_id, EpisodeRow(op.episode_id, op.typed_at, key_id, sealed))
        self.change(self.s.allocate_seq(self.space_id), "episode", episode_id=op.episode_id)
        self._hold("episode", op.episode_id)
        kind = WORK_FOR_SOURCE.get(op.source_kind)
        token = conversation_token(self.vault, self.space_id, op.conversation_id)
        if kind is not None:  # imports: none (the device writes them as candidates itself)
            self.s.add_work_item(self.space_id, op.episode_id, None, kind, token, self.now)
        if op.source_kind is SourceKind.USER_STATEMENT:
            # where a subjectless follow-up's context is found (``consolidator.candidates``)
            self.s.add_conversation_episode(self.space_id, token, op.episode_id, op.typed_at)

    def _hold(self, kind: str, item_id: str) -> None:
        """The pushing device holds what it wrote (the consolidator holds nothing)."""
        if self.device_id is not None:
            self.s.add_holdings(self.space_id, self.device_id, [(kind, item_id)])
            if kind == "record":  # and it is in its subset until the cloud chooses again
                self.s.add_subset_members(self.space_id, self.device_id, [item_id])

    def _version(
        self,
        record_id: str,
        version: int,
        supersedes: int | None,
        content: RecordContent,
        create_as: LifecycleState | None = None,
    ) -> None:
        """Seal and insert one version; with ``create_as``, the record is new."""
        s, space = self.s, self.space_id
        seq = s.allocate_seq(space)
        key_id, sealed = self.vault.seal_new(space, "record", record_id, version, content)
        if create_as is not None:
            s.insert_record(space, record_id, create_as.value, version, self.now, seq)
        s.insert_version(
            space,
            VersionRow(record_id, version, supersedes, self.now, key_id, sealed, self.actor),
        )
        self.change(seq, "record_version", record_id=record_id, version=version)
        self._hold("record", record_id)
        keys = subjects.stored_keys(content.text, content.subject, content.context_text)
        s.set_subject_tokens(space, record_id, [self.vault.subject_token(space, k) for k in keys])
        # the history index keeps every version's keys (its own prefixes keep them apart
        # from the subject keys under the same HMAC key); only a forget removes them
        if create_as is None and not s.has_history(space, record_id):
            self._index_history(record_id)  # older than the index: its earlier versions
        s.add_history_tokens(space, record_id, self._history_tokens(content))
        s.add_derivations(
            space,
            (
                DerivationRow(parent, "record", record_id, seq, position)
                for position, parent in enumerate(content.derived_from)
            ),
        )

    def _history_tokens(self, content: RecordContent) -> list[str]:
        keys = accounted.history_keys(content.text, content.source_episode_ids)
        return [self.vault.subject_token(self.space_id, k) for k in keys]

    def _index_history(self, record_id: str) -> None:
        """The history keys of every version of the record (``accounted.history_keys``)."""
        s, space = self.s, self.space_id
        tokens: list[str] = []
        for version in s.versions(space, record_id):
            content = self.vault.open(
                s,
                space,
                "record",
                record_id,
                version.version,
                version.key_id,
                version.sealed_content,
                RecordContent,
            )
            if content is not None:
                tokens += self._history_tokens(content)
        s.add_history_tokens(space, record_id, tokens)

    def _artifact(self, op: AddArtifact, effect: CreateArtifact) -> None:
        s, space = self.s, self.space_id
        seq = s.allocate_seq(space)
        content = ArtifactContent(kind=effect.artifact_kind, payload=op.payload)
        key_id, sealed = self.vault.seal_new(space, "artifact", effect.artifact_id, 1, content)
        s.insert_artifact(space, ArtifactRow(effect.artifact_id, self.now, key_id, sealed))
        s.add_derivations(
            space,
            (
                DerivationRow(parent, "artifact", effect.artifact_id, seq, position)
                for position, parent in enumerate(effect.derived_from)
            ),
        )
        self.change(seq, "artifact", artifact_id=effect.artifact_id)
        self._hold("artifact", effect.artifact_id)


class Forgetting:
    """The forget cascade of one ``ForgetRecords`` effect (see the module invariants)."""

    def __init__(self, writer: EffectWriter) -> None:
        self.w = writer
        self.s = writer.s
        self.space_id = writer.space_id

    def _sources(
        self, record_id: str, keys: list[ForgetKey], words: set[str] | None = None
    ) -> list[str]:
        """Append every version key of the record (and its versions' words to ``words``);
        return its source episodes."""
        sources: list[str] = []
        for version in self.s.versions(self.space_id, record_id):
            keys.append(ForgetKey(version.key_id))
            content = self.w.vault.open(
                self.s,
                self.space_id,
                "record",
                record_id,
                version.version,
                version.key_id,
                version.sealed_content,
                RecordContent,
            )
            if content is None:
                log.error(
                    "record %s v%d of %s has no data key; its source episodes cannot be read",
                    record_id,
                    version.version,
                    self.space_id,
                )
                continue
            sources.extend(e for e in content.source_episode_ids if e not in sources)
            if words is not None:
                words.add(accounted.words_of(content.text))
        return sources

    def forget(self, effect: ForgetRecords) -> None:
        s, space, now = self.s, self.space_id, self.w.now
        rows = s.records(space, effect.record_ids)
        records = [r for r in effect.record_ids if r in rows and rows[r].lifecycle != FORGOTTEN]
        keys: dict[str, list[ForgetKey]] = {r: [] for r in records}
        items: dict[str, list[tuple[str, str]]] = {r: [("record", r)] for r in records}
        claimed: dict[str, str] = {}  # episode id -> the record whose event destroys it
        words: set[str] = set()  # what the forgotten records ever said
        for record_id in records:
            for episode_id in self._sources(record_id, keys[record_id], words):
                claimed.setdefault(episode_id, record_id)
        orphans: list[str] = []
        if effect.all_episodes:
            orphans = [e for e in s.all_episode_ids(space) if e not in claimed]
        orphans += [e for e in effect.episode_ids if e not in claimed and e not in orphans]
        gone = s.forgotten_episode_ids(space, [*claimed, *orphans])
        episode_rows = s.episodes(space, [*claimed, *orphans])
        for episode_id, owner in claimed.items():
            row = episode_rows.get(episode_id)
            if row is not None and episode_id not in gone:
                keys[owner].append(ForgetKey(row.key_id, episode_id=episode_id))
                items[owner].append(("episode", episode_id))
        live_orphans = [e for e in orphans if e in episode_rows and e not in gone]
        artifact_rows = s.artifacts(space, effect.artifact_ids)
        for artifact_id in effect.artifact_ids:
            artifact = artifact_rows.get(artifact_id)
            if artifact is None or not records:
                continue
            parents = s.parents_of(space, "artifact", artifact_id)
            owner = next((r for r in records if r in parents), records[0])
            keys[owner].append(ForgetKey(artifact.key_id, artifact_id=artifact_id))
            items[owner].append(("artifact", artifact_id))
        if records and live_orphans:
            for episode_id in live_orphans:
                keys[records[0]].append(ForgetKey(episode_rows[episode_id].key_id, episode_id))
                items[records[0]].append(("episode", episode_id))
            live_orphans = []
        for record_id in records:
            seq = s.allocate_seq(space)
            s.mark_forgotten(space, record_id, now, seq)
            self.w.change(seq, "key_destruction", record_id=record_id, event_id=seq)
            s.add_record_event(
                space,
                RecordEventRow(
                    record_id, seq, now, "forgotten", FORGOTTEN, rows[record_id].current_version
                ),
            )
            holders = s.holders(space, items[record_id])
            s.add_forget_event(space, seq, record_id, now, keys[record_id], holders)
        if live_orphans:
            # episodes that belong to no record (forgetting all memory): one event that
            # names no record, pending on every device that holds any of them
            seq = s.allocate_seq(space)
            self.w.change(seq, "key_destruction", event_id=seq)
            holders = s.holders(space, [("episode", e) for e in live_orphans])
            s.add_forget_event(
                space,
                seq,
                EPISODES_ONLY,
                now,
                [ForgetKey(episode_rows[e].key_id, e) for e in live_orphans],
                holders,
            )
        # the destroyed episodes' waiting consolidator work goes with them
        s.drop_work_for_episodes(space, [*claimed, *orphans])
        s.drop_conversation_episodes(space, [*claimed, *orphans])
        self._drop_candidates_saying(words)
        s.drop_subject_tokens(space, records)
        s.drop_history_tokens(space, records)
        s.drop_search(space, records, purge=True)  # lexical rows, FTS segments, vectors
        s.drop_derivations(space, records, effect.artifact_ids)

    def _drop_candidates_saying(self, words: set[str]) -> None:
        """Waiting candidates with a forgotten record's words were typed before the
        forget: consolidating them later would bring the words back, so they are dropped
        with it (a sentence typed after the forget is a new statement and is kept)."""
        if not words:
            return
        s, space, vault = self.s, self.space_id, self.w.vault
        waiting = s.work_items(space, "candidate", ("waiting",))
        rows = s.episodes(space, {i.episode_id for i in waiting})
        texts: dict[str, list[str]] = {}
        for episode_id, row in rows.items():
            content = vault.open(
                s, space, "episode", episode_id, 1, row.key_id, row.sealed_content, EpisodeContent
            )
            if content is not None:
                texts[episode_id] = split_sentences(content.text)
        doomed: list[tuple[str, int | None]] = []
        for item in waiting:
            sentences = texts.get(item.episode_id, [])
            index = item.sentence
            if (
                index is not None
                and index < len(sentences)
                and accounted.words_of(sentences[index]) in words
            ):
                doomed.append(item.key)
        if doomed:
            s.complete_work(space, doomed, dropped=True)
