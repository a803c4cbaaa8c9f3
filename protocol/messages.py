"""Wire envelopes: every request and response between device and cloud.

Invariants: each message carries ``protocol_version``; push answers one receipt per
op in request order; pull returns changes in server order with an opaque cursor.
A field added in a later protocol version carries ``Since(n)``; ``protocol.versioned``
renders and parses every message here for one version (version 2 added
``PullRequest.wait`` and ``RecordVersionChange.schema_version``). A message new in a
later version names it once (``DELETE_ACCOUNT_SINCE``) and the cloud refuses it in an
older one. The ``Memsync-Closing`` header's format lives here too, so both sides read
it alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter

from protocol.confidence import ConfidenceClass
from protocol.error_codes import ErrorCode as ErrorCode  # re-exported: the wire's codes
from protocol.errors import UnsupportedProtocolVersion
from protocol.export.package import ExportId
from protocol.ids import (
    ArtifactId,
    DeviceId,
    EpisodeId,
    RecordId,
    RequestId,
    SpaceId,
)
from protocol.model import (
    RECORD_SCHEMA_VERSION,
    EpistemicState,
    LifeArea,
    LifecycleState,
    ProjectName,
    Sensitivity,
    UsageRestriction,
)
from protocol.model import EpisodeContent as EpisodeContent  # re-exported: sealed episodes
from protocol.operations import MAX_OPS_PER_PUSH, Receipt
from protocol.retrieval.task import Relation
from protocol.subset import SubsetPolicy, SubsetView
from protocol.version import (
    PROTOCOL_VERSION,
    SUPPORTED_VERSIONS,
    Since,
    VersionRange,
    check_version,
)
from protocol.wire import B64Bytes, UtcDatetime, WireModel

MAX_PULL_PAGE = 500
MAX_PULL_WAIT = 25.0  # seconds a live pull may wait for the space to change
MAX_REQUEST_BYTES = 4 * 1024 * 1024


class Envelope(WireModel):
    protocol_version: int = PROTOCOL_VERSION


def peek_version(raw: Mapping[str, Any], supported: VersionRange = SUPPORTED_VERSIONS) -> int:
    """Read and check ``protocol_version`` before the rest of a message is parsed."""
    if "protocol_version" not in raw:
        low, high = supported
        raise UnsupportedProtocolVersion(None, low, high)
    return check_version(raw["protocol_version"], supported)


class ErrorBody(Envelope):
    code: ErrorCode
    message: str
    supported_versions: tuple[int, int] = SUPPORTED_VERSIONS


# --- enrollment --------------------------------------------------------------------


class EnrollRequest(Envelope):
    code: Annotated[str, Field(min_length=8, max_length=128)]
    device_name: Annotated[str, Field(min_length=1, max_length=64)]
    public_key: B64Bytes  # X25519, 32 bytes


class EnrollResponse(Envelope):
    device_id: DeviceId
    space_id: SpaceId
    credential: str
    account_key: B64Bytes | None = None  # the space's registered account key, if any


# --- the account key (strong authentication for mass forgets) ------------------------


class AccountKeyRequest(Envelope):
    """``POST /v1/account-key``: register the account's Ed25519 verify key.

    The key is derived from the user's account passphrase and the space id
    (``protocol.strongauth``), so a device can derive it only after enrolling. The
    first registration sets it; registering the same key again is a no-op; a
    different key is refused (``account_key_mismatch``): the passphrase is wrong.
    """

    account_key: B64Bytes


class AccountKeyResponse(Envelope):
    account_key: B64Bytes


class AccountKeyChangeRequest(Envelope):
    """``POST /v1/account-key/change``: the user changed the account passphrase.
    ``account_key`` is the key derived from the new one; ``proof`` is the current key's
    signature and ``new_proof`` the new key's over ``protocol.strongauth``'s
    ``change_key_challenge(space, request_id, account_key)``. The cloud replaces its key
    only when both verify; the same request again, once done, answers the same."""

    request_id: RequestId
    account_key: B64Bytes
    proof: B64Bytes
    new_proof: B64Bytes


# --- push --------------------------------------------------------------------------


class PushRequest(Envelope):
    """Ops stay raw JSON objects here so one malformed op is refused alone."""

    ops: Annotated[list[dict[str, Any]], Field(max_length=MAX_OPS_PER_PUSH)]


class PushResponse(Envelope):
    receipts: list[Receipt]


# --- pull --------------------------------------------------------------------------


class RecordVersionChange(WireModel):
    """A new version's sealed content. Its state arrives as a ``record_state`` change.

    ``schema_version`` (protocol 2 on) is the record schema the sealed content is
    written in; a version-1 message implies schema 1, the only schema version 1 knew.
    """

    kind: Literal["record_version"] = "record_version"
    seq: int
    record_id: RecordId
    version: int
    supersedes: int | None = None
    recorded_at: UtcDatetime
    key_id: str
    sealed_content: B64Bytes  # RecordContent JSON sealed with the version's DEK
    sealed_key: B64Bytes  # the DEK sealed to this device's public key
    schema_version: Annotated[int, Since(2), Field(ge=1)] = RECORD_SCHEMA_VERSION


class RecordStateChange(WireModel):
    """A record's whole current state, sent whenever any part of it changes."""

    kind: Literal["record_state"] = "record_state"
    seq: int
    record_id: RecordId
    lifecycle_state: LifecycleState
    current_version: int
    usage_restriction: UsageRestriction | None = None
    superseded_by_record: RecordId | None = None
    conflicts_with: list[RecordId] = []
    at: UtcDatetime


