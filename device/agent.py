"""DeviceAgent: the offline core's API for the simulator, the CLI and tests.

Invariants:
- Every local operation is decided by ``protocol.rules.decide`` on facts read from
  this device's store (never the caller's claim) and, when accepted, is applied,
  queued and its receipt stored in ONE local transaction (``device.local``); a
  refusal raises ``Refused`` (with the refusal receipt) and changes nothing.
- Who started an op is set here, not by the caller: the user's controls are
  ``user``; ``infer`` and ``add_artifact`` are the assistant's.
- Text lives in one place: sealed in its record version, episode or artifact; queued
  ops carry no text; derived rows are shredded with what they came from.
- In temporary mode nothing is written at all: every write raises ``TemporaryMode``
  before touching the store; reads work.
- Recall re-checks every index hit against the record's authoritative state.
- All network traffic goes through ``device.client.CloudClient`` (one transport seam);
  time and randomness come from the injected ``clock`` and ``random_bytes``.
- ``protocol_versions`` pins the protocol versions the device speaks (default: every
  version this code speaks), e.g. ``(1, 1)`` to act as an old device.
- When the cloud says this device must wipe its copy (401 ``device_revoked``, 410
  ``account_ended``), every key and row of memory here goes in one transaction, queued
  ops included; the wipe is confirmed to the cloud and ``DeviceRevoked`` or
  ``AccountEnded`` is raised. ``delete_account`` ends the whole account (strong
  authentication) and wipes this device the same way.
- Live sync (``start_live``/``stop_live``/``live``, ``device.live``) runs in background
  threads: syncs are serialised by the agent's sync lock, every statement and
  transaction by the database's own lock; each queued op signals the live loop.
- ``watch``/``changes``/``watch_query`` hear every record change after its transaction
  commits (``device.changes``, ``device.query_watch``); what a sync changes is told
  with cause ``pulled``. ``sync_status`` reads where the device stands
  (``device.sync_status``); only a sync that went through stores its time.
"""

from __future__ import annotations

import re
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
from pydantic import ValidationError

from device import (
    account,
    candidates,
    catalog,
    cloud_recall,
    export,
    importing,
    keys,
    provisional,
    reading,
    retrieval,
    search,
    shred,
    store,
)
from device import account_key as account_keys
from device import subset as device_subset
from device.account_key import KeyChange
from device.changes import (
    Cause,
    ChangeFeed,
    ChangeHub,
    RecordEvent,
    Subscription,
    caused_by,
)
from device.client import LIVE_PULL_SINCE, CloudClient
from device.db import DB_FILENAME, KDF_SUFFIX, Database
from device.detector import default_detector
from device.errors import (
    AccountEnded,
    AccountEndedRefused,
    AccountKeyMismatch,
    AlreadyEnrolled,
    CopyWiped,
    DeviceRevoked,
    DeviceRevokedRefused,
    InvalidOperation,
    NeedsNewerProtocol,
    NoCloud,
    NotEnrolled,
    Offline,
    Refused,
    ServerError,
    ServerRefused,
    TemporaryMode,
)
from device.export import ExportResult
from device.facts import episode_facts_of
from device.live import DEFAULT_WAIT, LiveEvent, LiveSync, Sleeper, end_waiting_pull
from device.live import wait_for_change as wait_for_live_change
from device.local import apply_local
from device.migrations import migrate
from device.query_watch import QueryWatch
from device.retrieval import Recall
from device.sync import SyncSession
from device.sync_status import SyncStatus, SyncTracker
from device.views import (
    AccountDeletion,
    ImportReport,
    LocalResult,
    RecallHit,
    RecordView,
    SaidResult,
    SourceView,
    SyncReport,
    VersionView,
)
from device.writing import Writer
from protocol import strongauth
from protocol.consolidation.extract import content_type_of
from protocol.consolidation.timeexpr import read_time
from protocol.detection.labels import Detection
from protocol.errors import ProtocolError
from protocol.ids import make_id
from protocol.messages import (
    AccountKeyRequest,
    AccountKeyResponse,
    DeleteAccountRequest,
    DeleteAccountResponse,
    DevicesResponse,
    DeviceStatus,
    EnrollRequest,
    EnrollResponse,
    ForgetStatus,
    PendingResponse,
    PinRequest,
    RecallRequest,
    RecallResponse,
    SubsetPolicyRequest,
    SubsetResponse,
    WipedRequest,
    WipedResponse,
)
from protocol.model import (
    ArtifactKind,
    ContentType,
    CustomType,
    Initiator,
    Layer,
    LifeArea,
    LifecycleState,
    RecordContent,
    Sensitivity,
    TimeKind,
    UsageRestriction,
)
from protocol.operations import (
    AddArtifact,
    AnyOperation,
    Confirm,
    Correct,
    DontUse,
    ForgetArea,
    ForgetPermanently,
    Infer,
    Reaffirm,
    Receipt,
    RefusalCode,
    Remember,
    RestrictUsage,
    ReviseRule,
    SetProject,
    UseAgain,
)
from protocol.rules import context_episodes
from protocol.sentences import check_said
from protocol.subset import SubsetPolicy, SubsetView
from protocol.version import SUPPORTED_VERSIONS, VersionRange, check_range

Clock = Callable[[], datetime]
RandomBytes = Callable[[int], bytes]
# what the cloud says when this device must wipe its copy of the memory
_MUST_WIPE = (DeviceRevokedRefused, AccountEndedRefused)

MAX_SOURCES = 64
FORGOTTEN = LifecycleState.FORGOTTEN.value
REBUILD_PER_SYNC = 256  # vectors of another model re-embedded after each sync


_T = TypeVar("_T")


def _system_clock() -> datetime:
    return datetime.now(UTC)


def remembered_type(
    text: str, detect: Callable[[Sequence[str]], tuple[list[Detection], str]], now: datetime
) -> ContentType:
    """The content type of an explicit remember: the detector's, except that *opinion*
    (which a factual question leaves out) needs the sentence's own words to agree
    ("I think …"); otherwise the rules' reading. A fact typed as an opinion would be
    dropped from the very answers it belongs in."""
    detected = detect([text])[0][0].content_type
    if detected is not ContentType.OPINION:
        return detected
    read, _cue = content_type_of(text, read_time(text, said_at=now, hint=None))
    return detected if read is ContentType.OPINION else read


def _detect(sentences: Sequence[str]) -> tuple[list[Detection], str]:
    model = default_detector()
    return model.detect(sentences), model.model_id


def _checked_versions(versions: VersionRange | None) -> VersionRange:
    try:
        return check_range(SUPPORTED_VERSIONS if versions is None else versions)
    except ValueError as exc:
        raise InvalidOperation(
            f"protocol_versions {versions!r}: {exc}; nothing was opened"
        ) from exc


_ID_PATTERN = re.compile(r"^\^(\w+)_\[a-z0-9\]\{(\d+),(\d+)\}\$$")


