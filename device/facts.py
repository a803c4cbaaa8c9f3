"""The facts ``protocol.rules.decide`` reads, gathered from this device's store.

Invariants:
- The shape is exactly ``protocol.ledger.facts_for``'s, so a local decision equals the
  reference ledger's on the same state: the named record with its current content,
  the op's episodes (opened, with when they were typed), related records (found by
  ``subjects.lookup_keys``; ``decide`` checks the subject precisely), every derivation
  edge, the records a mass forget covers, the parents an op names, projects, whether
  the artifact exists (a forgotten episode or artifact id stays taken), and the
  account key.
- Facts come only from the store, never from the caller's claim: an episode whose
  content is gone, or that the cloud refused, is not a fact.
- Reading facts never writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from datetime import datetime
from typing import Any

from device import candidates, catalog, store
from device.db import Database
from device.sync_state import SyncState
from protocol.errors import SealError
from protocol.model import LifecycleState, RecordContent
from protocol.operations import (
    AddArtifact,
    AddEpisode,
    AnyOperation,
    ForgetArea,
    ForgetPermanently,
    MarkCandidate,
)
from protocol.rules import (
    EpisodeFacts,
    Facts,
    RecordFacts,
    episodes_named,
    parents_named,
    related_keys,
)


def current_content(db: Database, row: Any) -> RecordContent | None:
    """The record's current version, opened; None when it is gone or does not open."""
    if row is None or row["current_version"] is None:
        return None
    version = store.version_row(db, row["record_id"], int(row["current_version"]))
    if version is None:
        return None
    with suppress(LookupError, SealError):
        return store.open_version(db, version)
    return None


def record_facts(db: Database, record_id: str) -> RecordFacts | None:
    row = store.record_row(db, record_id)
    if row is None:
        return None
    lifecycle = LifecycleState(row["lifecycle"])
    if lifecycle is LifecycleState.FORGOTTEN:
        return RecordFacts(record_id, lifecycle, 0, None)
    return RecordFacts(
        record_id,
        lifecycle,
        int(row["current_version"] or 0),
        current_content(db, row),
        highest_version=store.highest_version(db, record_id),
    )


def episode_facts(db: Database, episode_id: str) -> EpisodeFacts | None:
    return episode_facts_of(db, store.episode_row(db, episode_id))


def episode_facts_of(db: Database, row: Any) -> EpisodeFacts | None:
    """``episode_facts`` of an ``episodes`` row already read (None: no row)."""
    if row is None or row["sync_state"] == SyncState.REFUSED:
        return None
    try:
        content = store.open_episode(db, row)
    except (LookupError, SealError):
        return None
    return EpisodeFacts(
        row["episode_id"],
        content.conversation_id,
        content.text,
        datetime.fromisoformat(row["typed_at"]),
        content.source_kind,
        content.source_id,
    )


def _related(
    db: Database, op: AnyOperation, episodes: Mapping[str, EpisodeFacts]
) -> list[RecordFacts]:
    keys = related_keys(op, episodes)
    if not keys:
        return []
    record_id = getattr(op, "record_id", None)
    found = []
    for other in catalog.same_key_records(db, keys):
        if other != record_id and (facts := record_facts(db, other)) is not None:
            found.append(facts)
    return found


def area_records(db: Database, op: ForgetArea) -> list[str]:
    covered = []
    for row in store.all_records(db):
        if row["lifecycle"] == LifecycleState.FORGOTTEN.value:
            continue
        content = current_content(db, row)
        if content is not None and (op.area is None or op.area in content.life_areas):
            covered.append(row["record_id"])
    return covered


def facts_for(db: Database, op: AnyOperation, meta: store.Meta | None = None) -> Facts:
    """Everything ``decide(op, ...)`` may look at, as this device's store knows it
    (``meta``: this store's meta row, if the caller has just read it)."""
    meta = meta or store.get_meta(db)
    record_id = getattr(op, "record_id", None)
    record = record_facts(db, record_id) if isinstance(record_id, str) else None
    named = episodes_named(op, record.content if record else None)
    episodes = {e: f for e in named if (f := episode_facts(db, e)) is not None}
    if isinstance(op, AddEpisode) and store.episode_forgotten(db, op.episode_id):
        # the id is taken; its content is gone (``decide`` only asks whether it exists)
        episodes[op.episode_id] = EpisodeFacts(op.episode_id, "", "")
    known = {p: r for p in parents_named(op) if (r := record_facts(db, p)) is not None}
    artifact_exists = isinstance(op, AddArtifact) and (
        catalog.artifact_row(db, op.artifact_id) is not None
        or catalog.artifact_forgotten(db, op.artifact_id)
    )
    return Facts(
        space_id=meta.space_id or meta.local_space,
        record=record,
        episodes=episodes,
        related=_related(db, op, episodes),
        # only a forget follows derivations (``protocol.rulebook.forgetting``); reading
        # every edge for any other op grew with the store
        children=catalog.children(db) if isinstance(op, ForgetPermanently | ForgetArea) else {},
        area_records=area_records(db, op) if isinstance(op, ForgetArea) else (),
        known_records=known,
        projects=catalog.projects(db),
        artifact_exists=artifact_exists,
        account_key=meta.account_key,
        candidate_marked=isinstance(op, MarkCandidate)
        and candidates.is_marked(db, op.episode_id, op.sentence),
    )
