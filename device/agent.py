"""DeviceAgent: the offline core's API for the simulator, the CLI and tests.

Invariants:
- Every local operation is decided by ``protocol.rules.decide`` on facts read from
  this device's store (never the caller's claim) and, when accepted, is applied and
  queued in ONE local transaction; a refusal raises ``Refused`` and changes nothing.
- Text lives in one place: sealed in its record version or episode; queued ops carry
  no text, recall words are derived and shredded with the record.
- Recall re-checks every index hit against the record's authoritative state.
- All network traffic goes through ``device.client.CloudClient`` (one transport seam);
  time and randomness come from the injected ``clock`` and ``random_bytes``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError

from device import keys, shred, store
from device.client import CloudClient
from device.db import DB_FILENAME, Database
from device.errors import (
    AlreadyEnrolled,
    InvalidOperation,
    NoCloud,
    NotEnrolled,
    Refused,
)
from device.migrations import migrate
from device.sync import SyncSession
from device.views import LocalResult, RecallHit, RecordView, SyncReport
from protocol.errors import SealError
from protocol.ids import make_id
from protocol.messages import EnrollRequest, EnrollResponse, EpisodeContent
from protocol.model import EpistemicState, LifecycleState, RecordContent
from protocol.operations import AddEpisode, ForgetPermanently, RefusalCode, Remember
from protocol.presentation import present
from protocol.recall import score, words
from protocol.rules import (
    Accept,
    CreateRecord,
    EpisodeFacts,
    Facts,
    RecordFacts,
    Refuse,
    decide,
)
from protocol.sentences import check_said

Clock = Callable[[], datetime]
RandomBytes = Callable[[int], bytes]

MAX_SOURCES = 64
FORGOTTEN = LifecycleState.FORGOTTEN.value


def _system_clock() -> datetime:
    return datetime.now(UTC)


def _invalid(kind: str, item_id: str, exc: ValidationError) -> InvalidOperation:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()
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
    ) -> None:
        self._db = db
        self._directory = directory
        self._transport = transport
        self._clock = clock or _system_clock
        self._random = random_bytes or secrets.token_bytes
        self._client: CloudClient | None = None

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
    ) -> DeviceAgent:
        """Create a new encrypted device database and key pair in ``directory``."""
        directory = Path(directory)
        if not device_name or len(device_name) > 64:
            raise InvalidOperation(
                f"device name {device_name!r} must be 1 to 64 characters; nothing was created"
            )
        db = Database.create(directory / DB_FILENAME, passphrase)
        agent = cls(db, directory, transport=transport, clock=clock, random_bytes=random_bytes)
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
            for suffix in ("", "-wal", "-shm"):
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
    ) -> DeviceAgent:
        """Open an existing device database (applying any pending migrations)."""
        directory = Path(directory)
        db = Database.open_existing(directory / DB_FILENAME, passphrase)
        agent = cls(db, directory, transport=transport, clock=clock, random_bytes=random_bytes)
        try:
            migrate(db, agent._now())
            store.get_meta(db)
        except BaseException:
            db.close()
            raise
        return agent

    def close(self) -> None:
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
            self._client = CloudClient(url, transport=self._transport)
        self._client.credential = store.get_meta(self._db).credential
        return self._client

    def _seal(self, kind: str, item_id: str, version: int, plain: bytes) -> keys.SealedItem:
        space = store.get_meta(self._db).binding_space
        return keys.seal_new(self._random, space, kind, item_id, version, plain)

    # --- enrollment ------------------------------------------------------------------

    def enroll(self, code: str, cloud_url: str | None = None) -> str:
        """Enroll this device with a one-time code; returns the device id."""
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
        client.credential = response.credential
        return response.device_id

    # --- local operations ------------------------------------------------------------

    def say(self, text: str, conversation_id: str) -> str:
        """Log what the user typed as an episode; queue ``add_episode``; return its id."""
        episode_id = self._id("ep")
        op_id = self._id("op")
        typed_at = self._now_dt()
        try:
            op = AddEpisode(
                op_id=op_id,
                episode_id=episode_id,
                conversation_id=conversation_id,
                text=text,
                typed_at=typed_at,
            )
            content = EpisodeContent(conversation_id=conversation_id, text=text)
        except ValidationError as exc:
            raise _invalid("episode", episode_id, exc) from exc
        decision = decide(op, Facts(episodes={}))
        if isinstance(decision, Refuse):
            raise Refused(decision.code.value, decision.reason)
        sealed = self._seal("episode", episode_id, 1, content.model_dump_json().encode())
        with self._db.atomic():
            store.put_key(self._db, sealed.key_id, sealed.dek, "local")
            store.insert_episode(
                self._db,
                episode_id=episode_id,
                conversation_id=conversation_id,
                typed_at=op.typed_at.isoformat(),
                bound_space=store.get_meta(self._db).binding_space,
                key_id=sealed.key_id,
                sealed=sealed.sealed,
                sync_state="pending",
            )
            store.enqueue(
                self._db,
                op_id=op_id,
                kind=op.kind,
                record_id=None,
                episode_id=episode_id,
                op_json=op.model_dump_json(exclude={"text"}),
                queued_at=self._now(),
            )
        return episode_id

    def _conversation_facts(self, conversation_id: str) -> dict[str, EpisodeFacts]:
        facts: dict[str, EpisodeFacts] = {}
        for row in store.conversation_episodes(self._db, conversation_id):
            try:
                content = store.open_episode(self._db, row)
            except (LookupError, SealError):
                continue
            facts[row["episode_id"]] = EpisodeFacts(
                row["episode_id"], content.conversation_id, content.text
            )
        return facts

    def remember(self, text: str, conversation_id: str) -> LocalResult:
        """Keep one whole sentence the user typed in this conversation as a said record."""
        record_id = self._id("rec")
        op_id = self._id("op")
        made_at = self._now_dt()
        episodes = self._conversation_facts(conversation_id)
        if not episodes:
            raise Refused(
                RefusalCode.NOT_SAID.value,
                f"record {record_id} refused: {text!r} is not a sentence the user typed; "
                f"this device holds nothing typed in conversation {conversation_id!r}",
            )
        sources = [e for e, f in episodes.items() if check_said(text, [f.text]).ok]
        if not sources:  # let decide name the reason (fragment, paraphrase, ...)
            sources = list(episodes)[-MAX_SOURCES:]
        sources = sources[:MAX_SOURCES]
        try:
            op = Remember(
                op_id=op_id,
                record_id=record_id,
                text=text,
                conversation_id=conversation_id,
                source_episode_ids=sources,
                made_at=made_at,
            )
            content = RecordContent(
                text=text, source_episode_ids=sources, conversation_id=conversation_id
            )
        except ValidationError as exc:
            raise _invalid("record", record_id, exc) from exc
        decision = decide(op, Facts(record=None, episodes={e: episodes[e] for e in sources}))
        if isinstance(decision, Refuse):
            raise Refused(decision.code.value, decision.reason)
        assert isinstance(decision, Accept) and isinstance(decision.effect, CreateRecord)
        effect = decision.effect
        sealed = self._seal("record", record_id, effect.version, content.model_dump_json().encode())
        with self._db.atomic():
            store.put_key(self._db, sealed.key_id, sealed.dek, "local")
            store.insert_record(
                self._db,
                record_id=record_id,
                lifecycle=effect.lifecycle_state.value,
                current_version=effect.version,
                sync_state="pending",
            )
            store.insert_version(
                self._db,
                record_id=record_id,
                version=effect.version,
                supersedes=None,
                epistemic_state=effect.epistemic_state.value,
                recorded_at=op.made_at.isoformat(),
                bound_space=store.get_meta(self._db).binding_space,
                key_id=sealed.key_id,
                sealed=sealed.sealed,
            )
            store.index_words(self._db, record_id, text)
            store.enqueue(
                self._db,
                op_id=op_id,
                kind=op.kind,
                record_id=record_id,
                episode_id=None,
                op_json=op.model_dump_json(exclude={"text"}),
                queued_at=self._now(),
            )
        return LocalResult(record_id=record_id, op_id=op_id)

    def forget_permanently(self, record_id: str) -> LocalResult:
        """Shred the record's keys and derived rows at once; queue ``forget_permanently``."""
        op_id = self._id("op")
        made_at = self._now_dt()
        try:
            op = ForgetPermanently(op_id=op_id, record_id=record_id, made_at=made_at)
        except ValidationError as exc:
            raise _invalid("forget of record", repr(record_id), exc) from exc
        row = store.record_row(self._db, record_id)
        facts = Facts(
            record=None
            if row is None
            else RecordFacts(
                record_id, LifecycleState(row["lifecycle"]), int(row["current_version"] or 0)
            )
        )
        decision = decide(op, facts)
        if isinstance(decision, Refuse):
            raise Refused(decision.code.value, decision.reason)
        forgotten_at = op.made_at.isoformat()
        with self._db.atomic():
            shred.shred_record(self._db, record_id, forgotten_at=forgotten_at, sync_state="pending")
            store.enqueue(
                self._db,
                op_id=op_id,
                kind=op.kind,
                record_id=record_id,
                episode_id=None,
                op_json=op.model_dump_json(),
                queued_at=self._now(),
            )
        self._db.checkpoint()
        return LocalResult(record_id=record_id, op_id=op_id, forgotten_at=forgotten_at)

    # --- reading ---------------------------------------------------------------------

    def _said_on(self, content: RecordContent, fallback: str) -> datetime:
        for episode_id in content.source_episode_ids:
            row = store.episode_row(self._db, episode_id)
            if row is not None:
                return datetime.fromisoformat(row["typed_at"])
        return datetime.fromisoformat(fallback)

    def recall(self, query: str, limit: int = 5) -> list[RecallHit]:
        """Word-match recall; every index hit is re-checked against the record's state."""
        hits: list[tuple[int, str, RecallHit]] = []
        for record_id in store.recall_candidates(self._db, words(query)):
            record = store.record_row(self._db, record_id)
            if (
                record is None
                or record["lifecycle"] != LifecycleState.ACTIVE.value
                or record["sync_state"] == "refused"
                or record["current_version"] is None
            ):
                continue
            version = store.version_row(self._db, record_id, int(record["current_version"]))
            if version is None:
                continue
            state = EpistemicState(version["epistemic_state"])
            if state is EpistemicState.INVALID:
                continue
            try:
                content = store.open_version(self._db, version)
            except (LookupError, SealError):
                continue
            points = score(query, content.text)
            if points == 0:
                continue
            line = present(content.text, state, self._said_on(content, version["recorded_at"]))
            hit = RecallHit(record_id, content.text, state.value, line, points)
            hits.append((-points, version["recorded_at"], hit))
        hits.sort(key=lambda item: (item[0], item[1], item[2].record_id))
        return [hit for _, _, hit in hits[: max(limit, 0)]]

    def list_records(self) -> list[RecordView]:
        views: list[RecordView] = []
        for record in self._db.all("SELECT * FROM records ORDER BY rowid"):
            if record["lifecycle"] == FORGOTTEN:
                views.append(
                    RecordView(
                        record_id=record["record_id"],
                        lifecycle=FORGOTTEN,
                        sync_state=record["sync_state"],
                        forgotten_at=record["forgotten_at"],
                    )
                )
                continue
            text = state = recorded_at = None
            version_no = record["current_version"]
            version = store.version_row(self._db, record["record_id"], int(version_no or 0))
            if version is not None:
                state, recorded_at = version["epistemic_state"], version["recorded_at"]
                try:
                    text = store.open_version(self._db, version).text
                except (LookupError, SealError):
                    text = None
            views.append(
                RecordView(
                    record_id=record["record_id"],
                    lifecycle=record["lifecycle"],
                    sync_state=record["sync_state"],
                    version=version_no,
                    text=text,
                    epistemic_state=state,
                    recorded_at=recorded_at,
                    refusal_reason=record["refusal_reason"],
                )
            )
        return views

    def pending_ops(self) -> int:
        return store.queue_count(self._db)

    def data_keys_for(self, record_id: str) -> list[bytes]:
        """Raw DEKs held for the record's versions and its source episodes."""
        key_ids: list[str] = []
        for version in store.versions_of(self._db, record_id):
            key_ids.append(version["key_id"])
            try:
                content = store.open_version(self._db, version)
            except (LookupError, SealError):
                continue
            for episode_id in content.source_episode_ids:
                row = store.episode_row(self._db, episode_id)
                if row is not None:
                    key_ids.append(row["key_id"])
        deks = [store.get_key(self._db, k) for k in dict.fromkeys(key_ids)]
        return [d for d in deks if d is not None]

    def data_key_ids(self) -> set[str]:
        return store.key_ids(self._db)

    # --- sync ------------------------------------------------------------------------

    def sync(self) -> SyncReport:
        """Acks left over, then push (pull first on 409), then pull and ack."""
        meta = store.get_meta(self._db)
        if meta.credential is None:
            raise NotEnrolled(
                f"device {meta.device_name!r} is not enrolled; enroll it with a code first"
            )
        return SyncSession(self._db, self._cloud(), self._now).run()

    def _debug_db(self) -> Any:
        """The raw connection, for tests that must poke the store directly."""
        return self._db
