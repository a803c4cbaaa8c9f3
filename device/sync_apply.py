"""Applying pulled changes: one ``match`` over ``protocol.messages.AnyChange``, one
method per kind (``docs/protocol.md``, "The sync algorithm").

Invariants:
- Every change of a page is applied inside the page's ONE local transaction (held by
  ``device.sync.SyncSession._apply_page``); the common kinds queue their rows in the
  page's ``device.sync_rows.PageRows`` (written set-at-a-time), the rare ones write the
  queue first and take the per-row path (``_rare``); a change that does not open, or one of a
  kind no case matches (``refuse_unknown_change``), aborts the whole page and the
  cursor stays where it was.
- Content already held is never rewritten; content this device forgot is never
  stored again (skeletons and episode/artifact tombstones win over later changes).
- A pulled item is opened (its sealed key with this device's private key, its content
  with that key and its binding) and parsed before anything of it is stored.
- A pulled ``record_state`` is the server's word on the record's whole state and
  overwrites the local one (lifecycle, current version, usage, flags).
- Key destruction shreds through ``device.shred`` (the record, its episodes, the
  artifacts named and everything this device derived from it) and records the event id
  in ``pending_acks`` in the same transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Never, NoReturn

from pydantic import ValidationError

from device import candidates, catalog, provisional, store
from device import subset as subset_of
from device.errors import ChangeDoesNotOpen, UnknownChangeKind
from device.facts import episode_facts
from device.keys import SealedKeyDoesNotOpen, open_item, open_sealed_key
from device.sync_base import FORGOTTEN, SessionBase
from device.sync_page import PageWork
from device.sync_state import SyncState
from protocol.errors import SealError
from protocol.messages import (
    AnyChange,
    ArtifactChange,
    EpisodeChange,
    EpisodeContent,
    KeyDestruction,
    ProjectChange,
    PullResponse,
    RecordStateChange,
    RecordVersionChange,
    SubsetChange,
)
from protocol.model import ArtifactContent, LifecycleState, RecordContent
from protocol.sentences import normalise, split_sentences

RECORD_CHANGES = (RecordVersionChange, RecordStateChange)


def sent_items(page: PullResponse) -> list[tuple[str, str]]:
    """The (kind, id) of every record, episode and artifact a page carries."""
    items: list[tuple[str, str]] = []
    for change in page.changes:
        match change:
            case RecordVersionChange() | RecordStateChange():
                items.append(("record", change.record_id))
            case EpisodeChange():
                items.append(("episode", change.episode_id))
            case ArtifactChange():
                items.append(("artifact", change.artifact_id))
            case ProjectChange() | KeyDestruction() | SubsetChange():
                pass  # names no item this device holds for the resync to keep
            case _:
                refuse_unknown_change(change)
    return items


def refuse_unknown_change(change: Never) -> NoReturn:
    """The ``case _`` of every interpreter of pulled changes: unreachable for the type
    checker (each kind has its case), and at run time a change no case matched refuses
    the whole page, so the cursor never moves past a change this device did not apply."""
    raise UnknownChangeKind(
        getattr(change, "kind", type(change).__name__), getattr(change, "seq", None)
    )


class Applying(SessionBase):
    def _apply_change(self, change: AnyChange, private_key: Any) -> None:
        match change:
            case RecordVersionChange():
                self._record_version(change, private_key)
            case RecordStateChange():
                self._record_state(change)
            case EpisodeChange():
                self._episode(change, private_key)
            case ArtifactChange():
                self._artifact(change, private_key)
            case ProjectChange():
                catalog.set_project(self.db, change.project, change.open, change.at.isoformat())
            case KeyDestruction():
                self._key_destruction(change)
            case SubsetChange():
                self._subset_change(change)
            case _:
                refuse_unknown_change(change)

    def _rare(self, apply: Callable[[], None]) -> None:
        """A rare change takes the per-row path: the page's queued rows are written
        first, and what it may have changed is read from the store again after."""
        rows = self._work().rows
        rows.flush()
        apply()
        rows.forget()

    def _work(self) -> PageWork:
        """The page in flight (``device.sync.SyncSession._apply_page`` sets it)."""
        if self._page is None:
            raise RuntimeError("a pulled change is applied only inside its page")
        return self._page

    def _open_dek(self, private_key: Any, change: Any, what: str) -> bytes:
        try:
            return open_sealed_key(private_key, change.sealed_key)
        except SealedKeyDoesNotOpen as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}): {exc}; the page was not applied "
                "and the cursor did not move"
            ) from exc

    def _open(
        self, private_key: Any, change: Any, what: str, kind: str, item_id: str, version: int
    ) -> tuple[bytes, bytes]:
        """The DEK and the opened plaintext of a pulled sealed item."""
        dek = self._open_dek(private_key, change, what)
        try:
            plain = open_item(
                dek, change.sealed_content, self._work().space, kind, item_id, version
            )
        except SealError as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}) does not open: {exc}; "
                "the page was not applied and the cursor did not move"
            ) from exc
        return dek, plain

    @staticmethod
    def _parse(change: Any, what: str, parse: Callable[[bytes], Any], plain: bytes) -> Any:
        try:
            return parse(plain)
        except ValidationError as exc:
            raise ChangeDoesNotOpen(
                f"pulled change seq {change.seq} ({what}) does not open: {exc}; "
                "the page was not applied and the cursor did not move"
            ) from exc

    def _store_key(self, key_id: str, dek: bytes, what: str, *, now: bool = False) -> None:
        """Hold the key (queued with the page's rows, or written ``now``)."""
        if now:
            held = store.put_key_once(self.db, key_id, dek, "cloud")
        else:
            held = self._work().rows.put_key_once(key_id, dek)
        if held is not None and held != dek:
            raise ChangeDoesNotOpen(
                f"{what}: key {key_id} is already held with different bytes; "
                "the page was not applied"
            )

    def _record_version(self, change: RecordVersionChange, private_key: Any) -> None:
        work = self._work()
        rows = work.rows
        lifecycle = rows.lifecycle(change.record_id)
        if lifecycle == FORGOTTEN:
            self.report.ignored += 1
            return
        what = f"record {change.record_id} v{change.version}"
        # a version needs its record's row: a record not held has no version held
        if lifecycle is not None and rows.version_held(change.record_id, change.version):
            rows.flush()
            if not provisional.is_provisional(self.db, change.record_id, change.version):
                store.set_record_state(self.db, change.record_id, sync_state=SyncState.SYNCED)
                return
            # this device's own, not yet numbered by the cloud: the cloud's version wins
            # the number, and this device's words move to the next free one
            provisional.move_aside(self.db, change.record_id, change.version, self.random_bytes)
            rows.forget()
        dek, plain = self._open(
            private_key, change, what, "record", change.record_id, change.version
        )
        content = self._parse(change, what, RecordContent.model_validate_json, plain)
        self._store_key(change.key_id, dek, what)
        if lifecycle is None:
            # Its state follows as a record_state change; until then it is not used.
            rows.insert_record(change.record_id, LifecycleState.CANDIDATE.value, change.version)
        # as effects.write_version with the pulled sealed item
        rows.insert_version(
            change.record_id,
            change.version,
            (
                change.supersedes,
                content.epistemic_state.value,
                change.recorded_at.isoformat(),
                work.space,
                change.key_id,
                change.sealed_content,
            ),
        )
        rows.add_derivations(change.record_id, content.derived_from)
        work.opened_version(change.record_id, change.version, content)
        if lifecycle is None:
            work.subject_due(change.record_id)
        if content.background:
            rows.flush()
            self._resolve_candidates(change.record_id, content)

    def _resolve_candidates(self, record_id: str, content: RecordContent) -> None:
        """The cloud consolidated this device's candidate: note which record it became
        (the candidate whose sentence is the record's text, in its source episode)."""
        wanted = normalise(content.text)
        for episode_id in content.source_episode_ids:
            facts = episode_facts(self.db, episode_id)
            if facts is None:
                continue
            for index, sentence in enumerate(split_sentences(facts.text)):
                if normalise(sentence) == wanted:
                    candidates.resolve(self.db, [(episode_id, index)], record_id)

    def _record_state(self, change: RecordStateChange) -> None:
        rows = self._work().rows
        lifecycle = rows.lifecycle(change.record_id)
        if lifecycle == FORGOTTEN:
            self.report.ignored += 1
            return
        if change.lifecycle_state is LifecycleState.FORGOTTEN:
            self._rare(lambda: self._shred_closure(change.record_id, change.at.isoformat()))
            return
        if lifecycle is None:
            rows.insert_record(
                change.record_id, change.lifecycle_state.value, change.current_version
            )
        usage = change.usage_restriction
        rows.set_pulled_state(
            store.pulled_state_row(
                change.record_id,
                lifecycle=change.lifecycle_state.value,
                current_version=change.current_version,
                usage_area=usage.area.value if usage and usage.area else None,
                usage_project=usage.project if usage else None,
                superseded_by=change.superseded_by_record,
                conflicts=change.conflicts_with,
            )
        )
        rows.log_event(
            change.record_id,
            change.at.isoformat(),
            change.lifecycle_state.value,
            change.current_version,
        )
        # its subject keys follow its current content, written once at the page's end
        self._work().subject_due(change.record_id)

    def _episode(self, change: EpisodeChange, private_key: Any) -> None:
        rows = self._work().rows
        forgotten, held = rows.episode_known(change.episode_id)
        if forgotten:
            self.report.ignored += 1
            return
        if held:
            rows.flush()
            store.set_episode_sync(self.db, change.episode_id, SyncState.SYNCED, None)
            return
        what = f"episode {change.episode_id}"
        dek, plain = self._open(private_key, change, what, "episode", change.episode_id, 1)
        content = self._parse(change, what, EpisodeContent.model_validate_json, plain)
        self._store_key(change.key_id, dek, what)
        rows.insert_episode(
            change.episode_id,
            (
                content.conversation_id,
                change.typed_at.isoformat(),
                self._work().space,
                change.key_id,
                change.sealed_content,
                SyncState.SYNCED,
            ),
        )

    def _artifact(self, change: ArtifactChange, private_key: Any) -> None:
        self._rare(lambda: self._artifact_per_row(change, private_key))

    def _artifact_per_row(self, change: ArtifactChange, private_key: Any) -> None:
        gone_parent = any(
            (row := store.record_row(self.db, parent)) is not None and row["lifecycle"] == FORGOTTEN
            for parent in change.derived_from
        )
        if catalog.artifact_forgotten(self.db, change.artifact_id) or gone_parent:
            self.report.ignored += 1
            return
        if catalog.artifact_row(self.db, change.artifact_id) is not None:
            catalog.set_artifact_sync(self.db, change.artifact_id, SyncState.SYNCED, None)
            return
        what = f"artifact {change.artifact_id}"
        dek, plain = self._open(private_key, change, what, "artifact", change.artifact_id, 1)
        content = self._parse(change, what, ArtifactContent.model_validate_json, plain)
        self._store_key(change.key_id, dek, what, now=True)
        catalog.insert_artifact(
            self.db,
            artifact_id=change.artifact_id,
            kind=content.kind.value,
            created_at=change.created_at.isoformat(),
            bound_space=self._work().space,
            key_id=change.key_id,
            sealed=change.sealed_content,
            sync_state=SyncState.SYNCED,
        )
        catalog.add_derivations(self.db, "artifact", change.artifact_id, change.derived_from)

    def _key_destruction(self, change: KeyDestruction) -> None:
        self._rare(lambda: self._key_destruction_per_row(change))

    def _key_destruction_per_row(self, change: KeyDestruction) -> None:
        at = change.destroyed_at.isoformat()
        if change.record_id is None:
            # episodes that belonged to no record: forgetting all memory
            self._shred(episode_ids=tuple(change.episode_ids), at=at)
        else:
            self._shred_closure(
                change.record_id, at, change.key_ids, change.episode_ids, change.artifact_ids
            )
        store.add_pending_ack(self.db, change.event_id, change.record_id or "", self.now())

    def _subset_change(self, change: SubsetChange) -> None:
        self._rare(lambda: self._subset_change_per_row(change))

    def _subset_change_per_row(self, change: SubsetChange) -> None:
        at = change.at.isoformat()
        if change.entered:
            subset_of.entered(self.db, change.record_id, change.reason or "chosen", at)
            self.report.entered.append(change.record_id)
        elif subset_of.leave(
            self.db, change.record_id, change.episode_ids, change.artifact_ids, at
        ):
            self.report.left.append(change.record_id)
        elif change.record_id in subset_of.deferred(self.db):
            self.report.left_later.append(change.record_id)

    # --- pull ------------------------------------------------------------------------