class ArtifactChange(WireModel):
    """A derived item (sealed ``ArtifactContent``) and the records it came from."""

    kind: Literal["artifact"] = "artifact"
    seq: int
    artifact_id: ArtifactId
    derived_from: list[RecordId]
    created_at: UtcDatetime
    key_id: str
    sealed_content: B64Bytes
    sealed_key: B64Bytes


class ProjectChange(WireModel):
    kind: Literal["project"] = "project"
    seq: int
    project: ProjectName
    open: bool
    at: UtcDatetime


class EpisodeChange(WireModel):
    kind: Literal["episode"] = "episode"
    seq: int
    episode_id: EpisodeId
    typed_at: UtcDatetime
    key_id: str
    sealed_content: B64Bytes  # EpisodeContent JSON sealed with the episode's DEK
    sealed_key: B64Bytes


class SubsetChange(WireModel):
    """A record entered or left this device's subset (protocol 3 on; ``protocol.subset``).

    An entering record's content (versions, source episodes, artifacts, state) comes
    in the same page, before this change. A record that left is removed from the
    device like a forgotten one (keys and every derived row), but it stays in the
    cloud and may come back: leaving the subset is never a forget.
    """

    kind: Literal["subset"] = "subset"
    seq: int
    record_id: RecordId
    entered: bool
    reason: str | None = None  # why it entered (``protocol.subset.Reason``)
    # on a leave: the record's source episodes and artifacts no record the device keeps
    # needs any more, which leave with it
    episode_ids: list[EpisodeId] = []
    artifact_ids: list[ArtifactId] = []
    at: UtcDatetime


class KeyDestruction(WireModel):
    """The keys of a forgotten record and everything derived from it are gone.

    ``record_id`` is null when the event destroys only episodes that belong to no
    record (forgetting all memory); a device shreds the listed episodes all the same.
    """

    kind: Literal["key_destruction"] = "key_destruction"
    seq: int
    event_id: int
    record_id: RecordId | None
    key_ids: list[str]
    episode_ids: list[EpisodeId]
    artifact_ids: list[ArtifactId] = []
    destroyed_at: UtcDatetime


AnyChange = (
    RecordVersionChange
    | RecordStateChange
    | EpisodeChange
    | ArtifactChange
    | ProjectChange
    | KeyDestruction
    | SubsetChange
)
Change = Annotated[AnyChange, Field(discriminator="kind")]
CHANGE_ADAPTER: TypeAdapter[AnyChange] = TypeAdapter(Change)


MAX_USES_PER_PULL = 1000


class RecordUse(WireModel):
    """The device's running count: its retrieval (on the device, or asking the cloud)
    returned this record ``uses`` times in all, the last at ``last_used_at``. A count
    is never lowered, so a report sent twice (or replayed) changes nothing."""

    record_id: RecordId
    uses: Annotated[int, Field(ge=1, le=1_000_000)]
    last_used_at: UtcDatetime


class PullRequest(Envelope):
    """``wait`` (protocol 2 on): when nothing follows the cursor, the cloud may hold the
    request open up to ``wait`` seconds until the space changes (a live pull).
    ``used`` (protocol 3 on): the running use counts that moved since the device's
    last pull, which the subset policy's "used often or recently" rules read."""

    cursor: str | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_PULL_PAGE)] = 200
    wait: Annotated[float, Since(2), Field(ge=0, le=MAX_PULL_WAIT, allow_inf_nan=False)] = 0.0
    used: Annotated[list[RecordUse], Since(3), Field(max_length=MAX_USES_PER_PULL)] = []


