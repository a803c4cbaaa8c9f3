"""The record store interface: what the cloud service needs, whatever the database.

Invariants:
- A ``session`` is one database transaction; it commits when the block ends and rolls
  back when it raises. ``session(space_id, lock=True)`` takes the space's lock first
  (``SELECT ... FOR UPDATE`` on PostgreSQL, an immediate transaction on SQLite), so
  sequence numbers are given out in one total order and a cursor never skips.
- A ``snapshot`` is one read-only transaction over one consistent state of the store
  (REPEATABLE READ on PostgreSQL, a deferred read transaction under WAL on SQLite):
  what an export reads page by page all comes from the same moment.
- Every method that reads or writes memory names the space; nothing crosses spaces.
- Sealed content (``record_versions``, ``episodes``, ``artifacts``) and the
  ``record_events`` log are only ever inserted; no method updates or deletes them.
- Plain columns hold ids, times, states and keyed hashes; never text, sources or areas.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from cloud.store.rooms.accounts import AccountsRoom
from cloud.store.rooms.end import EndRoom
from cloud.store.rooms.export import ExportRoom
from cloud.store.rooms.feed import FeedRoom
from cloud.store.rooms.keys import KeysRoom
from cloud.store.rooms.lineage import LineageRoom
from cloud.store.rooms.operator import OperatorRoom
from cloud.store.rooms.receipts import ReceiptsRoom
from cloud.store.rooms.records import RecordsRoom
from cloud.store.rooms.search import SearchRoom
from cloud.store.rooms.subset import SubsetRoom
from cloud.store.rooms.work import WORK_KINDS as WORK_KINDS
from cloud.store.rooms.work import WorkRoom
from protocol.model import UsageRestriction

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class EnrollmentCodeRow:
    code_hash: str
    space_id: str
    expires_at: datetime
    used_at: datetime | None


@dataclass(frozen=True, slots=True)
class DeviceRow:
    space_id: str
    device_id: str
    name: str
    public_key: bytes
    revoked_at: datetime | None = None
    wiped_at: datetime | None = None  # a revoked device confirmed it wiped its copy


@dataclass(frozen=True, slots=True)
class DeviceStatusRow:
    """A device as ``GET /v1/devices`` shows it to its space's owner."""

    device_id: str
    name: str
    enrolled_at: datetime
    last_seen: datetime | None  # read for GET /v1/devices only
    revoked_at: datetime | None
    wiped_at: datetime | None


@dataclass(frozen=True, slots=True)
class RecordRow:
    record_id: str
    lifecycle: str
    current_version: int
    created_at: datetime
    forgotten_at: datetime | None
    usage_restriction: str | None = None  # UsageRestriction JSON
    superseded_by: str | None = None
    conflicts: str | None = None  # JSON list of record ids
    created_seq: int | None = None  # server order of creation (records made before it: None)
    state_seq: int | None = None  # seq of the latest record_state change

    def restriction(self) -> UsageRestriction | None:
        """``usage_restriction`` decoded (None: the record is used everywhere)."""
        if self.usage_restriction is None:
            return None
        return UsageRestriction.model_validate_json(self.usage_restriction)

    def conflict_ids(self) -> list[str]:
        """``conflicts`` decoded: the ids of the records this one conflicts with."""
        ids: list[str] = json.loads(self.conflicts) if self.conflicts else []
        return ids


@dataclass(frozen=True, slots=True)
class VersionRow:
    record_id: str
    version: int
    supersedes: int | None
    recorded_at: datetime
    key_id: str
    sealed_content: bytes
    made_by: str | None = None  # written, never read back with the row


@dataclass(frozen=True, slots=True)
class ArtifactRow:
    artifact_id: str
    created_at: datetime
    key_id: str
    sealed_content: bytes


@dataclass(frozen=True, slots=True)
class RecordEventRow:
    """One entry of a record's append-only history (for "as of" reads)."""

    record_id: str
    seq: int
    at: datetime
    kind: str  # created | version | lifecycle | usage | superseded | conflict | forgotten
    lifecycle: str
    version: int


@dataclass(frozen=True, slots=True)
class DerivationRow:
    """``child`` (a record or an artifact) was derived from ``parent_record_id``."""

    parent_record_id: str
    child_kind: str  # "record" or "artifact"
    child_id: str
    seq: int  # server order of the child's creation
    position: int  # index of the parent in the child's derived_from list


@dataclass(frozen=True, slots=True)
class ProjectRow:
    name: str
    open: bool
    updated_at: datetime
    seq: int  # seq of the latest project change


@dataclass(frozen=True, slots=True)
class EpisodeRow:
    episode_id: str
    typed_at: datetime
    key_id: str
    sealed_content: bytes


@dataclass(frozen=True, slots=True)
class ChangeRow:
    seq: int
    kind: str  # record_version | record_state | episode | artifact | project | key_destruction
    at: datetime
    record_id: str | None = None
    version: int | None = None
    episode_id: str | None = None
    event_id: int | None = None
    artifact_id: str | None = None
    project: str | None = None


