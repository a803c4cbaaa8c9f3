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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from protocol.model import UsageRestriction

if TYPE_CHECKING:
    from cloud.store.search import IndexRow, SealedVector


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


WORK_KINDS = ("candidate", "behaviour", "external")
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


class StoreSession(Protocol):
    """One transaction against the record store."""

    # spaces, enrollment, devices
    def create_space(self, space_id: str, name: str, at: datetime) -> None: ...
    def space_exists(self, space_id: str) -> bool: ...
    def space_by_name(self, name: str) -> str | None: ...
    def add_enrollment_code(
        self, space_id: str, code_hash: str, at: datetime, expires_at: datetime
    ) -> None: ...
    def enrollment_code(self, code_hash: str) -> EnrollmentCodeRow | None: ...
    def use_enrollment_code(self, code_hash: str, device_id: str, at: datetime) -> bool: ...
    def add_device(
        self,
        space_id: str,
        device_id: str,
        name: str,
        public_key: bytes,
        credential_hash: str,
        at: datetime,
    ) -> None: ...
    def device_by_credential(self, credential_hash: str) -> DeviceRow | None: ...
    def device(self, space_id: str, device_id: str) -> DeviceRow | None: ...
    def touch_device(self, space_id: str, device_id: str, at: datetime) -> None: ...
    def revoke_device(self, space_id: str, device_id: str, at: datetime) -> bool: ...
    def mark_wiped(self, space_id: str, device_id: str, at: datetime) -> datetime | None: ...
    def devices(self, space_id: str) -> list[DeviceRow]: ...
    def device_statuses(self, space_id: str) -> list[DeviceStatusRow]: ...

    # ordering
    def allocate_seq(self, space_id: str) -> int: ...
    def last_seq(self, space_id: str) -> int: ...

    # receipts
    def receipt(self, space_id: str, op_id: str) -> str | None: ...
    def put_receipt(
        self, space_id: str, op_id: str, device_id: str, receipt_json: str, at: datetime
    ) -> None: ...

    # spaces' account keys (strong authentication)
    def account_key(self, space_id: str) -> bytes | None: ...
    def set_account_key(self, space_id: str, key: bytes) -> None: ...
    def replace_account_key(self, space_id: str, old: bytes, new: bytes) -> bool: ...

    # records and episodes
    def record(self, space_id: str, record_id: str) -> RecordRow | None: ...
    def records(self, space_id: str, record_ids: Iterable[str]) -> dict[str, RecordRow]: ...
    def live_records(self, space_id: str) -> list[RecordRow]: ...
    def insert_record(
        self,
        space_id: str,
        record_id: str,
        lifecycle: str,
        version: int,
        at: datetime,
        created_seq: int,
    ) -> None: ...
    def set_record_state(self, space_id: str, record_id: str, **values: object) -> None: ...
    def insert_version(self, space_id: str, row: VersionRow) -> None: ...

    def version_authors(
        self, space_id: str, record_id: str, after: int
    ) -> list[tuple[int, str | None]]:
        """``(version, made_by)`` of the record's versions after ``after``, in order."""
        ...

    def version(self, space_id: str, record_id: str, version: int) -> VersionRow | None: ...
    def versions(self, space_id: str, record_id: str) -> list[VersionRow]: ...
    def mark_forgotten(self, space_id: str, record_id: str, at: datetime) -> None: ...
    def insert_episode(self, space_id: str, row: EpisodeRow) -> None: ...
    def episodes(self, space_id: str, episode_ids: Iterable[str]) -> dict[str, EpisodeRow]: ...
    def all_episode_ids(self, space_id: str) -> list[str]: ...
    def add_record_event(self, space_id: str, row: RecordEventRow) -> None: ...
    def record_events(self, space_id: str, record_id: str) -> list[RecordEventRow]: ...

    # artifacts, derivations, the subject index, projects
    def insert_artifact(self, space_id: str, row: ArtifactRow) -> None: ...
    def artifacts(self, space_id: str, artifact_ids: Iterable[str]) -> dict[str, ArtifactRow]: ...
    def add_derivations(self, space_id: str, rows: Iterable[DerivationRow]) -> None: ...
    def derivations_from(self, space_id: str, parent_ids: Iterable[str]) -> list[DerivationRow]: ...
    def parents_of(self, space_id: str, child_kind: str, child_id: str) -> list[str]: ...
    def drop_derivations(
        self, space_id: str, record_ids: Iterable[str], artifact_ids: Iterable[str]
    ) -> None: ...
    def set_subject_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None: ...
    def records_with_subjects(self, space_id: str, tokens: Sequence[str]) -> list[str]: ...
    def drop_subject_tokens(self, space_id: str, record_ids: Iterable[str]) -> None: ...
    def add_history_tokens(self, space_id: str, record_id: str, tokens: Iterable[str]) -> None: ...
    def records_with_history(self, space_id: str, tokens: Sequence[str]) -> list[str]: ...
    def has_history(self, space_id: str, record_id: str) -> bool: ...
    def episode_seq(self, space_id: str, episode_id: str) -> int | None: ...
    def drop_history_tokens(self, space_id: str, record_ids: Iterable[str]) -> None: ...
    def projects(self, space_id: str) -> dict[str, ProjectRow]: ...
    def set_project(self, space_id: str, row: ProjectRow) -> None: ...

    # the retrieval indexes (derived data; cloud.store.search)
    def search_generation(self, space_id: str) -> int: ...
    def stale_for_search(self, space_id: str, model_id: str) -> list[tuple[str, int]]: ...
    def count_stale_for_search(self, space_id: str, model_id: str) -> int: ...
    def index_records(self, space_id: str, rows: Sequence[IndexRow]) -> None: ...
    def drop_search(self, space_id: str, record_ids: Iterable[str], *, purge: bool) -> None: ...
    def lexical_matches(
        self, space_id: str, terms: Sequence[str], limit: int
    ) -> dict[str, float]: ...
    def records_with_term(self, space_id: str, term: str, limit: int) -> list[str]: ...
    def records_with_terms(
        self, space_id: str, terms: Iterable[str], limit: int
    ) -> dict[str, list[str]]: ...
    def vector_listing(self, space_id: str, model_id: str) -> list[tuple[str, int]]: ...
    def sealed_vectors(
        self, space_id: str, model_id: str, record_ids: Iterable[str]
    ) -> list[SealedVector]: ...
    def superseded_by_records(
        self, space_id: str, record_ids: Iterable[str]
    ) -> dict[str, list[str]]: ...
    def versions_at(self, space_id: str, wanted: Mapping[str, int]) -> dict[str, VersionRow]: ...

    # changes and holdings
    def add_change(self, space_id: str, row: ChangeRow) -> None: ...
    def changes_after(self, space_id: str, seq: int, limit: int) -> list[ChangeRow]: ...
    def feed_floor(self, space_id: str) -> int: ...
    def compact_changes(self, space_id: str) -> CompactionReport: ...
    def add_holdings(
        self, space_id: str, device_id: str, items: Iterable[tuple[str, str]]
    ) -> None: ...
    def holders(self, space_id: str, items: Iterable[tuple[str, str]]) -> set[str]: ...

    # forgetting
    def add_forget_event(
        self,
        space_id: str,
        event_id: int,
        record_id: str,
        at: datetime,
        keys: Iterable[ForgetKey],
        pending_devices: Iterable[str],
    ) -> None: ...
    def forget_event(self, space_id: str, event_id: int) -> ForgetEventRow | None: ...
    def forgotten_episode_ids(self, space_id: str, episode_ids: Iterable[str]) -> set[str]: ...
    def forgotten_key_ids(self, space_id: str, key_ids: Iterable[str]) -> set[str]: ...
    def undestroyed_forget_events(self) -> list[ForgetEventRow]: ...
    def mark_keys_destroyed(self, space_id: str, event_id: int, at: datetime) -> None: ...
    def unacked_events(self, space_id: str, device_id: str) -> list[int]: ...
    def ack(
        self, space_id: str, device_id: str, event_ids: Iterable[int], at: datetime
    ) -> None: ...
    def forget_statuses(self, space_id: str) -> list[ForgetStatusRow]: ...

    # the end of an account and the service's closing (cloud.store.sql_end)
    def space_end(self, space_id: str) -> SpaceEndRow | None: ...
    def mark_space_ended(self, space_id: str, at: datetime, reason: str) -> None: ...
    def ended_spaces_with_keys(self) -> list[SpaceEndRow]: ...
    def mark_space_keys_destroyed(self, space_id: str, at: datetime) -> None: ...
    def artifact_ids(self, space_id: str) -> list[str]: ...
    def drop_plain_leftovers(self, space_id: str) -> None: ...
    def receipts_of(self, space_id: str) -> list[tuple[str, str]]: ...
    def replace_receipt(self, space_id: str, op_id: str, receipt_json: str) -> None: ...
    def pending_devices(self, space_id: str) -> list[PendingDeviceRow]: ...
    def service_state(self) -> ServiceStateRow | None: ...
    def put_service_state(self, state: ServiceStateRow) -> None: ...

    # the consolidator's work queue (cloud.store.sql_work)
    def space_ids(self) -> list[str]: ...
    def candidate_exists(self, space_id: str, episode_id: str, sentence: int) -> bool: ...
    def add_work_item(
        self,
        space_id: str,
        episode_id: str,
        sentence: int | None,
        item_kind: str,
        conversation_token: str,
        at: datetime,
        device_hint: bytes | None = None,
    ) -> bool: ...
    def work_item_hint(self, space_id: str, episode_id: str, sentence: int) -> bytes | None: ...
    def conversation_ended(self, space_id: str, conversation_token: str) -> bool: ...
    def end_conversation(self, space_id: str, conversation_token: str, at: datetime) -> int: ...
    def resolve_work(
        self, space_id: str, refs: Iterable[tuple[str, int]], record_id: str
    ) -> int: ...
    def complete_work(
        self,
        space_id: str,
        keys: Iterable[tuple[str, int | None]],
        *,
        record_id: str | None = None,
        dropped: bool = False,
    ) -> int: ...
    def release_work(
        self, owner: str, space_id: str, keys: Iterable[tuple[str, int | None]]
    ) -> int: ...
    def drop_work_for_episodes(self, space_id: str, episode_ids: Iterable[str]) -> int: ...
    def claim_work(
        self,
        owner: str,
        now: datetime,
        lease_seconds: float,
        limit: int,
        kinds: Sequence[str] = WORK_KINDS,
        waiting_since: datetime | None = None,
    ) -> list[WorkItemRow]: ...
    def work_item(
        self, space_id: str, episode_id: str, sentence: int | None
    ) -> WorkItemRow | None: ...
    def work_items(
        self,
        space_id: str,
        item_kind: str,
        states: Sequence[str] = ("waiting", "done"),
        limit: int = 1000,
    ) -> list[WorkItemRow]: ...
    def add_conversation_episode(
        self, space_id: str, conversation_token: str, episode_id: str, typed_at: datetime
    ) -> None: ...
    def conversation_episodes(
        self, space_id: str, conversation_token: str, before: datetime, limit: int
    ) -> list[str]: ...
    def drop_conversation_episodes(self, space_id: str, episode_ids: Iterable[str]) -> None: ...

    # the device subset (cloud.store.sql_subset)
    def subset_policy(self, space_id: str, device_id: str) -> str | None: ...
    def set_subset_policy(
        self, space_id: str, device_id: str, policy: str, at: datetime
    ) -> None: ...
    def pins(self, space_id: str, device_id: str) -> list[str]: ...
    def set_pin(
        self, space_id: str, device_id: str, record_id: str, pinned: bool, at: datetime
    ) -> None: ...
    def subset_members(self, space_id: str, device_id: str) -> set[str]: ...
    def subset_members_among(
        self, space_id: str, device_id: str, record_ids: Iterable[str]
    ) -> set[str]: ...
    def add_subset_members(
        self, space_id: str, device_id: str, record_ids: Iterable[str]
    ) -> None: ...
    def remove_subset_members(
        self, space_id: str, device_id: str, record_ids: Iterable[str]
    ) -> None: ...
    def clear_subset(self, space_id: str, device_id: str) -> None: ...
    def add_subset_log(
        self, space_id: str, device_id: str, rows: Sequence[SubsetLogRow]
    ) -> None: ...
    def subset_log_after(
        self, space_id: str, device_id: str, gen: int, limit: int
    ) -> list[SubsetLogRow]: ...
    def confirm_subset_log(self, space_id: str, device_id: str, gen: int) -> list[str]: ...
    def subset_state(self, space_id: str, device_id: str) -> SubsetStateRow | None: ...
    def save_subset_state(self, space_id: str, device_id: str, state: SubsetStateRow) -> None: ...
    def mark_subsets_stale(self, space_id: str, device_id: str | None = None) -> None: ...
    def add_record_uses(
        self, space_id: str, device_id: str, uses: Iterable[tuple[str, int, datetime]]
    ) -> bool: ...
    def record_uses(self, space_id: str) -> dict[str, tuple[int, datetime]]: ...
    def version_seqs(self, space_id: str, record_id: str) -> dict[int, int]: ...
    def feed_seqs(self, space_id: str, kind: str, item_ids: Iterable[str]) -> dict[str, int]: ...
    def records_changed_since(self, space_id: str, seq: int) -> list[RecordRow]: ...
    def record_sizes(self, space_id: str, record_ids: Iterable[str]) -> dict[str, int]: ...
    def holdings_of(self, space_id: str, device_id: str, kind: str) -> set[str]: ...
    def drop_holdings(
        self, space_id: str, device_id: str, kind: str, item_ids: Iterable[str]
    ) -> None: ...

    # export (cloud.store.sql_export): keyset pages in id order, the exports audit log
    def records_page(
        self, space_id: str, after: str | None, limit: int, *, forgotten: bool | None = None
    ) -> list[RecordRow]: ...
    def versions_of(
        self, space_id: str, record_ids: Iterable[str]
    ) -> dict[str, list[VersionRow]]: ...
    def episodes_page(self, space_id: str, after: str | None, limit: int) -> list[EpisodeRow]: ...
    def device_history(self, space_id: str) -> list[DeviceHistoryRow]: ...
    def start_export(
        self,
        space_id: str,
        export_id: str,
        device_id: str,
        at: datetime,
        include_sensitive: bool,
    ) -> bool: ...
    def finish_export(self, space_id: str, export_id: str, at: datetime, outcome: str) -> None: ...
    def export(self, space_id: str, export_id: str) -> ExportRow | None: ...


class RecordStore(Protocol):
    """A record store: SQLite (embedded default) or PostgreSQL (production)."""

    @property
    def dialect(self) -> str: ...

    def session(
        self, space_id: str | None = None, *, lock: bool = False
    ) -> AbstractContextManager[StoreSession]: ...

    def snapshot(self) -> AbstractContextManager[StoreSession]:
        """A read-only transaction that sees one consistent snapshot of the whole store
        and blocks no writer (an export reads through it)."""
        ...

    def audit_blobs(self) -> Iterator[bytes | str]:
        """Every bytes or str value stored in every table (for forensic scans)."""
        ...

    def close(self) -> None: ...
