"""A fake cloud at the device's transport seam (``httpx.MockTransport``).

It answers per docs/protocol.md: enroll, push (one receipt per op, idempotent by
op id, ``protocol.rules.decide`` for the effect, 409 ``pull_required`` while the
device has unacknowledged key destructions), pull (server order, opaque cursor,
content sealed with the cloud's own DEKs, keys sealed to the device's public key),
and ack. Faults: ``fail_before`` (the request never reaches the server) and
``fail_after`` (the server commits, then the response is lost).
The real cloud is tested elsewhere; this only exercises the device side.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx
from nacl.public import PublicKey, SealedBox
from pydantic import ValidationError

from protocol.errors import UnsupportedProtocolVersion
from protocol.ids import make_id
from protocol.messages import (
    AckRequest,
    AckResponse,
    EnrollRequest,
    EnrollResponse,
    EpisodeChange,
    EpisodeContent,
    ErrorBody,
    ErrorCode,
    KeyDestruction,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecordVersionChange,
    peek_version,
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
from protocol.rules import Accept, EpisodeFacts, Facts, RecordFacts, decide
from protocol.sealing import binding, seal

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@dataclass
class FakeDevice:
    device_id: str
    name: str
    public_key: bytes


@dataclass
class FakeEpisode:
    conversation_id: str
    text: str
    typed_at: datetime
    key_id: str
    dek: bytes
    seq: int


@dataclass
class FakeRecord:
    text: str
    conversation_id: str
    sources: list[str]
    recorded_at: datetime
    key_id: str
    dek: bytes
    seq: int
    lifecycle: LifecycleState = LifecycleState.ACTIVE
    forgotten_at: datetime | None = None


@dataclass
class FakeEvent:
    event_id: int
    seq: int
    record_id: str
    key_ids: list[str]
    episode_ids: list[str]
    pending: set[str] = field(default_factory=set)


class FakeCloud:
    def __init__(self, seed: int = 7) -> None:
        self._rng = random.Random(seed)
        self.space_id = make_id("sp", self._rand(16))
        self.codes: set[str] = set()
        self.devices: dict[str, FakeDevice] = {}  # credential -> device
        self.episodes: dict[str, FakeEpisode] = {}
        self.records: dict[str, FakeRecord] = {}
        self.receipts: dict[str, Receipt] = {}
        self.events: list[FakeEvent] = []
        self.seq = 0
        self.applied_effects = 0
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.fail_before: list[str] = []  # paths; each entry fails one request
        self.fail_after: list[str] = []
        self.refuse_next: dict[str, tuple[RefusalCode, str]] = {}  # op kind -> refusal
        self.tamper_pull = False
        self.transport = httpx.MockTransport(self.handle)

    def _rand(self, n: int) -> bytes:
        return self._rng.randbytes(n)

    def new_code(self) -> str:
        code = "code-" + self._rand(8).hex()
        self.codes.add(code)
        return code

    # --- HTTP ------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body: dict[str, Any] = json.loads(request.content) if request.content else {}
        self.requests.append((path, body))
        if path in self.fail_before:
            self.fail_before.remove(path)
            raise httpx.ConnectError("fault: connection refused", request=request)
        response = self._route(path, body, request)
        if path in self.fail_after:
            self.fail_after.remove(path)
            raise httpx.ReadTimeout("fault: response lost after the server committed")
        return response

    @staticmethod
    def _error(status: int, code: ErrorCode, message: str) -> httpx.Response:
        return httpx.Response(
            status, content=ErrorBody(code=code, message=message).model_dump_json()
        )

    def _route(self, path: str, body: dict[str, Any], request: httpx.Request) -> httpx.Response:
        try:
            peek_version(body)
        except UnsupportedProtocolVersion as exc:
            return self._error(400, ErrorCode.UNSUPPORTED_PROTOCOL_VERSION, str(exc))
        if path == "/v1/enroll":
            return self._enroll(body)
        auth = request.headers.get("authorization", "")
        device = self.devices.get(auth.removeprefix("Bearer "))
        if device is None:
            return self._error(401, ErrorCode.UNAUTHORIZED, "missing or unknown credential")
        try:
            if path == "/v1/push":
                return self._push(device, PushRequest.model_validate(body))
            if path == "/v1/pull":
                return self._pull(device, PullRequest.model_validate(body))
            if path == "/v1/ack":
                return self._ack(device, AckRequest.model_validate(body))
        except ValidationError as exc:
            return self._error(400, ErrorCode.MALFORMED_REQUEST, str(exc))
        return self._error(404, ErrorCode.NOT_FOUND, f"no route {path}")

    @staticmethod
    def _ok(model: Any) -> httpx.Response:
        return httpx.Response(200, content=model.model_dump_json())

    def _enroll(self, body: dict[str, Any]) -> httpx.Response:
        request = EnrollRequest.model_validate(body)
        if request.code not in self.codes:
            return self._error(403, ErrorCode.ENROLLMENT_REFUSED, "enrollment code unknown")
        self.codes.discard(request.code)
        device = FakeDevice(make_id("dev", self._rand(16)), request.device_name, request.public_key)
        credential = "cred-" + self._rand(16).hex()
        self.devices[credential] = device
        return self._ok(
            EnrollResponse(
                device_id=device.device_id, space_id=self.space_id, credential=credential
            )
        )

    # --- push ------------------------------------------------------------------------

    def _push(self, device: FakeDevice, request: PushRequest) -> httpx.Response:
        if any(device.device_id in e.pending for e in self.events):
            return self._error(
                409, ErrorCode.PULL_REQUIRED, "acknowledge key destructions first (pull)"
            )
        receipts = [self._apply(i, raw) for i, raw in enumerate(request.ops)]
        return self._ok(PushResponse(receipts=receipts))

    def _apply(self, index: int, raw: dict[str, Any]) -> Receipt:
        op_id = raw.get("op_id")
        if isinstance(op_id, str) and op_id in self.receipts:
            first = self.receipts[op_id]
            return first.model_copy(
                update={
                    "index": index,
                    "status": ReceiptStatus.DUPLICATE,
                    "original_status": first.status,
                }
            )
        try:
            op = OPERATION_ADAPTER.validate_python(raw)
        except ValidationError as exc:
            return Receipt(
                index=index,
                op_id=None,
                status=ReceiptStatus.REFUSED,
                code=RefusalCode.MALFORMED,
                reason=str(exc)[:200],
            )
        record_id = getattr(op, "record_id", None)
        refusal = self.refuse_next.pop(op.kind, None)
        decision: Any = refusal if refusal is not None else decide(op, self._facts(op))
        if isinstance(decision, Accept):
            self._effect(op)
            receipt = Receipt(
                index=index,
                op_id=op.op_id,
                status=ReceiptStatus.APPLIED,
                record_id=record_id,
                applied_at=NOW,
            )
        else:
            code, reason = (
                decision if isinstance(decision, tuple) else (decision.code, decision.reason)
            )
            receipt = Receipt(
                index=index,
                op_id=op.op_id,
                status=ReceiptStatus.REFUSED,
                code=code,
                reason=reason,
                record_id=record_id,
            )
        self.receipts[op.op_id] = receipt
        return receipt

    def _facts(self, op: Any) -> Facts:
        episodes = {
            e: EpisodeFacts(e, ep.conversation_id, ep.text) for e, ep in self.episodes.items()
        }
        record = None
        rid = getattr(op, "record_id", None)
        if rid in self.records:
            r = self.records[rid]
            record = RecordFacts(rid, r.lifecycle, 1)
        return Facts(record=record, episodes=episodes)

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    def _effect(self, op: Any) -> None:
        self.applied_effects += 1
        if isinstance(op, AddEpisode):
            self.episodes[op.episode_id] = FakeEpisode(
                op.conversation_id,
                op.text,
                op.typed_at,
                make_id("key", self._rand(16)),
                self._rand(32),
                self._next_seq(),
            )
        elif isinstance(op, Remember):
            self.records[op.record_id] = FakeRecord(
                op.text,
                op.conversation_id,
                list(op.source_episode_ids),
                op.made_at,
                make_id("key", self._rand(16)),
                self._rand(32),
                self._next_seq(),
            )
        elif isinstance(op, ForgetPermanently):
            self.forget(op.record_id)

    def forget(self, record_id: str) -> FakeEvent:
        record = self.records[record_id]
        record.lifecycle = LifecycleState.FORGOTTEN
        record.forgotten_at = NOW
        gone = [e for e in record.sources if e in self.episodes]
        key_ids = [record.key_id] + [self.episodes[e].key_id for e in gone]
        for e in gone:
            del self.episodes[e]
        event = FakeEvent(
            event_id=len(self.events) + 1,
            seq=self._next_seq(),
            record_id=record_id,
            key_ids=key_ids,
            episode_ids=gone,
            pending={d.device_id for d in self.devices.values()},
        )
        self.events.append(event)
        return event

    # --- pull ------------------------------------------------------------------------

    def _changes(self, device: FakeDevice) -> list[tuple[int, Any]]:
        box = SealedBox(PublicKey(device.public_key))
        out: list[tuple[int, Any]] = []
        for eid, ep in self.episodes.items():
            content = EpisodeContent(conversation_id=ep.conversation_id, text=ep.text)
            sealed = seal(
                ep.dek,
                self._rand(24),
                content.model_dump_json().encode(),
                binding(self.space_id, "episode", eid, 1),
            )
            out.append(
                (
                    ep.seq,
                    EpisodeChange(
                        seq=ep.seq,
                        episode_id=eid,
                        typed_at=ep.typed_at,
                        key_id=ep.key_id,
                        sealed_content=sealed,
                        sealed_key=box.encrypt(ep.dek),
                    ),
                )
            )
        for rid, rec in self.records.items():
            if rec.lifecycle is LifecycleState.FORGOTTEN:
                continue
            record_content = RecordContent(
                text=rec.text,
                source_episode_ids=rec.sources,
                conversation_id=rec.conversation_id,
            )
            plain = record_content.model_dump_json().encode()
            sealed = seal(rec.dek, self._rand(24), plain, binding(self.space_id, "record", rid, 1))
            if self.tamper_pull:
                sealed = sealed[:-1] + bytes([sealed[-1] ^ 1])
            out.append(
                (
                    rec.seq,
                    RecordVersionChange(
                        seq=rec.seq,
                        record_id=rid,
                        version=1,
                        epistemic_state=EpistemicState.SAID,
                        lifecycle_state=rec.lifecycle,
                        recorded_at=rec.recorded_at,
                        key_id=rec.key_id,
                        sealed_content=sealed,
                        sealed_key=box.encrypt(rec.dek),
                    ),
                )
            )
        for ev in self.events:
            out.append(
                (
                    ev.seq,
                    KeyDestruction(
                        seq=ev.seq,
                        event_id=ev.event_id,
                        record_id=ev.record_id,
                        key_ids=ev.key_ids,
                        episode_ids=ev.episode_ids,
                        destroyed_at=NOW,
                    ),
                )
            )
        return sorted(out, key=lambda item: item[0])

    def _pull(self, device: FakeDevice, request: PullRequest) -> httpx.Response:
        if request.cursor is not None and not request.cursor.startswith("c"):
            return self._error(400, ErrorCode.MALFORMED_CURSOR, "not a cursor of this server")
        after = int(request.cursor[1:]) if request.cursor else 0
        changes = [c for seq, c in self._changes(device) if seq > after]
        page = changes[: request.limit]
        last = page[-1].seq if page else after
        return self._ok(
            PullResponse(changes=page, cursor=f"c{last}", has_more=len(changes) > len(page))
        )

    def _ack(self, device: FakeDevice, request: AckRequest) -> httpx.Response:
        done = []
        for ev in self.events:
            if ev.event_id in request.event_ids:
                ev.pending.discard(device.device_id)
                done.append(ev.event_id)
        return self._ok(AckResponse(acknowledged=done))

    def pending_for(self, record_id: str) -> set[str]:
        return {d for ev in self.events if ev.record_id == record_id for d in ev.pending}

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]
