"""The device's candidates, ended conversations and device-only sensitive classes.

Invariants:
- A candidate row holds the detector's labels and ids only; its words stay sealed in
  the episode, and the row goes when that episode is shredded (``device/shred.py``).
- A sensitive class the user keeps on this device marks every episode and record of
  that class ``device_only``; their operations are applied locally and never queued,
  so no byte of them (not even ciphertext) is ever pushed. The choice is kept here,
  inside the encrypted database, and is never sent to the cloud.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from device.db import Database
from protocol.model import ContentType, Sensitivity, TimeKind


@dataclass(frozen=True, slots=True)
class CandidateRow:
    episode_id: str
    sentence: int
    conversation_id: str
    content_type: ContentType
    sensitivity: Sensitivity
    time_kind: TimeKind
    score: float
    model_id: str
    marked_at: str
    record_id: str | None


def _row(row: Any) -> CandidateRow:
    return CandidateRow(
        episode_id=row["episode_id"],
        sentence=int(row["sentence"]),
        conversation_id=row["conversation_id"],
        content_type=ContentType(row["content_type"]),
        sensitivity=Sensitivity(row["sensitivity"]),
        time_kind=TimeKind(row["time_kind"]),
        score=float(row["score"]),
        model_id=row["model_id"],
        marked_at=row["marked_at"],
        record_id=row["record_id"],
    )


def insert(db: Database, row: CandidateRow) -> None:
    db.execute(
        "INSERT INTO candidates (episode_id, sentence, conversation_id, content_type, "
        "sensitivity, time_kind, score, model_id, marked_at, record_id) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)",
        (
            row.episode_id,
            row.sentence,
            row.conversation_id,
            row.content_type.value,
            row.sensitivity.value,
            row.time_kind.value,
            row.score,
            row.model_id,
            row.marked_at,
        ),
    )


def is_marked(db: Database, episode_id: str, sentence: int) -> bool:
    return (
        db.one(
            "SELECT 1 FROM candidates WHERE episode_id = ? AND sentence = ?",
            (episode_id, sentence),
        )
        is not None
    )


def resolve(db: Database, refs: Iterable[tuple[str, int]], record_id: str) -> None:
    for episode_id, sentence in refs:
        db.execute(
            "UPDATE candidates SET record_id = ? WHERE episode_id = ? AND sentence = ?",
            (record_id, episode_id, sentence),
        )


def waiting(db: Database, *, conversation_id: str | None = None) -> list[CandidateRow]:
    """Candidates not yet consolidated (of one conversation, or all), oldest first."""
    rows = db.all(
        "SELECT * FROM candidates WHERE record_id IS NULL "
        "AND (? IS NULL OR conversation_id = ?) ORDER BY marked_at, episode_id, sentence",
        (conversation_id, conversation_id),
    )
    return [_row(r) for r in rows]


def end_conversation(db: Database, conversation_id: str, at: str) -> None:
    db.execute(
        "INSERT OR IGNORE INTO ended_conversations (conversation_id, ended_at) VALUES (?, ?)",
        (conversation_id, at),
    )


def is_ended(db: Database, conversation_id: str) -> bool:
    return (
        db.one("SELECT 1 FROM ended_conversations WHERE conversation_id = ?", (conversation_id,))
        is not None
    )


def drop_for_episodes(db: Database, episode_ids: Iterable[str]) -> None:
    """Derived rows of shredded episodes go with them (called inside the shredding tx)."""
    for episode_id in episode_ids:
        db.execute("DELETE FROM candidates WHERE episode_id = ?", (episode_id,))


# --- device-only classes -----------------------------------------------------------------


def device_only_classes(db: Database) -> set[Sensitivity]:
    return {Sensitivity(r[0]) for r in db.all("SELECT sensitivity FROM device_only_classes")}


def keep_on_device(db: Database, sensitivity: Sensitivity, at: str) -> None:
    db.execute(
        "INSERT OR IGNORE INTO device_only_classes (sensitivity, chosen_at) VALUES (?, ?)",
        (sensitivity.value, at),
    )


def mark_episode_device_only(db: Database, episode_id: str) -> None:
    db.execute("UPDATE episodes SET device_only = 1 WHERE episode_id = ?", (episode_id,))


def mark_record_device_only(db: Database, record_id: str) -> None:
    db.execute("UPDATE records SET device_only = 1 WHERE record_id = ?", (record_id,))


def episode_device_only(db: Database, episode_id: str) -> bool:
    row = db.one("SELECT device_only FROM episodes WHERE episode_id = ?", (episode_id,))
    return row is not None and bool(row[0])


def record_device_only(db: Database, record_id: str) -> bool:
    row = db.one("SELECT device_only FROM records WHERE record_id = ?", (record_id,))
    return row is not None and bool(row[0])
