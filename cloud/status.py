"""What the cloud says about one record without opening it: its state, and "as of" reads.

Invariants:
- No answer here carries content (text, type, source, areas, epistemic state); only
  ids, states, versions and times, read from plain columns and the history log.
- A forgotten record answers exactly its skeleton: id, state, when.
- An "as of" read replays the append-only ``record_events`` log with
  ``protocol.timeline``, so it sees what memory said at that time, corrections included.
"""

from __future__ import annotations

from datetime import datetime

from cloud.errors import NotFound
from cloud.store.rooms.records import RecordsRoom
from protocol.ids import RecordId
from protocol.messages import Envelope, RecordState
from protocol.model import LifecycleState
from protocol.timeline import StateChange, VersionTime, lifecycle_as_of, version_as_of
from protocol.wire import UtcDatetime

_VERSION_KINDS = {"created", "version"}


class AsOf(Envelope):
    """Which version of a record was current at ``when``, and in which lifecycle state.

    Both are None when the record was not known yet at that time.
    """

    id: RecordId
    when: UtcDatetime
    version: int | None
    lifecycle_state: LifecycleState | None


def _missing(record_id: str) -> NotFound:
    return NotFound(f"record {record_id} does not exist in this space")


def record_state(s: RecordsRoom, space_id: str, record_id: str) -> RecordState:
    row = s.record(space_id, record_id)
    if row is None:
        raise _missing(record_id)
    if row.lifecycle == LifecycleState.FORGOTTEN.value:
        return RecordState(
            id=row.record_id,
            lifecycle_state=LifecycleState.FORGOTTEN,
            forgotten_at=row.forgotten_at,
        )
    version = s.version(space_id, record_id, row.current_version)
    return RecordState(
        id=row.record_id,
        lifecycle_state=LifecycleState(row.lifecycle),
        version=row.current_version,
        recorded_at=None if version is None else version.recorded_at,
        usage_restriction=row.restriction(),
        superseded_by_record=row.superseded_by,
        conflicts_with=row.conflict_ids(),
    )


def as_of(s: RecordsRoom, space_id: str, record_id: str, when: datetime) -> AsOf:
    if s.record(space_id, record_id) is None:
        raise _missing(record_id)
    events = s.record_events(space_id, record_id)
    versions = [
        VersionTime(e.version, e.at) for e in events if _VERSION_KINDS & set(e.kind.split(","))
    ]
    states = [StateChange(e.at, LifecycleState(e.lifecycle)) for e in events]
    return AsOf(
        id=record_id,
        when=when,
        version=version_as_of(versions, when),
        lifecycle_state=lifecycle_as_of(states, when),
    )