def _in_words(err: Any) -> str:
    """A validator's complaint for a person: a malformed id is described, not its regex."""
    if err.get("type") != "string_pattern_mismatch":
        return str(err["msg"])
    shown = repr(str(err.get("input", ""))[:40])
    found = _ID_PATTERN.match(str((err.get("ctx") or {}).get("pattern", "")))
    if found is None:
        return f"{shown} is not in the expected form"
    prefix, low, high = found.groups()
    return (
        f"{shown} is not a well-formed id: it should be '{prefix}_' followed by "
        f"{low} to {high} lower-case letters or digits"
    )


def _invalid(kind: str, item_id: str, exc: ValidationError) -> InvalidOperation:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {_in_words(err)}"
        for err in exc.errors()
    )
    return InvalidOperation(f"{kind} {item_id} is invalid, nothing was changed: {problems}")


class DeviceAgent:
    def __init__(
        self,
        db: Database,
        directory: Path,
        *,
        transport: httpx.BaseTransport | None,
        clock: Clock | None,
        random_bytes: RandomBytes | None,
        protocol_versions: VersionRange | None = None,
    ) -> None:
        self._db = db
        self._directory = directory
        self._transport = transport
        self._protocol_versions = _checked_versions(protocol_versions)
        self._clock = clock or _system_clock
        self._random = random_bytes or secrets.token_bytes
        self._client: CloudClient | None = None
        self._temporary = False
        self._sync_lock = threading.RLock()
        self._live: LiveSync | None = None
        # why this device last wiped its copy: (the cloud's code, what it said, how many
        # queued ops went with it); in memory only (after a restart: "revoked" wording)
        self._wipe_cause: tuple[type[ServerRefused], str, int] | None = None
        self._changes = ChangeHub(db, self._now_dt)
        self._status = SyncTracker()

    # --- lifecycle -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        passphrase: str,
        *,
        device_name: str,
        cloud_url: str | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Clock | None = None,
        random_bytes: RandomBytes | None = None,
        protocol_versions: VersionRange | None = None,
        kdf_iterations: int | None = None,
    ) -> DeviceAgent:
        """Create a new encrypted device database and key pair in ``directory``.

        ``kdf_iterations``: how many PBKDF2 iterations stretch the passphrase (None:
        SQLCipher's default, 256,000). Lower it only for simulations."""
        directory = Path(directory)
        versions = _checked_versions(protocol_versions)
        if not device_name or len(device_name) > 64:
            raise InvalidOperation(
                f"device name {device_name!r} must be 1 to 64 characters; nothing was created"
            )
        db = Database.create(directory / DB_FILENAME, passphrase, kdf_iterations=kdf_iterations)
        agent = cls(
            db,
            directory,
            transport=transport,
            clock=clock,
            random_bytes=random_bytes,
            protocol_versions=versions,
        )
        try:
            migrate(db, agent._now())
            with db.atomic():
                private_key = keys.new_private_key(agent._random)
                store.insert_meta(
                    db,
                    device_name=device_name,
                    cloud_url=cloud_url,
                    local_space=make_id("sp", agent._random(16)),
                    private_key=keys.private_key_bytes(private_key),
                    created_at=agent._now(),
                )
        except BaseException:
            db.close()
            for suffix in ("", "-wal", "-shm", KDF_SUFFIX):
                (directory / (DB_FILENAME + suffix)).unlink(missing_ok=True)
            raise
        return agent

    @classmethod
    def open(
        cls,
        directory: Path,
        passphrase: str,
        *,
        transport: httpx.BaseTransport | None = None,
        clock: Clock | None = None,
        random_bytes: RandomBytes | None = None,
        protocol_versions: VersionRange | None = None,
    ) -> DeviceAgent:
        """Open an existing device database (applying any pending migrations)."""
        directory = Path(directory)
        versions = _checked_versions(protocol_versions)
        db = Database.open_existing(directory / DB_FILENAME, passphrase)
        agent = cls(
            db,
            directory,
            transport=transport,
            clock=clock,
            random_bytes=random_bytes,
            protocol_versions=versions,
        )
        try:
            ran = migrate(db, agent._now())
            store.get_meta(db)
            if 2 in ran and 1 not in ran:
                catalog.backfill_v2(db, agent._now())
            with db.atomic():  # records an older schema left unindexed (another model's
                # vectors are rebuilt in the background: ``rebuild_vectors``)
                search.catch_up(db, other_models=False)
                search.merge_if_needed(db)
        except BaseException:
            db.close()
            raise
        return agent

    def close(self) -> None:
        self.stop_live()
        if self._client is not None:
            self._client.close()
            self._client = None
        self._db.close()

    def __enter__(self) -> DeviceAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- identity --------------------------------------------------------------------

    @property
    def device_id(self) -> str | None:
        return store.get_meta(self._db).device_id

    @property
    def space_id(self) -> str | None:
        return store.get_meta(self._db).space_id

    @property
    def device_name(self) -> str:
        return store.get_meta(self._db).device_name

    @property
    def public_key(self) -> bytes:
        return keys.public_key_bytes(keys.load_private_key(store.get_meta(self._db).private_key))

    @property
    def protocol_versions(self) -> VersionRange:
        """The protocol versions this device speaks (its pin, or every one it knows)."""
        return self._protocol_versions

    @property
    def protocol_version(self) -> int:
        """The version the device speaks to its cloud: the highest of its range until a
        cloud refused it, then the one negotiated (``CloudClient.protocol_version``)."""
        return self._protocol_versions[1] if self._client is None else self._client.protocol_version

    @property
    def live_pull(self) -> bool:
        """Whether the version spoken to the cloud has live pull (``PullRequest.wait``)."""
        return self.protocol_version >= LIVE_PULL_SINCE

    @property
    def db_path(self) -> Path:
        return self._db.path

    @property
    def directory(self) -> Path:
        return self._directory

    # --- helpers ---------------------------------------------------------------------

    def _now_dt(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None or now.utcoffset() is None:
            raise ValueError(f"the injected clock returned a naive datetime {now!r}")
        return now.astimezone(UTC)

    def _now(self) -> str:
        return self._now_dt().isoformat()

    def now(self) -> datetime:
        """The injected clock's time, in UTC (for callers that date what they write)."""
        return self._now_dt()

    def random_bytes(self, n: int) -> bytes:
        """``n`` bytes from the injected randomness (session ids, tokens, file names)."""
        return self._random(n)

    def _id(self, prefix: str) -> str:
        return make_id(prefix, self._random(16))

    def _cloud(self, cloud_url: str | None = None) -> CloudClient:
        url = cloud_url or store.get_meta(self._db).cloud_url
        if url is None:
            raise NoCloud(
                f"device {self.device_name!r} has no cloud URL; give one to enroll or init"
            )
        if self._client is None or self._client.base_url != url:
            if self._client is not None:
                self._client.close()
            self._client = CloudClient(
                url, transport=self._transport, protocol_versions=self._protocol_versions
            )
        self._client.credential = store.get_meta(self._db).credential
        return self._client

    def _writable(self, what: str) -> None:
        if self._temporary:
            raise TemporaryMode(what)

    # --- temporary mode --------------------------------------------------------------

    @property
    def temporary_mode(self) -> bool:
        """While on, nothing is written: no episode, record, queue row, receipt, history."""
        return self._temporary

    def set_temporary_mode(self, on: bool) -> None:
        """Turn temporary mode on or off (kept in memory only: turning it on writes nothing)."""
        self._temporary = bool(on)

    # --- enrollment and the account key ----------------------------------------------

    def enroll(
        self, code: str, cloud_url: str | None = None, *, account_passphrase: str | None = None
    ) -> str:
        """Enroll this device with a one-time code; returns the device id.

        The account key is derived from the passphrase AND the space id, which is only
        known from the enrollment answer; so it is registered right after enrolling
        (``register_account``). If that step fails, the enrollment stands and
        ``register_account`` can be called again.
        """
        self._writable("enrollment")
        meta = store.get_meta(self._db)
        if meta.device_id is not None:
            raise AlreadyEnrolled(
                f"device {meta.device_name!r} is already enrolled as {meta.device_id} "
                f"in space {meta.space_id}"
            )
        client = self._cloud(cloud_url)
        try:
            request = EnrollRequest(
                code=code, device_name=meta.device_name, public_key=self.public_key
            )
        except ValidationError as exc:
            raise _invalid("enrollment", meta.device_name, exc) from exc
        response = client.post("/v1/enroll", request, EnrollResponse, auth=False)
        with self._db.atomic():
            store.set_enrollment(
                self._db,
                device_id=response.device_id,
                space_id=response.space_id,
                credential=response.credential,
                cloud_url=client.base_url,
            )
            if response.account_key is not None:
                store.set_account_key(self._db, response.account_key)
        client.credential = response.credential
        if account_passphrase is not None:
            self.register_account(account_passphrase)
        return response.device_id

    def register_account(self, account_passphrase: str) -> None:
        """Derive the account key (passphrase + space id) and register it with the cloud;
        a key already registered must match (else the passphrase is wrong)."""
        self._writable("registering the account key")
        meta = store.get_meta(self._db)
        if meta.space_id is None or meta.credential is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; the account key needs the "
                "space id, so enroll first"
            )
        if not account_passphrase:
            raise Refused(RefusalCode.STRONG_AUTH_REQUIRED.value, "the account passphrase is empty")
        if meta.account_key is not None:
            account.signing_key(account_passphrase, meta.space_id, meta.account_key)
            return  # already registered, and the passphrase matches it
        derived = strongauth.account_verify_key(account_passphrase, meta.space_id)
        try:
            with self._revocable():
                response = self._cloud().post(
                    "/v1/account-key", AccountKeyRequest(account_key=derived), AccountKeyResponse
                )
        except AccountKeyMismatch as exc:
            raise Refused(
                RefusalCode.STRONG_AUTH_REQUIRED.value,
                f"the account passphrase does not match the account key already "
                f"registered for space {meta.space_id}; nothing was stored",
            ) from exc
        with self._db.atomic():
            store.set_account_key(self._db, response.account_key)

    @property
    def account_key(self) -> bytes | None:
        return store.get_meta(self._db).account_key

    def change_account_passphrase(self, current: str, new: str) -> KeyChange:
        """Change the account passphrase (``device.account_key.change``)."""
        self._writable("changing the account passphrase")
        with self._revocable():
            return account_keys.change(
                self._db, self._cloud, current, new, random_bytes=self._random
            )

    def learn_account_key(self, account_passphrase: str) -> bool:
        """Take a passphrase changed on another device (``device.account_key.learn``)."""
        self._writable("checking the account passphrase")
        with self._revocable():
            return account_keys.learn(self._db, self._cloud, account_passphrase)

    # --- local operations ------------------------------------------------------------

    def apply_operation(self, op: AnyOperation) -> LocalResult:
        """Apply a ready-made operation locally and queue it (the API methods build theirs
        and come through here). Raises ``Refused`` with the refusal receipt."""
        self._writable(f"operation {op.kind} {op.op_id}")
        result = apply_local(self._db, op, now=self._now_dt(), random_bytes=self._random)
        self._queued()
        return result

    def _build(self, kind: str, item_id: str, build: Callable[[], AnyOperation]) -> AnyOperation:
        try:
            return build()
        except ValidationError as exc:
            raise _invalid(kind, item_id, exc) from exc

    def say(
        self, text: str, conversation_id: str, *, sensitivity: Sensitivity | None = None
    ) -> str:
        """Log what the user typed as an episode, and mark the sentences the on-device
        detector finds worth remembering as candidates; return the episode's id.

        Nothing becomes a record here: candidates are consolidated in the background
        (``end_session`` and the cloud's worker). ``sensitivity`` names a class the
        caller knows the words belong to (it can only add to what the detector sees).
        In temporary mode this raises ``TemporaryMode`` and nothing is logged.
        """
        return self.say_detected(text, conversation_id, sensitivity=sensitivity).episode_id

    def say_detected(
        self, text: str, conversation_id: str, *, sensitivity: Sensitivity | None = None
    ) -> SaidResult:
        """``say``, returning what the detector saw in each sentence."""
        self._writable("logging what you typed")
        return self._write(
            "episode", lambda w: w.say(text, conversation_id, sensitivity=sensitivity)
        )

    def end_session(self, conversation_id: str) -> list[LocalResult]:
        """The conversation ended: its candidates are ready for consolidation (in the
        cloud; those of classes kept on this device, here, as candidates)."""
        self._writable("ending the conversation")
        return self._write("end of conversation", lambda w: w.end_session(conversation_id))

    def ingest(
        self, text: str, *, medium: str, source: str, conversation_id: str = "external"
    ) -> str:
        """Log external content (web page, email, document, calendar invite, another
        agent, tool output); it can only ever become candidates. Returns the episode id."""
        self._writable("logging external content")
        return self._write(
            "external content",
            lambda w: w.ingest(text, medium=medium, source=source, conversation_id=conversation_id),
        )

    def observe(self, subject: str, value: str, *, source: str) -> str:
        """Log one behaviour event from an app ("morning coffee order" = "americano")."""
        self._writable("logging a behaviour event")
        return self._write("behaviour event", lambda w: w.observe(subject, value, source=source))

    def import_text(self, text: str, *, source: str) -> list[LocalResult]:
        """Import text: each statement a candidate "imported, not verified"."""
        self._writable("importing")
        return self._write("import", lambda w: w.import_text(text, source=source))

    def import_package(
        self, path: Path | str, *, include_sensitive: bool = True, allow_unsigned: bool = False
    ) -> ImportReport:
        """Import a memsync export package: its episodes as import episodes, its records
        (and accepted behaviour rules) as candidates "imported, not verified", in one
        local transaction (``device.importing``). A refused file raises an
        ``ImportRefused`` naming it and the reason, and changes nothing.
        ``include_sensitive=False`` leaves the sensitive classes out; a package not
        signed by this account is refused unless ``allow_unsigned``."""
        self._writable("importing a package")
        report = importing.import_package(
            self._db,
            Path(path),
            now=self._now_dt(),
            new_id=self._id,
            apply=lambda op, keep: apply_local(
                self._db, op, now=self._now_dt(), random_bytes=self._random, keep_on_device=keep
            ),
            include_sensitive=include_sensitive,
            allow_unsigned=allow_unsigned,
        )
        self._queued()
        return report

    def keep_on_device(self, sensitivity: Sensitivity) -> None:
        """Keep a sensitive class only on this device from now on: what the user types in
        it, its candidates and records are never sent to the cloud, not even encrypted.
        Losing this device loses them: there is no cloud copy and no backup."""
        self._writable("keeping a class on this device")
        if sensitivity is Sensitivity.NORMAL:
            raise InvalidOperation(
                "only a sensitive class can be kept on this device, not 'normal'; "
                "nothing was changed"
            )
        with self._db.atomic():
            candidates.keep_on_device(self._db, sensitivity, self._now())

    def device_only_classes(self) -> set[Sensitivity]:
        return candidates.device_only_classes(self._db)

    def _write(self, what: str, run: Callable[[Writer], _T]) -> _T:
        writer = Writer(
            db=self._db,
            now=self._now_dt,
            new_id=self._id,
            apply=lambda op, keep: apply_local(
                self._db, op, now=self._now_dt(), random_bytes=self._random, keep_on_device=keep
            ),
            detect=_detect,
            build=self._build,
        )
        try:
            result = run(writer)
        except ValidationError as exc:
            raise _invalid(what, "", exc) from exc
        except ValueError as exc:
            raise InvalidOperation(f"{what} refused, nothing was changed: {exc}") from exc
        self._queued()
        return result

    def _sources(self, record_id: str, text: str, conversation_id: str) -> list[str]:
        """The conversation's episodes holding the sentence (else all, so ``decide``
        names the reason: fragment, paraphrase, several sentences)."""
        held = [
            (row["episode_id"], f)
            for row in store.conversation_episodes(self._db, conversation_id)
            if (f := episode_facts_of(self._db, row)) is not None
        ]
        if not held:
            raise Refused(
                RefusalCode.NOT_SAID.value,
                f"record {record_id} refused: {text!r} is not a sentence the user typed; "
                f"this device holds nothing typed in conversation {conversation_id!r}",
            )
        sources = [e for e, f in held if check_said(text, [f.text]).ok]
        if not sources:
            return [e for e, _ in held][-MAX_SOURCES:]
        return [*context_episodes(text, held, sources[-1]), *sources][-MAX_SOURCES:]

    def remember(
        self,
        text: str,
        conversation_id: str,
        *,
        content_type: ContentType | None = None,
        custom_type: CustomType | None = None,
        layer: Layer = Layer.CONSOLIDATED_FACT,
        time_kind: TimeKind = TimeKind.PERMANENT,
        valid_from: datetime | None = None,
        valid_until: datetime | None = None,
        expected_end: datetime | None = None,
        life_areas: Sequence[LifeArea] = (LifeArea.GENERAL,),
        project: str | None = None,
        sensitivity: Sensitivity = Sensitivity.NORMAL,
        subject: str | None = None,
    ) -> LocalResult:
        """Keep one whole sentence the user typed in this conversation as a said record.
        Without ``content_type`` (or a ``custom_type``, which names its core) the detector
        reads it from the sentence, as it does for what the user says."""
        self._writable("remembering")
        if content_type is None:
            content_type = (
                custom_type.core
                if custom_type is not None
                else remembered_type(text, _detect, self._now_dt())
            )
        record_id = self._id("rec")
        sources = self._sources(record_id, text, conversation_id)
        op = self._build(
            "record",
            record_id,
            lambda: Remember(
                op_id=self._id("op"),
                made_at=self._now_dt(),
                initiated_by=Initiator.USER,
                record_id=record_id,
                text=text,
                conversation_id=conversation_id,
                source_episode_ids=sources,
                content_type=content_type,
                custom_type=custom_type,
                layer=layer,
                time_kind=time_kind,
                valid_from=valid_from,
                valid_until=valid_until,
                expected_end=expected_end,
                life_areas=list(life_areas),
                project=project,
                sensitivity=sensitivity,
                subject=subject,
            ),
        )
        return self.apply_operation(op)

    def correct(self, record_id: str, text: str, conversation_id: str) -> LocalResult:
        """ "That's wrong": a new version in the user's own words (a whole typed sentence of
        that conversation); the old version stays in the chain, no longer active."""
        self._writable("correcting")
        sources = self._sources(record_id, text, conversation_id)
        op = self._build(
            "correction of record",
            record_id,
            lambda: Correct(
                op_id=self._id("op"),
                made_at=self._now_dt(),
                initiated_by=Initiator.USER,
                record_id=record_id,
                text=text,
                conversation_id=conversation_id,
                source_episode_ids=sources,
                base_version=provisional.confirmed_version(self._db, record_id),
            ),
        )
        return self.apply_operation(op)

    def _record_op(self, cls: Any, record_id: str, **fields: Any) -> LocalResult:
        self._writable(f"{cls.model_fields['kind'].default} on record {record_id}")
        initiated = fields.pop("initiated_by", Initiator.USER)
        op = self._build(
            f"{cls.model_fields['kind'].default} of record",
            repr(record_id),
            lambda: cls(
                op_id=self._id("op"),
                made_at=self._now_dt(),
                initiated_by=initiated,
                record_id=record_id,
                **fields,
            ),
        )
        return self.apply_operation(op)

    def dont_use(self, record_id: str) -> LocalResult:
        """ "Know it, but don't use it": excluded from retrieval; reversible."""
        return self._record_op(DontUse, record_id)

    def use_again(self, record_id: str) -> LocalResult:
        return self._record_op(UseAgain, record_id)

    def restrict_usage(
        self, record_id: str, *, area: LifeArea | None = None, project: str | None = None
    ) -> LocalResult:
        """ "Only use for X" (one area or one project); both None lifts the restriction."""
        self._writable(f"restrict_usage on record {record_id}")
        try:
            restriction = (
                None
                if area is None and project is None
                else UsageRestriction(area=area, project=project)
            )
        except ValidationError as exc:
            raise _invalid("usage restriction of record", record_id, exc) from exc
        return self._record_op(RestrictUsage, record_id, restriction=restriction)

    def confirm(self, record_id: str) -> LocalResult:
        """The user confirms a candidate: it becomes active and verified."""
        return self._record_op(Confirm, record_id)

    def reaffirm(
        self, record_id: str, still_true: bool, expected_end: datetime | None = None
    ) -> LocalResult:
        """The answer to "Still doing this?" for a "for now" record."""
        return self._record_op(
            Reaffirm, record_id, still_true=still_true, expected_end=expected_end
        )

    def forget_permanently(self, record_id: str) -> LocalResult:
        """Shred the record, its source episodes and everything derived from it at once;
        queue ``forget_permanently``. Cannot be undone."""
        return self._record_op(
            ForgetPermanently, record_id, episode_ids=store.source_episode_ids(self._db, record_id)
        )

    def forget_area(self, area: LifeArea | None, account_passphrase: str) -> LocalResult:
        """Forget a whole life area (None: all memory) permanently. Needs the account
        passphrase, checked here against the stored account key; always the user's."""
        what = f"forgetting {area.value if area else 'all memory'}"
        self._writable(what)
        meta = store.get_meta(self._db)
        key = account.signing_key(account_passphrase, meta.space_id, meta.account_key)
        assert meta.space_id is not None
        op_id = self._id("op")
        area_name = area.value if area else None
        op = self._build(
            "forget of area",
            repr(area_name),
            lambda: ForgetArea(
                op_id=op_id,
                made_at=self._now_dt(),
                initiated_by=Initiator.USER,
                area=area,
                proof=account.proof(key, str(meta.space_id), op_id, area_name),
            ),
        )
        return self.apply_operation(op)

    def infer(self, content: RecordContent, *, record_id: str | None = None) -> LocalResult:
        """A record the assistant (or consolidator) derived: observed, inferred or
        hypothesis, never "said". External content stays a candidate."""
        self._writable("writing an inferred record")
        rid = record_id or self._id("rec")
        op = self._build(
            "inferred record",
            rid,
            lambda: Infer(
                op_id=self._id("op"),
                made_at=self._now_dt(),
                initiated_by=Initiator.ASSISTANT,
                record_id=rid,
                content=content,
            ),
        )
        return self.apply_operation(op)

    def add_artifact(
        self, kind: ArtifactKind, derived_from: Sequence[str], payload: str
    ) -> LocalResult:
        """A derived item (summary, text view, embedding, cached copy) naming its parents;
        forgetting any parent shreds it."""
        self._writable("storing a derived item")
        artifact_id = self._id("art")
        op = self._build(
            "artifact",
            artifact_id,
            lambda: AddArtifact(
                op_id=self._id("op"),
                made_at=self._now_dt(),
                initiated_by=Initiator.ASSISTANT,
                artifact_id=artifact_id,
                artifact_kind=kind,
                derived_from=list(derived_from),
                payload=payload,
            ),
        )
        return self.apply_operation(op)

    # --- behaviour rules -----------------------------------------------------------------

    def rules(self) -> list[RecordView]:
        """Behaviour rules: proposed (candidate), accepted (active), undone (not in use)."""
        return [v for v in self.what_do_you_know() if v.layer == Layer.BEHAVIOUR_RULE.value]

    def _rule(self, record_id: str) -> RecordView:
        for view in self.rules():
            if view.record_id == record_id:
                return view
        raise InvalidOperation(f"record {record_id} is not a behaviour rule held on this device")

    def accept_rule(self, record_id: str) -> LocalResult:
        """Accept a proposed behaviour rule: it takes effect from now on."""
        self._rule(record_id)
        return self.confirm(record_id)

    def reject_rule(self, record_id: str) -> LocalResult:
        """Reject a proposed rule, or undo an accepted one: it no longer takes effect
        (kept, not in use; ``use_again`` brings it back)."""
        self._rule(record_id)
        return self.dont_use(record_id)

    def revise_rule(self, record_id: str, text: str) -> LocalResult:
        """Rewrite an accepted or proposed rule: a new version (the old stays in history)."""
        self._rule(record_id)
        return self._record_op(ReviseRule, record_id, text=text)

    def undo_rule(self, record_id: str) -> LocalResult:
        """Undo the last change to a rule: back to the previous version's words (as a new
        version), or, for a rule that was never revised, stop using it."""
        view = self._rule(record_id)
        history = [v for v in self.record_history(record_id) if v.text is not None]
        previous = [v for v in history if not v.current and v.text != view.text]
        if previous:
            return self.revise_rule(record_id, str(previous[-1].text))
        return self.dont_use(record_id)

    # --- what was written in the background ----------------------------------------------

    def recently_learned(self, days: int = 7) -> list[RecordView]:
        """Active records the background consolidation wrote in the last ``days`` days."""
        since = self._now_dt() - timedelta(days=days)
        return [
            v
            for v in self.what_do_you_know()
            if v.background
            and v.lifecycle == LifecycleState.ACTIVE.value
            and v.recorded_at is not None
            and datetime.fromisoformat(v.recorded_at) >= since
        ]

    def waiting_for_confirmation(self) -> list[RecordView]:
        """Candidates the user is asked to confirm: sensitive classes, proposed rules,
        external content, imports."""
        return [v for v in self.what_do_you_know() if v.lifecycle == LifecycleState.CANDIDATE.value]

    def set_project(self, name: str, open: bool) -> LocalResult:
        """Open (create or reopen) or close a project; closed ones are left out of recall."""
        self._writable(f"setting project {name!r}")
        op = self._build(
            "project",
            repr(name),
            lambda: SetProject(
                op_id=self._id("op"),
                made_at=self._now_dt(),
                initiated_by=Initiator.USER,
                project=name,
                open=open,
            ),
        )
        return self.apply_operation(op)

    def receipt(self, op_id: str) -> Receipt | None:
        """The durable receipt of an op: the cloud's once pushed, else the local one."""
        raw = store.receipt_json(self._db, op_id) or catalog.local_receipt_json(self._db, op_id)
        return None if raw is None else Receipt.model_validate_json(raw)

    # --- reading ---------------------------------------------------------------------

    def recall(
        self,
        query: str,
        limit: int = 5,
        *,
        area: LifeArea | None = None,
        project: str | None = None,
        personalized: bool = True,
        factual: bool | None = None,
        consents: Iterable[Sensitivity] = (),
    ) -> list[RecallHit]:
        """The records retrieval returns for a task (see ``retrieve`` for the whole answer)."""
        return list(
            self.retrieve(
                query,
                limit,
                area=area,
                project=project,
                personalized=personalized,
                factual=factual,
                consents=consents,
            ).hits
        )

    def retrieve(
        self,
        query: str,
        limit: int = 5,
        *,
        area: LifeArea | None = None,
        project: str | None = None,
        personalized: bool = True,
        factual: bool | None = None,
        consents: Iterable[Sensitivity] = (),
    ) -> Recall:
        """Retrieval in the fixed eight-step order over this device's subset, offline:
        the hits, the marked data block for a model, and what was searched (the answer
        says it looked only at what this device holds). Each returned record counts as
        used (reported with the next pull; none in temporary mode)."""
        answer = retrieval.recall(
            self._db,
            query,
            self._now_dt(),
            limit=limit,
            area=area,
            project=project,
            personalized=personalized,
            factual=factual,
            consents=frozenset(consents),
        )
        if answer.hits and not self._temporary:
            with self._db.atomic():
                device_subset.note_uses(self._db, [h.record_id for h in answer.hits], self._now())
        return answer

    def retrieve_from_cloud(
        self,
        query: str,
        limit: int = 5,
        *,
        area: LifeArea | None = None,
        project: str | None = None,
        personalized: bool = True,
        factual: bool | None = None,
        consents: Iterable[Sensitivity] = (),
        fallback: bool = True,
    ) -> Recall:
        """Ask the cloud to run the same pipeline over the whole space.

        The answer comes sealed to this device's key and is opened here; each line says
        whether it came from the cloud (``RecallHit.from_cloud``: this device does not
        hold it). When the cloud has not indexed everything yet, the note says how many
        records it could not search. The records it returned count as used here
        (reported with the next pull; none in temporary mode), so the subset's rules
        may bring them to this device, within its budget, at the next sync.

        When the cloud is unreachable or slow (``Offline``, ``CloudSlow``) and
        ``fallback`` is on, this device's own recall answers instead (``retrieve``) and
        the note says so; with ``fallback`` off the error is raised."""
        allowed = list(consents)  # read once: the fall-back asks with the same
        try:
            return self._recall_in_cloud(
                query, limit, area, project, personalized, factual, allowed
            )
        except Offline as exc:
            if not fallback:
                raise
            local = self.retrieve(
                query,
                limit,
                area=area,
                project=project,
                personalized=personalized,
                factual=factual,
                consents=allowed,
            )
            return cloud_recall.fallen_back(local, exc)

    def _recall_in_cloud(
        self,
        query: str,
        limit: int,
        area: LifeArea | None,
        project: str | None,
        personalized: bool,
        factual: bool | None,
        consents: list[Sensitivity],
    ) -> Recall:
        meta = store.get_meta(self._db)
        if meta.credential is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; it can only search itself"
            )
        request = RecallRequest(
            query=query,
            limit=limit,
            area=area,
            project=project,
            personalized=personalized,
            factual=factual,
            consents=consents,
        )
        with self._revocable():
            client = self._cloud()
            response = client.post("/v1/recall", request, RecallResponse)
        try:
            plain = keys.open_sealed_answer(
                keys.load_private_key(meta.private_key), response.sealed_answer
            )
            answer = cloud_recall.open_answer(plain, client.protocol_version)
        except (keys.SealedKeyDoesNotOpen, ValidationError, ValueError, ProtocolError) as exc:
            raise ServerError(f"the cloud's recall answer does not open: {exc}") from exc
        recall = cloud_recall.with_unindexed(
            retrieval.from_cloud(answer, held=self.holds), answer.unindexed
        )
        if recall.hits and not self._temporary:
            # counted like a local answer's: the subset's rules for what is used often or
            # lately may then bring these records here at the next sync, within the budget
            with self._db.atomic():
                device_subset.note_uses(self._db, [h.record_id for h in recall.hits], self._now())
        return recall

    def what_do_you_know(self) -> list[RecordView]:
        """Everything: candidates, inferences, not in use, corrected, skeletons."""
        return reading.what_do_you_know(self._db, self._now_dt())

    def list_records(self) -> list[RecordView]:
        return self.what_do_you_know()

    def record_history(self, record_id: str) -> list[VersionView]:
        """The version chain, for the user: old versions marked no longer active."""
        return reading.record_history(self._db, record_id)

    def as_of(self, when: datetime) -> list[RecordView]:
        """What memory said at ``when`` (forgotten content never)."""
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"as_of needs a time with a time zone, got {when!r}")
        return reading.as_of(self._db, when.astimezone(UTC))

    def explain(self, record_id: str) -> str:
        """ "How do you know this?", from the record's evidence and source episodes."""
        return reading.explain(self._db, record_id, self._now_dt())

    def sources(self, record_id: str) -> list[SourceView]:
        """The source episodes of the record's current version: dated, and quoted only
        when the record is the user's own words."""
        return reading.sources(self._db, record_id)

    def due_questions(self) -> list[tuple[str, str]]:
        return reading.due_questions(self._db, self._now_dt())

    def pending_ops(self) -> int:
        return store.queue_count(self._db)

    def data_keys_for(self, record_id: str) -> list[bytes]:
        """Raw DEKs held for the record's versions and its source episodes."""
        key_ids = [version["key_id"] for version in store.versions_of(self._db, record_id)]
        for episode_id in store.source_episode_ids(self._db, record_id):
            row = store.episode_row(self._db, episode_id)
            if row is not None:
                key_ids.append(row["key_id"])
        deks = [store.get_key(self._db, k) for k in dict.fromkeys(key_ids)]
        return [d for d in deks if d is not None]

    def data_keys_for_artifact(self, artifact_id: str) -> list[bytes]:
        row = catalog.artifact_row(self._db, artifact_id)
        dek = None if row is None else store.get_key(self._db, row["key_id"])
        return [] if dek is None else [dek]

    def artifact_ids(self) -> list[str]:
        return catalog.artifact_ids(self._db)

    def data_key_ids(self) -> set[str]:
        return store.key_ids(self._db)

    # --- export ----------------------------------------------------------------------

    def export(
        self, out_dir: Path, account_passphrase: str, *, include_sensitive: bool = True
    ) -> ExportResult:
        """Export the whole space (``POST /v1/export``) into two files in ``out_dir``: the
        JSON package and its Markdown view (``device.export``). Needs the account
        passphrase, checked here first; ``include_sensitive`` False leaves the sensitive
        section out (this device's device-only classes with it). Writes no memory."""
        with self._revocable():
            return export.export(
                self._db,
                self._cloud,
                Path(out_dir),
                account_passphrase,
                include_sensitive=include_sensitive,
                random_bytes=self._random,
            )

    # --- sync ------------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Acks left over, then push (pull first on 409), then pull and ack."""
        self._writable("syncing")
        meta = store.get_meta(self._db)
        if meta.credential is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; enroll it with a code first"
            )
        self._status.started(self._now_dt())
        try:
            # what the sync changes here is the cloud's word: told as "pulled"
            with caused_by(Cause.PULLED), self._sync_lock, self._revocable():
                report = SyncSession(self._db, self._cloud(), self._now, self._random).run()
        except BaseException as exc:
            self._status.failed(exc)
            raise
        with self._db.atomic():
            store.set_last_synced(self._db, self._now())
        self._status.succeeded()
        self.rebuild_vectors(limit=REBUILD_PER_SYNC)
        return report

    # --- watching changes and the sync status -----------------------------------------

    def watch(self, callback: Callable[[RecordEvent], None]) -> Subscription:
        """Call ``callback`` with each record event (added, changed, forgotten, evicted)
        once the transaction that made it committed, in the thread that committed it;
        returns the subscription (``cancel()`` stops it). A callback that raises is
        logged; the write and the other callbacks go on."""

        def each(events: list[RecordEvent]) -> None:
            for event in events:
                callback(event)

        return self._changes.add(each)

    def changes(self) -> ChangeFeed:
        """The iterator form of ``watch``: events queue in the feed as they commit;
        ``drain()`` takes what is there, iterating waits for more (until ``close()``)."""
        return ChangeFeed(self._changes)

    def watch_query(
        self,
        query: str,
        callback: Callable[[list[RecallHit]], None],
        limit: int = 5,
        *,
        area: LifeArea | None = None,
        project: str | None = None,
        personalized: bool = True,
        factual: bool | None = None,
        consents: Iterable[Sensitivity] = (),
    ) -> QueryWatch:
        """Run ``recall`` now and call back with its answer; then re-run it whenever
        records change and call back when the answer differs (``device.query_watch``).
        An answer told counts its records as used, as a recall does; a re-run whose
        answer is unchanged counts nothing."""
        allowed = frozenset(consents)

        def run() -> list[RecallHit]:
            return list(
                retrieval.recall(
                    self._db,
                    query,
                    self._now_dt(),
                    limit=limit,
                    area=area,
                    project=project,
                    personalized=personalized,
                    factual=factual,
                    consents=allowed,
                ).hits
            )

        def told(hits: list[RecallHit]) -> None:
            if hits and not self._temporary:
                with self._db.atomic():
                    device_subset.note_uses(self._db, [h.record_id for h in hits], self._now())

        return QueryWatch(self._changes, run, told, callback)

    def sync_status(self, *, ask_cloud: bool = False) -> SyncStatus:
        """Where this device stands: queued ops, when it last synced, the cursor, what it
        holds against what the cloud last counted for its subset, a first sync's progress,
        online or offline and the last error (``device.sync_status``). ``ask_cloud``
        asks the cloud for its count first (``GET /v1/subset``; protocol 3 on); if the
        cloud cannot answer, the status says what it last knew. Writes nothing."""
        if ask_cloud and store.get_meta(self._db).credential is not None:
            try:
                self.subset()
            except Offline as exc:
                self._status.unreachable(exc)
            except (ServerError, ServerRefused, NeedsNewerProtocol):
                pass  # an older cloud has no subset: the count stays unknown
        live = self._live is not None and self._live.running
        return self._status.read(self._db, live=live)

    def rebuild_vectors(self, limit: int | None = None, batch: int = 64) -> int:
        """Re-embed records whose vector another embedding model made (the model
        changed), ``batch`` per transaction, at most ``limit`` (None: all). Until a
        record is rebuilt, vector search does not see it (its lexical terms still
        match): one ranking never mixes two models' vectors. Returns how many were
        rebuilt; every sync rebuilds up to ``REBUILD_PER_SYNC`` in the background."""
        wanted = len(search.stale(self._db))
        if limit is not None:
            wanted = min(wanted, limit)
        done = 0
        while done < wanted:
            with self._db.atomic():
                n = search.catch_up(self._db, limit=min(batch, wanted - done))
            if n == 0:
                break
            done += n
        return done

    # --- live sync -------------------------------------------------------------------

    def start_live(
        self,
        *,
        wait: float = DEFAULT_WAIT,
        on_event: Callable[[LiveEvent], None] | None = None,
        sleeper: Sleeper | None = None,
    ) -> LiveSync:
        """Sync now, then keep syncing in the background whenever the cloud says the
        space changed (live pulls of ``wait`` seconds) or an op is queued here."""
        meta = store.get_meta(self._db)
        if meta.credential is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; enroll it before live sync"
            )
        if self._live is not None and self._live.running:
            raise InvalidOperation(f"device {meta.device_name!r} is already in live sync")
        client = self._cloud()  # made here, once: the live threads share it

        def wait_for_change(seconds: float) -> bool:
            with self._revocable():
                try:
                    return wait_for_live_change(self._db, client, seconds)
                except NeedsNewerProtocol:
                    return True  # the cloud just stepped this device down to version 1

        live = LiveSync(
            sync=self.sync,
            wait_for_change=wait_for_change,
            end_wait=lambda: end_waiting_pull(self._db, client),
            wait=wait,
            can_wait=lambda: client.live_pull,
            on_event=on_event,
            sleeper=sleeper,
        )
        self._live = live
        live.start()
        return live

    def stop_live(self) -> None:
        """Stop live sync (no-op when it is not running)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    @contextmanager
    def live(
        self,
        *,
        wait: float = DEFAULT_WAIT,
        on_event: Callable[[LiveEvent], None] | None = None,
        sleeper: Sleeper | None = None,
    ) -> Iterator[LiveSync]:
        """Live sync for the duration of a ``with`` block."""
        started = self.start_live(wait=wait, on_event=on_event, sleeper=sleeper)
        try:
            yield started
        finally:
            self.stop_live()

    def _queued(self) -> None:
        """A local op was applied (and maybe queued), or the subset changed: a live loop
        syncs at once."""
        live = self._live
        if live is not None:
            live.queued()

    @contextmanager
    def _revocable(self) -> Iterator[None]:
        """Any call to the cloud: if the cloud says this device must wipe its copy (it was
        revoked, or its account ended), wipe every key and row of memory here, queued ops
        included (one transaction, then the WAL is checkpointed), confirm the wipe to the
        cloud and raise ``DeviceRevoked`` or ``AccountEnded``. A wipe whose confirmation
        did not get through is confirmed first, at the next call."""
        if store.get_meta(self._db).wipe_unconfirmed:
            raise self._wiped(0, self.confirm_wipe())
        try:
            yield
        except _MUST_WIPE as exc:
            held = self._wipe(type(exc), exc.message)
            raise self._wiped(held, self.confirm_wipe()) from exc

    def _wipe(self, cause: type[ServerRefused], said: str, how: Cause = Cause.PULLED) -> int:
        """Wipe this device's copy of the memory (the cloud answered ``cause``); how
        many records it held. Each record held is told evicted (``how``: the cloud's
        word, unless this device ended the account itself)."""
        queued = store.queue_count(self._db)
        with caused_by(how), self._db.atomic():
            held = shred.wipe(self._db, at=self._now())
        self._db.checkpoint()
        self._wipe_cause = (cause, said, queued)
        return held

    def _wiped(self, held: int, confirmed: bool) -> CopyWiped:
        cause = self._wipe_cause
        if cause is None or not issubclass(cause[0], AccountEndedRefused):
            return self._revoked(held, confirmed)
        _code, said, queued = cause
        told = (
            "the cloud was told"
            if confirmed
            else "the cloud could not be told yet (it is told at the next call to the cloud)"
        )
        what = f"{held} record(s), keys and words included, and " if held else ""
        return AccountEnded(
            f"the account of device {self.device_name!r} ended (the cloud says: {said}); "
            f"this device's copy of the memory ({what}{queued} queued change(s) never sent, "
            f"lost with the account) was wiped and {told}"
        )

    # --- what the cloud knows about the account ---------------------------------------

    def devices(self) -> list[DeviceStatus]:
        """Every device of this account as the cloud knows it (``GET /v1/devices``):
        name, enrolled, last reached the cloud, revoked, wiped. ``Offline`` when the
        cloud cannot be reached; ``NotEnrolled`` before enrolling. Writes nothing."""
        self._enrolled("list the account's devices")
        with self._revocable():
            return list(self._cloud().get("/v1/devices", DevicesResponse).devices)

    def pending_forgets(self) -> list[ForgetStatus]:
        """Forgets some device of this account has not confirmed yet
        (``GET /v1/forgets/pending``), each with the devices still holding keys.
        ``Offline`` when the cloud cannot be reached. Writes nothing."""
        self._enrolled("ask which forgets are pending")
        with self._revocable():
            return list(self._cloud().get("/v1/forgets/pending", PendingResponse).forgets)

    # --- the device subset (protocol 3) ----------------------------------------------

    def subset(self) -> SubsetView:
        """This device's subset as the cloud chose it (``GET /v1/subset``): the policy,
        the pins, how many records of each class and how many bytes it holds, and what
        did not fit the budget. ``Offline`` when the cloud cannot be reached."""
        self._enrolled("read its subset")
        with self._revocable():
            return self._counted(self._cloud().get("/v1/subset", SubsetResponse).subset)

    def _counted(self, view: SubsetView) -> SubsetView:
        self._status.cloud_counted(view.records, self._now_dt())
        return view

    def set_subset_policy(self, policy: SubsetPolicy) -> SubsetView:
        """Replace this device's subset rules and budget; what enters and leaves arrives
        with the next sync, at once in live mode (records that leave are evicted, never
        forgotten)."""
        self._enrolled("change its subset")
        with self._revocable():
            view = (
                self._cloud()
                .post("/v1/subset/policy", SubsetPolicyRequest(policy=policy), SubsetResponse)
                .subset
            )
        self._queued()  # a live loop's pull waits for the feed, which this did not move
        return self._counted(view)

    def pin(self, record_id: str, pinned: bool = True) -> SubsetView:
        """Keep a record on this device whatever the rules say (within the budget); it
        arrives with the next sync, at once in live mode. ``pinned=False`` unpins it."""
        self._enrolled("pin a record")
        with self._revocable():
            view = (
                self._cloud()
                .post(
                    "/v1/subset/pins",
                    PinRequest(record_id=record_id, pinned=pinned),
                    SubsetResponse,
                )
                .subset
            )
        self._queued()  # a live loop's pull waits for the feed, which this did not move
        return self._counted(view)

    def unpin(self, record_id: str) -> SubsetView:
        return self.pin(record_id, pinned=False)

    def holds(self, record_id: str) -> bool:
        """Whether this device holds the record's content now (read from its database)."""
        row = store.record_row(self._db, record_id)
        return row is not None and row["lifecycle"] != LifecycleState.FORGOTTEN.value

    def held_records(self) -> set[str]:
        """The records whose content this device holds now (read from its database)."""
        return device_subset.held(self._db)

    def held_because(self, record_id: str) -> str | None:
        """Why the cloud put the record in this device's subset (``protocol.subset.Reason``),
        or None (written here, held before the subset, or not held)."""
        return device_subset.reason(self._db, record_id)

    def _enrolled(self, what: str) -> None:
        meta = store.get_meta(self._db)
        if meta.credential is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; it cannot {what} "
                "before it enrolls with a code"
            )

    # --- the end of the account -----------------------------------------------------

    def delete_account(self, account_passphrase: str) -> AccountDeletion:
        """Delete the whole account, on every device and in the cloud: the cloud destroys
        every key of its memory, then this device wipes its own copy (queued changes that
        were never sent included) and confirms it. Needs the account passphrase, checked
        here first (a wrong one sends nothing) and proved to the cloud with the account
        key; the other devices wipe their copies when they next reach the cloud."""
        self._writable("deleting the account")
        meta = store.get_meta(self._db)
        if meta.credential is None or meta.space_id is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; only an account in the cloud "
                "can be deleted"
            )
        key = account.signing_key(account_passphrase, meta.space_id, meta.account_key)
        request_id = self._id("req")
        request = DeleteAccountRequest(
            request_id=request_id,
            proof=strongauth.prove_delete_account(key, meta.space_id, request_id),
        )
        with self._sync_lock, self._revocable():
            response = self._cloud().post("/v1/account/delete", request, DeleteAccountResponse)
        self.stop_live()
        queued = store.queue_count(self._db)
        said = (
            f"the account of space {response.space_id} was deleted at "
            f"{response.ended_at.isoformat()} from device {meta.device_id}"
        )
        held = self._wipe(AccountEndedRefused, said, Cause.LOCAL)
        confirmed = self.confirm_wipe()
        return AccountDeletion(
            space_id=response.space_id,
            ended_at=response.ended_at.isoformat(),
            wiped_records=held,
            wiped_queued=queued,
            confirmed=confirmed,
            pending=tuple(
                (d.device_id, d.device_name)
                for d in response.pending
                if d.device_id != meta.device_id
            ),
        )

    @property
    def closing_notice(self) -> str | None:
        """The ``Memsync-Closing`` header the cloud sent last (the service is closing:
        ``closes_at=...; export_until=...``), or None."""
        return None if self._client is None else self._client.closing

    def confirm_wipe(self) -> bool:
        """Tell the cloud this device wiped its copy (``POST /v1/wiped``; it was revoked,
        or its account ended), then drop the credential. True when the cloud has heard it
        (now or before); False when it could not be reached (the credential stays, to try
        again)."""
        meta = store.get_meta(self._db)
        if meta.wiped_at is None:
            raise InvalidOperation(
                f"device {meta.device_name!r} has not been wiped; only a device that wiped "
                "its copy (revoked, or its account ended) confirms it"
            )
        if meta.credential is None:
            return True
        try:
            self._cloud().post("/v1/wiped", WipedRequest(), WipedResponse)
        except (Offline, ServerError):
            return False  # not heard: the next call to the cloud tries again
        except ServerRefused:
            pass  # the cloud answered for good (e.g. the credential is unknown to it)
        with self._db.atomic():
            store.forget_credential(self._db)
        self._db.checkpoint()  # no page image holding the credential stays in the WAL
        return True

    def _revoked(self, held: int, confirmed: bool) -> DeviceRevoked:
        told = (
            "the cloud was told"
            if confirmed
            else "the cloud could not be told yet (it is told at the next call to the cloud)"
        )
        what = f"({held} record(s), keys and words included) " if held else ""
        return DeviceRevoked(
            f"device {self.device_name!r} was revoked by its account: its copy of the "
            f"memory {what}was wiped and {told}; its credential is dropped once the cloud "
            "knows. This device stays revoked: to use the cloud again, ask for a code "
            "('memsync cloud add-device --user …') and create a new device with it "
            "('memsync device init --dir NEW_FOLDER --name NAME --code CODE')"
        )

    def _debug_db(self) -> Any:
        """The raw connection, for tests that must poke the store directly."""
        return self._db
