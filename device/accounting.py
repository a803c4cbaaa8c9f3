"""What this device's records already account for, so that its own end-of-session
consolidation (device-only classes, ``device/writing.py``) never undoes the user.

Invariants:
- The rule is ``protocol.consolidation.accounted``'s, the cloud consolidator's: a
  candidate sentence is not consolidated when a record, in any lifecycle state and any
  of its versions, has its words and came from the same episode, or was decided (made,
  corrected, retracted, confirmed) after the candidate's episode was typed.
- The device holds a subset and has no history index: ``Histories`` opens the device's
  records once per end of session (only when a device-only candidate waits) and is kept
  up to date with what that session's consolidation writes. Forgotten records are
  shredded here, so they are never found; their episodes' candidates went with them,
  and the forget drops the waiting candidates with their words
  (``drop_candidates_saying``, called by ``device/effects.py``).
- Positions are device-clock times in microseconds: the episode's ``typed_at`` and the
  ``at`` of the record's state history (``record_events``); reading never writes.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import suppress
from datetime import datetime
from typing import Any

from device import candidates, catalog, store
from device.db import Database
from device.facts import episode_facts
from protocol.consolidation import accounted
from protocol.errors import SealError
from protocol.model import LifecycleState, SourceKind
from protocol.sentences import split_sentences


def position(at: datetime | str) -> int:
    moment = datetime.fromisoformat(at) if isinstance(at, str) else at
    return int(moment.timestamp() * 1_000_000)


def history(db: Database, row: Any) -> accounted.RecordHistory | None:
    """The record's history as the rule reads it (None: forgotten or nothing opens)."""
    record_id = row["record_id"]
    lifecycle = LifecycleState(row["lifecycle"])
    if lifecycle is LifecycleState.FORGOTTEN:
        return None
    versions: list[accounted.VersionHistory] = []
    for version in store.versions_of(db, record_id):
        with suppress(LookupError, SealError):
            content = store.open_version(db, version)
            versions.append(
                accounted.VersionHistory(
                    int(version["version"]),
                    content.text,
                    tuple(content.source_episode_ids),
                    content.source_kind is SourceKind.USER_STATEMENT,
                )
            )
    if not versions:
        return None
    events = [position(e["at"]) for e in catalog.events_of(db, record_id)]
    return accounted.RecordHistory(record_id, lifecycle, tuple(versions), max(events, default=None))


class Histories:
    """The device's records' histories, read once, for one end of session."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._all: dict[str, accounted.RecordHistory] | None = None

    def _load(self) -> dict[str, accounted.RecordHistory]:
        if self._all is None:
            self._all = {}
            for row in store.all_records(self.db):
                found = history(self.db, row)
                if found is not None:
                    self._all[found.record_id] = found
        return self._all

    def accounted_for(
        self, episode_id: str, sentence: str, typed_at: datetime
    ) -> accounted.Accounted | None:
        candidate = accounted.CandidateSentence(episode_id, sentence, position(typed_at))
        return accounted.accounted_for(candidate, list(self._load().values()))

    def wrote(self, record_id: str) -> None:
        """A record this session's consolidation just made (so a later candidate of the
        same words, typed before it, is accounted for by it)."""
        row = store.record_row(self.db, record_id)
        found = None if row is None else history(self.db, row)
        if found is not None:
            self._load()[record_id] = found


def words_of_records(db: Database, record_ids: Iterable[str]) -> set[str]:
    """The words of every version of these records that still opens (before a forget)."""
    words: set[str] = set()
    for record_id in record_ids:
        for version in store.versions_of(db, record_id):
            with suppress(LookupError, SealError):
                words.add(accounted.words_of(store.open_version(db, version).text))
    return words


def drop_candidates_saying(db: Database, words: set[str]) -> None:
    """A forget also drops the waiting candidates with the forgotten words: they were
    typed before it, and consolidating them would bring the words back (a sentence
    typed after the forget is a new statement). Inside the forget's transaction."""
    if not words:
        return
    for row in candidates.waiting(db):
        episode = episode_facts(db, row.episode_id)
        if episode is None:
            continue
        sentences = split_sentences(episode.text) or [episode.text]
        if row.sentence < len(sentences) and accounted.words_of(sentences[row.sentence]) in words:
            db.execute(
                "DELETE FROM candidates WHERE episode_id = ? AND sentence = ?",
                (row.episode_id, row.sentence),
            )
