"""This device's side of its subset: what its retrieval used, why it holds each record,
and records that left the subset while an operation on them was still queued.

Invariants:
- Uses are running counts in ``record_uses``, reported whole (never as a difference)
  with the next pull once they moved; a report is marked sent only in the transaction
  that applies the pull's first page, so a lost answer means it is sent again, and
  the cloud, keeping the highest count it heard, counts nothing twice.
- A leave never waits on the network and never loses a queued operation: a record with
  queued operations is parked in ``deferred_evictions`` and leaves once they are sent,
  unless it entered the subset again first.
- Leaving is never forgetting: no skeleton, no tombstone (``device.shred.evict_record``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from device import shred
from device.db import Database
from protocol.messages import MAX_USES_PER_PULL, RecordUse
from protocol.subset import RULE_FLAGS, SubsetView


def note_uses(db: Database, record_ids: Iterable[str], at: str) -> None:
    """Retrieval on this device returned these records (call inside ``db.atomic()``)."""
    for record_id in dict.fromkeys(record_ids):
        db.execute(
            "INSERT INTO record_uses (record_id, uses, reported, last_used_at) VALUES (?, 1, 0, ?) "
            "ON CONFLICT (record_id) DO UPDATE SET uses = uses + 1, "
            "last_used_at = max(last_used_at, excluded.last_used_at)",
            (record_id, at),
        )


def unreported(db: Database) -> list[RecordUse]:
    """The running counts that moved since they were last reported (one pull's worth)."""
    rows = db.all(
        "SELECT record_id, uses, last_used_at FROM record_uses "
        "WHERE uses > reported ORDER BY last_used_at DESC, record_id LIMIT ?",
        (MAX_USES_PER_PULL,),
    )
    return [
        RecordUse(record_id=r["record_id"], uses=r["uses"], last_used_at=r["last_used_at"])
        for r in rows
    ]


def mark_reported(db: Database, uses: Iterable[RecordUse]) -> None:
    for use in uses:
        db.execute(
            "UPDATE record_uses SET reported = max(reported, ?) WHERE record_id = ?",
            (use.uses, use.record_id),
        )


def held(db: Database) -> set[str]:
    """The records whose content this device holds: live, with a sealed version."""
    rows = db.all(
        "SELECT DISTINCT r.record_id FROM records r JOIN record_versions v "
        "ON v.record_id = r.record_id WHERE r.lifecycle != ?",
        (shred.FORGOTTEN,),
    )
    return {row[0] for row in rows}


def entered(db: Database, record_id: str, reason: str, at: str) -> None:
    db.execute("DELETE FROM deferred_evictions WHERE record_id = ?", (record_id,))
    db.execute(
        "INSERT INTO subset_entries (record_id, reason, entered_at) VALUES (?, ?, ?) "
        "ON CONFLICT (record_id) DO UPDATE SET reason = excluded.reason, "
        "entered_at = excluded.entered_at",
        (record_id, reason, at),
    )


def reason(db: Database, record_id: str) -> str | None:
    """Why the cloud put this record in this device's subset (None: written here, or
    held since before the subset, or not held)."""
    row = db.one("SELECT reason FROM subset_entries WHERE record_id = ?", (record_id,))
    return None if row is None else str(row["reason"])


def leave(
    db: Database,
    record_id: str,
    episode_ids: Iterable[str],
    artifact_ids: Iterable[str],
    at: str,
) -> bool:
    """The record left this device's subset: evict it now, or park it if an operation on
    it is queued. Returns whether it was evicted. Call inside ``db.atomic()``."""
    episodes, artifacts = sorted(set(episode_ids)), sorted(set(artifact_ids))
    if shred.evict_record(db, record_id, episode_ids=episodes, artifact_ids=artifacts):
        return True
    row = db.one("SELECT lifecycle, device_only FROM records WHERE record_id = ?", (record_id,))
    if row is None or row["lifecycle"] == shred.FORGOTTEN or row["device_only"]:
        return False  # nothing to evict (or it is this device's alone)
    db.execute(
        "INSERT INTO deferred_evictions (record_id, episode_ids, artifact_ids, left_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (record_id) DO UPDATE SET "
        "episode_ids = excluded.episode_ids, artifact_ids = excluded.artifact_ids, "
        "left_at = excluded.left_at",
        (record_id, json.dumps(episodes), json.dumps(artifacts), at),
    )
    return False


def evict_deferred(db: Database) -> list[str]:
    """Evict the parked records whose queued operations have been sent."""
    done = []
    for row in db.all("SELECT * FROM deferred_evictions ORDER BY left_at, record_id"):
        record_id = row["record_id"]
        if shred.evict_record(
            db,
            record_id,
            episode_ids=json.loads(row["episode_ids"]),
            artifact_ids=json.loads(row["artifact_ids"]),
        ):
            done.append(record_id)
        elif not shred.evictable(db, record_id) and (
            db.one("SELECT 1 FROM op_queue WHERE record_id = ? LIMIT 1", (record_id,)) is None
        ):
            # forgotten or gone meanwhile: nothing left to evict
            db.execute("DELETE FROM deferred_evictions WHERE record_id = ?", (record_id,))
    return done


def deferred(db: Database) -> list[str]:
    return [r["record_id"] for r in db.all("SELECT record_id FROM deferred_evictions ORDER BY 1")]


def describe(view: SubsetView) -> str:
    """A few lines a person reads: what this device keeps, why, and what did not fit."""
    rules, budget = view.policy.rules, view.policy.budget
    lines = [
        f"This device keeps {view.records} record(s), {view.size_bytes:,} bytes "
        f"(budget: {budget.max_records:,} records, {budget.max_bytes:,} bytes).",
    ]
    lines += [
        f"  {entry.reason.value.replace('_', ' ')}: {entry.records}" for entry in view.by_reason
    ]
    kept = [name.replace("_", " ") for name in RULE_FLAGS if getattr(rules, name)]
    lines.append(
        "Rules: "
        + ", ".join(
            kept
            + [f"events within {rules.upcoming_days} days"] * bool(rules.upcoming_days)
            + [f"used {rules.frequent_uses}+ times"] * bool(rules.frequent_uses)
            + [f"touched in the last {rules.recent_days} days"] * bool(rules.recent_days)
        )
    )
    lines.append(
        "For areas: "
        + ("all" if rules.areas is None else ", ".join(a.value for a in rules.areas) or "none")
    )
    if view.pins:
        lines.append(f"Pinned: {', '.join(view.pins)}")
    if view.left_out:
        lines.append(f"{view.left_out} record(s) the rules want did not fit the budget.")
    if view.left_out_pins:
        lines.append(f"Pinned but over the budget: {', '.join(view.left_out_pins)}")
    if view.excluded_pins:
        lines.append(
            "Pinned but only for an area this device is not for: " + ", ".join(view.excluded_pins)
        )
    lines.append("Records outside the subset stay in the cloud; `recall --cloud` searches them.")
    return "\n".join(lines)