class PullResponse(Envelope):
    changes: list[Change]
    cursor: str
    has_more: bool


# --- acknowledging key destruction ---------------------------------------------------


MAX_EVENT_ID = 2**63 - 1  # event ids are positive 64-bit integers (BIGINT)
EventId = Annotated[int, Field(ge=1, le=MAX_EVENT_ID)]


class AckRequest(Envelope):
    event_ids: Annotated[list[EventId], Field(max_length=MAX_PULL_PAGE)]


class AckResponse(Envelope):
    acknowledged: list[int]


# --- a revoked device's wipe confirmation -------------------------------------------


class WipedRequest(Envelope):
    """``POST /v1/wiped``: a revoked device says it destroyed every key and row of
    memory it held. Accepted only with the credential of a revoked device; it carries
    nothing else (the credential names the device and its space)."""


class WipedResponse(Envelope):
    device_id: DeviceId
    wiped_at: UtcDatetime  # when the cloud first heard the confirmation


# --- export (the package itself: ``protocol.export``) -------------------------------


class ExportRequest(Envelope):
    """``POST /v1/export``: start an export of the caller's whole space. Needs strong
    authentication: ``proof`` is the account key's signature over
    ``protocol.strongauth.export_challenge`` (space, ``export_id``, whether the
    sensitive classes are included); an ``export_id`` starts at most one export. The
    answer is the package as a sealed stream (``protocol.export.stream``) that only the
    asking device opens."""

    export_id: ExportId
    include_sensitive: bool = True
    proof: B64Bytes


# --- forget status -----------------------------------------------------------------


class PendingDevice(WireModel):
    device_id: DeviceId
    device_name: str


class ForgetStatus(WireModel):
    record_id: RecordId | None  # null: episodes that belonged to no record (all memory)
    forgotten_at: UtcDatetime
    pending: list[PendingDevice]


class PendingResponse(Envelope):
    forgets: list[ForgetStatus]


# --- the account's devices -----------------------------------------------------------


class DeviceStatus(WireModel):
    """One device of the caller's space, as its owner sees it: when it enrolled, when it
    last reached the cloud (a push or a pull), and whether it was revoked and wiped."""

    device_id: DeviceId
    name: str
    enrolled_at: UtcDatetime
    last_seen: UtcDatetime | None = None  # the wire field of GET /v1/devices
    revoked_at: UtcDatetime | None = None
    wiped_at: UtcDatetime | None = None


class DevicesResponse(Envelope):
    """``GET /v1/devices``: every device ever enrolled in the caller's space (only it)."""

    devices: list[DeviceStatus]


# --- recall (cloud retrieval over the whole space) -----------------------------------

MAX_QUERY_CHARS = 4000
MAX_RECALL_LIMIT = 50


class RecallRequest(Envelope):
    """``POST /v1/recall``: run the eight retrieval steps over the device's whole space.

    ``personalized: false`` answers nothing (step 1); ``factual`` null lets the query
    decide (a question about the user is personal); ``consents`` are the sensitive
    classes the user allows for this task.
    """

    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    limit: Annotated[int, Field(ge=1, le=MAX_RECALL_LIMIT)] = 5
    area: LifeArea | None = None
    project: ProjectName | None = None
    personalized: bool = True
    factual: bool | None = None
    consents: Annotated[list[Sensitivity], Field(max_length=len(Sensitivity))] = []


class RecallLine(WireModel):
    """One returned record as retrieval presented it (``protocol.retrieval.block.Line``)."""

    record_id: RecordId
    text: str
    content_type: str  # the core type, or the custom type's name
    epistemic_state: EpistemicState
    confidence: ConfidenceClass
    conflict: bool
    outdated: bool  # superseded: returned only beside its successor
    current: bool  # the newer record of a supersedes pair
    line: str  # the labelled line (quoted and dated only for said/verified)
    score: float  # the ranking score (0 for a companion pulled in by another line)
    pulled_in_by: RecordId | None = None  # the line that brought this one along
    relation: Relation | None = None  # why a related record was brought along


RECALL_UNINDEXED_SINCE = 4  # the protocol version ``RecallAnswer.unindexed`` came with


