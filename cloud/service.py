"""The cloud's application core, shared by the HTTP app and the CLI.

Invariants:
- Every method is scoped to the caller's space; an id from another space is
  indistinguishable from one that does not exist.
- A push is one transaction: receipts are stored with their effects, a replayed
  ``op_id`` gets ``duplicate`` and never a second effect, and a device with
  unacknowledged key destructions gets ``PullRequired`` with nothing applied.
- Forgetting commits the skeleton and the key-destruction event first, then destroys
  the keys; ``ensure_destroyed`` (run at start-up and after every push) finishes any
  destruction a crash interrupted.
- Only sealed content carries text, sources and conversation ids; plain DEKs never
  touch the record store.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import re
from collections.abc import Iterable
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypeVar

from nacl.public import PublicKey, SealedBox
from pydantic import ValidationError

from cloud.config import CloudConfig
from cloud.errors import (
    AlreadyExists,
    EnrollmentRefused,
    KeyStoreError,
    MalformedCursorError,
    MalformedRequest,
    NotFound,
    PullRequired,
    StoreError,
    Unauthorized,
)
from cloud.keystore import SqliteKeyStore, open_key_store
from cloud.store import SqlStore, open_store
from cloud.store.base import ChangeRow, EpisodeRow, ForgetKey, StoreSession, VersionRow
from cloud.validation import describe
from protocol.errors import SealError
from protocol.ids import RecordId, is_id, make_id
from protocol.messages import (
    AckRequest,
    AckResponse,
    EnrollRequest,
    EnrollResponse,
    Envelope,
    EpisodeChange,
    EpisodeContent,
    ForgetStatus,
    KeyDestruction,
    PendingDevice,
    PendingResponse,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecordVersionChange,
)
from protocol.model import EpistemicState, LifecycleState, RecordContent
from protocol.operations import (
    OPERATION_ADAPTER,
    AddEpisode,
    ForgetPermanently,
    Receipt,
    ReceiptStatus,
    RefusalCode,
    Remember,
)
from protocol.rules import (
    Accept,
    CreateEpisode,
    CreateRecord,
    EpisodeFacts,
    Facts,
    ForgetRecord,
    RecordFacts,
    decide,
)
from protocol.sealing import NONCE_BYTES, binding, open_sealed, seal
from protocol.wire import UtcDatetime

log = logging.getLogger("memsync.cloud")

ENROLLMENT_CODE_TTL = timedelta(hours=24)
MAX_NAME_CHARS = 64
PUBLIC_KEY_BYTES = 32
_T = TypeVar("_T", EpisodeContent, RecordContent)
_CURSOR = re.compile(r"c1:(0|[1-9][0-9]{0,17})")


class RecordState(Envelope):
    """``GET /v1/records/{id}``: metadata of a live record, or a skeleton when forgotten.

    A skeleton carries only ``id``, ``lifecycle_state`` and ``forgotten_at``. Content is
    never answered in the clear; it travels sealed through pull.
    """

    id: RecordId
    lifecycle_state: LifecycleState
    forgotten_at: UtcDatetime | None = None
    version: int | None = None
    epistemic_state: EpistemicState | None = None
    recorded_at: UtcDatetime | None = None


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def encode_cursor(seq: int) -> str:
    return base64.urlsafe_b64encode(f"c1:{seq}".encode()).decode("ascii").rstrip("=")


def decode_cursor(cursor: str | None) -> int:
    """The sequence number behind a cursor this server issued; raise otherwise."""
    if cursor is None:
        return 0
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode("ascii")
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server") from exc
    match = _CURSOR.fullmatch(raw)
    if match is None or encode_cursor(int(match.group(1))) != cursor:
        raise MalformedCursorError(f"cursor {cursor[:80]!r} was not issued by this server")
    return int(match.group(1))


class CloudService:
    """The cloud: spaces, devices, push, pull, acknowledgements and forget status."""

    def __init__(self, config: CloudConfig) -> None:
        self.config = config
        self._clock = config.clock
        self._random = config.random_bytes
        if config.store_url.startswith("sqlite:"):
            store_path = config.store_url.removeprefix("sqlite:///")
            if Path(store_path).resolve() == Path(config.key_store_path).resolve():
                raise KeyStoreError(
                    f"the key store {config.key_store_path} must be a different file from the "
                    "record store"
                )
        self.store: SqlStore = open_store(config.store_url, config.clock)
        try:
            self.key_store: SqliteKeyStore = open_key_store(
                Path(config.key_store_path), config.random_bytes, config.clock, config.master_key
            )
        except BaseException:
            self.store.close()
            raise
        self.ensure_destroyed()

    @property
    def key_store_path(self) -> Path:
        return self.key_store.path

    def close(self) -> None:
        self.key_store.close()
        self.store.close()

    # --- spaces and enrollment -------------------------------------------------------

    def add_user(self, name: str) -> tuple[str, str]:
        """Create a space for ``name``; return ``(space_id, one-time enrollment code)``."""
        name = name.strip()
        if not name or len(name) > MAX_NAME_CHARS:
            raise MalformedRequest(
                f"user name {name[:80]!r} must be 1 to {MAX_NAME_CHARS} characters"
            )
        if is_id("sp", name):
            raise MalformedRequest(f"user name {name!r} looks like a space id; choose another")
        now = self._clock()
        space_id = make_id("sp", self._random(15))
        code = self._new_code()
        with self.store.session() as s:
            if s.space_by_name(name) is not None:
                raise AlreadyExists(f"a user named {name!r} already exists")
            s.create_space(space_id, name, now)
            s.add_enrollment_code(space_id, _hash(code), now, now + ENROLLMENT_CODE_TTL)
            self.key_store.create_space_key(space_id)
        return space_id, code

    def new_enrollment_code(self, space_id: str) -> str:
        """Another one-time code for an existing space (valid 24 hours)."""
        now = self._clock()
        code = self._new_code()
        with self.store.session() as s:
            if not s.space_exists(space_id):
                raise NotFound(f"space {space_id} does not exist")
            s.add_enrollment_code(space_id, _hash(code), now, now + ENROLLMENT_CODE_TTL)
        return code

    def _new_code(self) -> str:
        return base64.b32encode(self._random(20)).decode("ascii").lower()

    def enroll(self, req: EnrollRequest) -> EnrollResponse:
        if len(req.public_key) != PUBLIC_KEY_BYTES:
            raise MalformedRequest(
                f"field 'public_key': an X25519 public key is {PUBLIC_KEY_BYTES} bytes, "
                f"got {len(req.public_key)}"
            )
        now = self._clock()
        code_hash = _hash(req.code)
        with self.store.session() as s:
            row = s.enrollment_code(code_hash)
            if row is None:
                raise EnrollmentRefused("enrollment code is unknown")
            if row.used_at is not None:
                raise EnrollmentRefused("enrollment code was already used; codes are single-use")
            if now >= row.expires_at:
                raise EnrollmentRefused(
                    f"enrollment code expired at {row.expires_at.isoformat()}; ask for a new one"
                )
            device_id = make_id("dev", self._random(15))
            credential = "cred_" + base64.urlsafe_b64encode(self._random(32)).decode().rstrip("=")
            if not s.use_enrollment_code(code_hash, device_id, now):
                raise EnrollmentRefused("enrollment code was already used; codes are single-use")
            s.add_device(
                row.space_id, device_id, req.device_name, req.public_key, _hash(credential), now
            )
        return EnrollResponse(device_id=device_id, space_id=row.space_id, credential=credential)

    def authenticate(self, credential: str) -> tuple[str, str]:
        """``(space_id, device_id)`` of a device credential; ``Unauthorized`` otherwise."""
        if not credential:
            raise Unauthorized("no device credential was given")
        with self.store.session() as s:
            device = s.device_by_credential(_hash(credential))
        if device is None:
            raise Unauthorized("the device credential is unknown")
        return device.space_id, device.device_id

    def find_space(self, name_or_id: str) -> str:
        with self.store.session() as s:
            if is_id("sp", name_or_id) and s.space_exists(name_or_id):
                return name_or_id
            found = s.space_by_name(name_or_id)
        if found is None:
            raise NotFound(f"no user or space named {name_or_id!r}")
        return found

    # --- push ------------------------------------------------------------------------

    def push(self, space_id: str, device_id: str, req: PushRequest) -> PushResponse:
        now = self._clock()
        with self.store.session(space_id, lock=True) as s:
            if s.device(space_id, device_id) is None:
                raise Unauthorized(f"device {device_id} is not enrolled in this space")
            unacked = s.unacked_events(space_id, device_id)
            if unacked:
                raise PullRequired(device_id, unacked)
            receipts = [
                self._apply(s, space_id, device_id, index, raw, now)
                for index, raw in enumerate(req.ops)
            ]
            s.touch_device(space_id, device_id, now)
        # committed: now destroy the keys of anything forgotten (and of earlier crashes)
        self.ensure_destroyed()
        return PushResponse(receipts=receipts)

    def _apply(
        self,
        s: StoreSession,
        space_id: str,
        device_id: str,
        index: int,
        raw: dict[str, object],
        now: datetime,
    ) -> Receipt:
        raw_op_id = raw.get("op_id")
        op_id = raw_op_id if isinstance(raw_op_id, str) and is_id("op", raw_op_id) else None
        if op_id is not None:
            stored = s.receipt(space_id, op_id)
            if stored is not None:
                original = Receipt.model_validate_json(stored)
                return Receipt(
                    index=index,
                    op_id=op_id,
                    status=ReceiptStatus.DUPLICATE,
                    original_status=original.status,
                    code=original.code,
                    reason=original.reason,
                    record_id=original.record_id,
                    applied_at=original.applied_at,
                )
        try:
            op = OPERATION_ADAPTER.validate_python(raw)
        except ValidationError as exc:
            shown = op_id or (repr(raw_op_id)[:80] if raw_op_id is not None else "without op_id")
            receipt = Receipt(
                index=index,
                op_id=op_id,
                status=ReceiptStatus.REFUSED,
                code=RefusalCode.MALFORMED,
                reason=f"op {index} ({shown}) is malformed: {describe(exc)}",
            )
            if op_id is not None:
                s.put_receipt(space_id, op_id, device_id, receipt.model_dump_json(), now)
            return receipt

        record_id = None if isinstance(op, AddEpisode) else op.record_id
        decision = decide(op, self._facts(s, space_id, op))
        if isinstance(decision, Accept):
            effect = decision.effect
            if isinstance(effect, CreateEpisode):
                assert isinstance(op, AddEpisode)
                self._create_episode(s, space_id, device_id, op, now)
            elif isinstance(effect, CreateRecord):
                assert isinstance(op, Remember)
                self._create_record(s, space_id, device_id, op, effect, now)
            else:
                assert isinstance(effect, ForgetRecord)
                self._forget(s, space_id, effect.record_id, now)
            receipt = Receipt(
                index=index,
                op_id=op.op_id,
                status=ReceiptStatus.APPLIED,
                record_id=record_id,
                applied_at=now,
            )
        else:
            receipt = Receipt(
                index=index,
                op_id=op.op_id,
                status=ReceiptStatus.REFUSED,
                code=decision.code,
                reason=decision.reason,
                record_id=record_id,
            )
        s.put_receipt(space_id, op.op_id, device_id, receipt.model_dump_json(), now)
        return receipt

    def _facts(
        self, s: StoreSession, space_id: str, op: AddEpisode | Remember | ForgetPermanently
    ) -> Facts:
        if isinstance(op, AddEpisode):
            # only existence matters to ``decide`` here (an episode is written once, even
            # after its content was forgotten), so the content is not opened
            rows = s.episodes(space_id, [op.episode_id])
            return Facts(episodes={e: EpisodeFacts(e, "", "") for e in rows})
        row = s.record(space_id, op.record_id)
        record = (
            None
            if row is None
            else RecordFacts(row.record_id, LifecycleState(row.lifecycle), row.current_version)
        )
        if isinstance(op, ForgetPermanently):
            return Facts(record=record)
        return Facts(
            record=record, episodes=self._open_episodes(s, space_id, op.source_episode_ids)
        )

    def _open_episodes(
        self, s: StoreSession, space_id: str, episode_ids: Iterable[str]
    ) -> dict[str, EpisodeFacts]:
        """The episodes whose content is still readable, opened with their keys."""
        rows = s.episodes(space_id, episode_ids)
        gone = s.forgotten_key_ids(space_id, [r.key_id for r in rows.values()])
        out: dict[str, EpisodeFacts] = {}
        for episode_id, row in rows.items():
            if row.key_id in gone:
                continue
            dek = self.key_store.data_key(space_id, row.key_id)
            if dek is None:
                continue
            content = self._open(
                dek, row.sealed_content, space_id, "episode", episode_id, 1, EpisodeContent
            )
            out[episode_id] = EpisodeFacts(episode_id, content.conversation_id, content.text)
        return out

    @staticmethod
    def _open(
        dek: bytes, sealed: bytes, space: str, kind: str, item: str, version: int, model: type[_T]
    ) -> _T:
        try:
            return model.model_validate_json(
                open_sealed(dek, sealed, binding(space, kind, item, version))
            )
        except (SealError, ValidationError) as exc:
            raise StoreError(f"{kind} {item} v{version} of {space} does not open: {exc}") from exc

    def _seal(
        self, dek: bytes, plaintext: bytes, space: str, kind: str, item: str, v: int
    ) -> bytes:
        return seal(dek, self._random(NONCE_BYTES), plaintext, binding(space, kind, item, v))

    def _create_episode(
        self, s: StoreSession, space_id: str, device_id: str, op: AddEpisode, now: datetime
    ) -> None:
        key_id, dek = self.key_store.create_data_key(space_id)
        content = EpisodeContent(conversation_id=op.conversation_id, text=op.text)
        sealed = self._seal(
            dek, content.model_dump_json().encode(), space_id, "episode", op.episode_id, 1
        )
        s.insert_episode(space_id, EpisodeRow(op.episode_id, op.typed_at, key_id, sealed))
        seq = s.allocate_seq(space_id)
        s.add_change(space_id, ChangeRow(seq, "episode", None, None, op.episode_id, None, now))
        s.add_holdings(space_id, device_id, [("episode", op.episode_id)])

    def _create_record(
        self,
        s: StoreSession,
        space_id: str,
        device_id: str,
        op: Remember,
        effect: CreateRecord,
        now: datetime,
    ) -> None:
        key_id, dek = self.key_store.create_data_key(space_id)
        content = RecordContent(
            text=op.text,
            source_episode_ids=list(op.source_episode_ids),
            conversation_id=op.conversation_id,
        )
        sealed = self._seal(
            dek,
            content.model_dump_json().encode(),
            space_id,
            "record",
            op.record_id,
            effect.version,
        )
        s.insert_record(space_id, op.record_id, effect.lifecycle_state.value, effect.version, now)
        s.insert_version(
            space_id,
            VersionRow(
                op.record_id,
                effect.version,
                None,
                effect.epistemic_state.value,
                now,
                key_id,
                sealed,
            ),
        )
        seq = s.allocate_seq(space_id)
        s.add_change(
            space_id,
            ChangeRow(seq, "record_version", op.record_id, effect.version, None, None, now),
        )
        s.add_holdings(space_id, device_id, [("record", op.record_id)])

    def _forget(self, s: StoreSession, space_id: str, record_id: str, now: datetime) -> None:
        keys: list[ForgetKey] = []
        sources: set[str] = set()
        for version in s.versions(space_id, record_id):
            keys.append(ForgetKey(version.key_id, None))
            dek = self.key_store.data_key(space_id, version.key_id)
            if dek is None:
                log.error(
                    "record %s v%d of %s has no data key; its source episodes cannot be read",
                    record_id,
                    version.version,
                    space_id,
                )
                continue
            content = self._open(
                dek,
                version.sealed_content,
                space_id,
                "record",
                record_id,
                version.version,
                RecordContent,
            )
            sources.update(content.source_episode_ids)
        episodes = s.episodes(space_id, sources)
        keys.extend(ForgetKey(row.key_id, eid) for eid, row in sorted(episodes.items()))
        seq = s.allocate_seq(space_id)
        s.mark_forgotten(space_id, record_id, now)
        s.add_change(space_id, ChangeRow(seq, "key_destruction", record_id, None, None, seq, now))
        holders = s.holders(space_id, [("record", record_id), *(("episode", e) for e in sources)])
        s.add_forget_event(space_id, seq, record_id, now, keys, holders)

    def ensure_destroyed(self) -> int:
        """Destroy the keys of every committed forget whose keys may remain. Idempotent.

        Runs at start-up and after every push; returns how many forget events it
        finished now. A key-store failure is logged and left for the next sweep (the
        forget is committed and the content is already withheld from pulls).
        """
        with self.store.session() as s:
            events = s.undestroyed_forget_events()
        finished = 0
        for ev in events:
            try:
                self.key_store.destroy(k.key_id for k in ev.keys)
            except KeyStoreError as exc:  # the forget stays committed; the next sweep retries
                log.error("forget event %d of %s: %s", ev.event_id, ev.space_id, exc)
                continue
            with self.store.session() as s:
                s.mark_keys_destroyed(ev.space_id, ev.event_id, self._clock())
            finished += 1
        return finished

    # --- pull, ack, pending ---------------------------------------------------------

    def pull(self, space_id: str, device_id: str, req: PullRequest) -> PullResponse:
        after = decode_cursor(req.cursor)
        now = self._clock()
        with self.store.session(space_id, lock=False) as s:
            device = s.device(space_id, device_id)
            if device is None:
                raise Unauthorized(f"device {device_id} is not enrolled in this space")
            if after > s.last_seq(space_id):
                raise MalformedCursorError(
                    f"cursor {req.cursor!r} points past the end of this space's changes; "
                    "it was not issued by this server"
                )
            rows = s.changes_after(space_id, after, req.limit + 1)
            has_more = len(rows) > req.limit
            rows = rows[: req.limit]
            box = SealedBox(PublicKey(device.public_key))
            changes: list[RecordVersionChange | EpisodeChange | KeyDestruction] = []
            held: list[tuple[str, str]] = []
            for row in rows:
                change = self._change(s, space_id, row, box)
                if change is None:
                    continue
                changes.append(change)
                if isinstance(change, RecordVersionChange):
                    held.append(("record", change.record_id))
                elif isinstance(change, EpisodeChange):
                    held.append(("episode", change.episode_id))
            s.add_holdings(space_id, device_id, held)
            s.touch_device(space_id, device_id, now)
        cursor = encode_cursor(rows[-1].seq if rows else after)
        return PullResponse(changes=changes, cursor=cursor, has_more=has_more)

    def _change(
        self, s: StoreSession, space_id: str, row: ChangeRow, box: SealedBox[PublicKey]
    ) -> RecordVersionChange | EpisodeChange | KeyDestruction | None:
        if row.kind == "record_version":
            assert row.record_id is not None and row.version is not None
            record = s.record(space_id, row.record_id)
            version = s.version(space_id, row.record_id, row.version)
            if record is None or version is None:
                raise StoreError(f"change {row.seq} of {space_id} names a missing record version")
            if record.lifecycle == LifecycleState.FORGOTTEN.value:
                return None
            if s.forgotten_key_ids(space_id, [version.key_id]):
                return None
            dek = self.key_store.data_key(space_id, version.key_id)
            if dek is None:
                return None
            return RecordVersionChange(
                seq=row.seq,
                record_id=version.record_id,
                version=version.version,
                supersedes=version.supersedes,
                epistemic_state=EpistemicState(version.epistemic_state),
                lifecycle_state=LifecycleState(record.lifecycle),
                recorded_at=version.recorded_at,
                key_id=version.key_id,
                sealed_content=version.sealed_content,
                sealed_key=box.encrypt(dek),
            )
        if row.kind == "episode":
            assert row.episode_id is not None
            episode = s.episodes(space_id, [row.episode_id]).get(row.episode_id)
            if episode is None:
                raise StoreError(f"change {row.seq} of {space_id} names a missing episode")
            if s.forgotten_key_ids(space_id, [episode.key_id]):
                return None
            dek = self.key_store.data_key(space_id, episode.key_id)
            if dek is None:
                return None
            return EpisodeChange(
                seq=row.seq,
                episode_id=episode.episode_id,
                typed_at=episode.typed_at,
                key_id=episode.key_id,
                sealed_content=episode.sealed_content,
                sealed_key=box.encrypt(dek),
            )
        if row.kind == "key_destruction":
            assert row.event_id is not None
            ev = s.forget_event(space_id, row.event_id)
            if ev is None:
                raise StoreError(f"change {row.seq} of {space_id} names a missing forget event")
            return KeyDestruction(
                seq=row.seq,
                event_id=ev.event_id,
                record_id=ev.record_id,
                key_ids=[k.key_id for k in ev.keys],
                episode_ids=sorted({k.episode_id for k in ev.keys if k.episode_id}),
                destroyed_at=ev.forgotten_at,
            )
        raise StoreError(f"change {row.seq} of {space_id} has unknown kind {row.kind!r}")

    def ack(self, space_id: str, device_id: str, req: AckRequest) -> AckResponse:
        acknowledged = list(dict.fromkeys(req.event_ids))
        with self.store.session(space_id) as s:
            s.ack(space_id, device_id, acknowledged, self._clock())
        return AckResponse(acknowledged=acknowledged)

    def pending(self, space_id: str) -> PendingResponse:
        with self.store.session(space_id) as s:
            statuses = s.forget_statuses(space_id)
        return PendingResponse(
            forgets=[
                ForgetStatus(
                    record_id=st.record_id,
                    forgotten_at=st.forgotten_at,
                    pending=[PendingDevice(device_id=d, device_name=n) for d, n in st.pending],
                )
                for st in statuses
            ]
        )

    def record_status(self, space_id: str, record_id: str) -> RecordState:
        with self.store.session(space_id) as s:
            row = s.record(space_id, record_id)
            version = None if row is None else s.version(space_id, record_id, row.current_version)
        if row is None:
            raise NotFound(f"record {record_id} does not exist in this space")
        if row.lifecycle == LifecycleState.FORGOTTEN.value:
            return RecordState(
                id=row.record_id,
                lifecycle_state=LifecycleState.FORGOTTEN,
                forgotten_at=row.forgotten_at,
            )
        return RecordState(
            id=row.record_id,
            lifecycle_state=LifecycleState(row.lifecycle),
            version=row.current_version,
            epistemic_state=None if version is None else EpistemicState(version.epistemic_state),
            recorded_at=None if version is None else version.recorded_at,
        )