@dataclass(frozen=True, slots=True)
class ForgetKey:
    key_id: str
    episode_id: str | None = None  # set when the key sealed an episode
    artifact_id: str | None = None  # set when the key sealed an artifact


@dataclass(frozen=True, slots=True)
class ForgetEventRow:
    space_id: str
    event_id: int
    record_id: str
    forgotten_at: datetime
    keys: tuple[ForgetKey, ...]


@dataclass(frozen=True, slots=True)
class ForgetStatusRow:
    record_id: str
    event_id: int
    forgotten_at: datetime
    pending: tuple[tuple[str, str], ...]  # (device_id, device_name) not yet acknowledged


@dataclass(frozen=True, slots=True)
class CompactionReport:
    """What one compaction of a space's change feed deleted and kept.

    ``deleted`` counts the rows removed per change kind; ``kept_destructions`` is how
    many key-destruction rows stay because a registered, unrevoked device that held
    the content has not acknowledged them; ``floor`` is the space's feed floor after
    the run (the highest seq ever compacted; a cursor below it must resync).
    """

    space_id: str
    deleted: tuple[tuple[str, int], ...]  # (change kind, rows deleted), kinds in name order
    kept_destructions: int
    remaining: int
    previous_floor: int
    floor: int

    @property
    def total_deleted(self) -> int:
        return sum(n for _kind, n in self.deleted)


@dataclass(frozen=True, slots=True)
class DeviceHistoryRow:
    """A device as an export shows it: names and times, never a credential or key."""

    device_id: str
    name: str
    enrolled_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class ExportRow:
    """One export started (the audit log of exports; ids, times and an outcome)."""

    export_id: str
    device_id: str
    started_at: datetime
    finished_at: datetime | None
    include_sensitive: bool
    outcome: str  # streaming | complete | abandoned | failed: <reason>


@dataclass(frozen=True, slots=True)
class SpaceEndRow:
    """When and why a space ended, and when its own keys were destroyed (None: not yet)."""

    space_id: str
    ended_at: datetime
    reason: str  # "deleted" | "service_shutdown"
    keys_destroyed_at: datetime | None


@dataclass(frozen=True, slots=True)
class PendingDeviceRow:
    device_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ServiceStateRow:
    """The service's region and, once a shutdown is announced, its dates."""

    region: str
    announced_at: datetime | None = None
    closes_at: datetime | None = None
    export_until: datetime | None = None


WHOLE_EPISODE = -1  # ``work_items.sentence`` of an item that covers a whole episode


@dataclass(frozen=True, slots=True)
class WorkItemRow:
    """One unit of consolidator work: a candidate sentence, a behaviour event or a piece
    of external content. Ids, times and states only; the words stay in the episode."""

    space_id: str
    episode_id: str
    sentence: int | None  # None: the whole episode (behaviour, external)
    item_kind: str  # candidate | behaviour | external
    conversation_token: str  # keyed hash of the conversation id
    marked_at: datetime
    ready_at: datetime | None  # None: not ready (a candidate whose conversation goes on)
    state: str  # waiting | done | dropped
    record_id: str | None
    lease_owner: str | None
    lease_until: datetime | None
    attempts: int

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.episode_id, self.sentence)

    @property
    def name(self) -> str:
        """``ep_…#3`` for a sentence, ``ep_…`` for a whole episode (logs and errors)."""
        return self.episode_id if self.sentence is None else f"{self.episode_id}#{self.sentence}"


@dataclass(frozen=True, slots=True)
class SubsetLogRow:
    """A record entered (or left) a device's subset; the device has not confirmed it."""

    gen: int
    record_id: str
    entered: bool
    reason: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class SubsetStateRow:
    """Where a device's subset stands: the last log gen, when the cloud last chose it
    (``evaluated_seq`` -1: choose again at the next pull) and a JSON summary of counts."""

    gen: int
    evaluated_seq: int
    evaluated_at: datetime
    summary: str


class StoreSession(
    AccountsRoom,
    RecordsRoom,
    LineageRoom,
    FeedRoom,
    ReceiptsRoom,
    KeysRoom,
    SearchRoom,
    EndRoom,
    WorkRoom,
    SubsetRoom,
    ExportRoom,
    OperatorRoom,
    Protocol,
):
    """One transaction against the record store: every room at once
    (``cloud.store.rooms``: which room holds which method, and which module implements it)."""


class RecordStore(Protocol):
    """A record store: SQLite (embedded default) or PostgreSQL (production)."""

    @property
    def dialect(self) -> str: ...

    def session(
        self, space_id: str | None = None, *, lock: bool = False
    ) -> AbstractContextManager[StoreSession]: ...

    def reader(self) -> AbstractContextManager[StoreSession]:
        """A short transaction that only reads and takes no write lock, so it never waits
        behind a writer (an authentication reads through it). Nothing may be written in it."""
        ...

    def snapshot(self) -> AbstractContextManager[StoreSession]:
        """A read-only transaction that sees one consistent snapshot of the whole store
        and blocks no writer (an export reads through it)."""
        ...

    def audit_blobs(self) -> Iterator[bytes | str]:
        """Every bytes or str value stored in every table (for forensic scans)."""
        ...

    def close(self) -> None: ...