class RecallAnswer(WireModel):
    """The lines in order and the marked data block made from them (sealed in transit).

    ``unindexed`` (protocol 4 on) is how many of the space's live records the cloud's
    search indexes did not hold yet when it answered: the cloud indexes after a push
    commits, in the background, and answers at once from what is indexed, so an answer
    with ``unindexed`` above 0 may miss those records. An older version's answer
    cannot say it (the cloud renders 0 for it, so the field is left out)."""

    lines: list[RecallLine]
    block: str  # the memory block for a model: data, never instruction
    scope: Literal["cloud"] = "cloud"  # searched: the whole space, not a device subset
    factual: bool  # whether the opinion filter treated the query as factual
    unindexed: Annotated[int, Since(RECALL_UNINDEXED_SINCE), Field(ge=0)] = 0


class RecallResponse(Envelope):
    """A ``RecallAnswer`` (JSON) sealed to the asking device's X25519 public key, as a
    libsodium sealed box: like pulled content, an answer is readable only with the
    device's private key, so a stolen credential alone reads no memory."""

    sealed_answer: B64Bytes


# --- the end of an account, and the service's closing (protocol 2 on) -------------------

DELETE_ACCOUNT_SINCE = 2  # the protocol version ``POST /v1/account/delete`` came with


class DeleteAccountRequest(Envelope):
    """``POST /v1/account/delete``: the user deletes the whole account. ``proof`` is an
    Ed25519 signature by the account key over ``protocol.strongauth``'s
    ``delete_account_challenge(space, request_id)``, so it deletes this space only and
    was made for this one request."""

    request_id: RequestId
    proof: B64Bytes


class DeleteAccountResponse(Envelope):
    """The account ended: every key of its memory is destroyed; ``pending`` are the
    devices that have not yet confirmed they wiped their copy."""

    space_id: SpaceId
    ended_at: UtcDatetime
    pending: list[PendingDevice]


class ServiceMode(StrEnum):
    """Where the service is in a shutdown (``cloud.closing.mode_at``)."""

    OPEN = "open"  # no shutdown announced
    CLOSING = "closing"  # announced: everything works until ``closes_at``
    EXPORT_ONLY = "export_only"  # after ``closes_at``: no writes, export stays open
    CLOSED = "closed"  # after ``export_until``: every account ended, keys destroyed


class ServiceStatus(Envelope):
    """``GET /v1/service``: the service's region and whether it is shutting down."""

    region: str
    mode: ServiceMode
    announced_at: UtcDatetime | None = None
    closes_at: UtcDatetime | None = None
    export_until: UtcDatetime | None = None


# every answer of a closing service carries this header (``closing_header``)
CLOSING_HEADER = "Memsync-Closing"


def closing_header(closes_at: datetime, export_until: datetime) -> str:
    """The ``Memsync-Closing`` value: ``closes_at=<iso>; export_until=<iso>`` (UTC)."""
    return f"closes_at={_iso(closes_at)}; export_until={_iso(export_until)}"


def parse_closing_header(value: str) -> tuple[datetime, datetime] | None:
    """``(closes_at, export_until)`` of a ``Memsync-Closing`` value; None if it is not one."""
    parts: dict[str, str] = {}
    for part in value.split(";"):
        name, _, text = part.strip().partition("=")
        parts[name] = text
    try:
        closes_at = datetime.fromisoformat(parts["closes_at"].replace("Z", "+00:00"))
        export_until = datetime.fromisoformat(parts["export_until"].replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    if closes_at.tzinfo is None or export_until.tzinfo is None:
        return None
    return closes_at.astimezone(UTC), export_until.astimezone(UTC)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


# --- the device subset (protocol 3 on; ``protocol.subset``) ------------------------------

SUBSET_SINCE = 3  # the protocol version the device subset and its routes came with


class SubsetPolicyRequest(Envelope):
    """``POST /v1/subset/policy``: replace the calling device's subset policy."""

    policy: SubsetPolicy


class PinRequest(Envelope):
    """``POST /v1/subset/pins``: pin a record to the calling device (``pinned: false``
    unpins it). A pinned record is kept on the device whatever the rules say, within
    the budget, unless it is "only for" an area the device is not for."""

    record_id: RecordId
    pinned: bool = True


class SubsetResponse(Envelope):
    subset: SubsetView


class RecordState(Envelope):
    """``GET /v1/records/{id}``: the state of a live record, or a skeleton when forgotten.

    A skeleton carries only ``id``, ``lifecycle_state`` and ``forgotten_at``. Content is
    never answered in the clear; it travels sealed through pull.
    """

    id: RecordId
    lifecycle_state: LifecycleState
    forgotten_at: UtcDatetime | None = None
    version: int | None = None  # the current version
    recorded_at: UtcDatetime | None = None  # when the current version was recorded
    usage_restriction: UsageRestriction | None = None
    superseded_by_record: RecordId | None = None
    conflicts_with: list[RecordId] | None = None
