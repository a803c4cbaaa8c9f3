"""A fake cloud at the device's transport seam (``httpx.MockTransport``).

It applies ops with the reference ``protocol.ledger`` (so its receipts are the
protocol's by construction) and turns each op's effect on the ledger into pull
changes: a new episode, record version or artifact (each sealed under its own data
key, the key sealed to the pulling device), a ``record_state`` whenever a record's
state changed, a project change, and a ``key_destruction`` for each forgotten record
(with the keys, episodes and artifacts that went with it). Content whose key was
destroyed is never sent again. 409 ``pull_required`` while the device has
unacknowledged key destructions. ``POST /v1/account-key`` registers the account key.
When it refuses an op naming a record it holds, it emits that record's state, so a
device that applied the op locally converges. Faults: ``fail_before`` (the request
never reaches the server), ``fail_after`` (the server commits, the response is lost),
``refuse_next`` (the next op of a kind is refused), ``tamper_pull``.
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
from protocol.ledger import Ledger, LedgerRecord, step
from protocol.messages import (
    AccountKeyRequest,
    AccountKeyResponse,
    AckRequest,
    AckResponse,
    ArtifactChange,
    EnrollRequest,
    EnrollResponse,
    EpisodeChange,
    EpisodeContent,
    ErrorBody,
    ErrorCode,
    KeyDestruction,
    ProjectChange,
    PullRequest,
    PullResponse,
    PushRequest,
    PushResponse,
    RecordStateChange,
    RecordVersionChange,
    peek_version,
)
from protocol.model import ArtifactContent, ArtifactKind, Initiator, LifecycleState, RecordContent
from protocol.operations import (
    OPERATION_ADAPTER,
    AddArtifact,
    AnyOperation,
    ForgetPermanently,
    Receipt,
    ReceiptStatus,
    RefusalCode,
)
from protocol.sealing import binding, seal

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@dataclass
class FakeDevice:
    device_id: str
    name: str
    public_key: bytes


@dataclass
class Sealed:
    """One sealed item the cloud holds: its key id and data key (None once destroyed)."""

    key_id: str
    dek: bytes | None


@dataclass
class FakeEvent:
    event_id: int
    seq: int
    record_id: str
    key_ids: list[str]
    episode_ids: list[str]
    artifact_ids: list[str]
    pending: set[str] = field(default_factory=set)


class FakeCloud:
    def __init__(self, seed: int = 7) -> None:
        self._rng = random.Random(seed)
        self.space_id = make_id("sp", self._rand(16))
        self.ledger = Ledger(space_id=self.space_id)
        self.codes: set[str] = set()
        self.devices: dict[str, FakeDevice] = {}  # credential -> device
        self.keys: dict[tuple[str, str, int], Sealed] = {}  # (kind, id, version) -> key
        self.log: list[tuple[int, str, tuple[Any, ...]]] = []  # seq, kind, what
        self.artifact_kinds: dict[str, ArtifactKind] = {}
        self.events: list[FakeEvent] = []
        self.seq = 0
        self.applied_effects = 0
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.fail_before: list[str] = []  # paths; each entry fails one request
        self.fail_after: list[str] = []
        self.refuse_next: dict[str, tuple[RefusalCode, str]] = {}  # op kind -> refusal
        self.tamper_pull = False
        self.transport = httpx.MockTransport(self.handle)

    # --- views for tests ----------------------------------------------------------------

    @property
    def records(self) -> dict[str, LedgerRecord]:
        return self.ledger.records

    @property
    def episodes(self) -> dict[str, Any]:
        return self.ledger.episodes

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

    @staticmethod
    def _ok(model: Any) -> httpx.Response:
        return httpx.Response(200, content=model.model_dump_json())

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
            if path == "/v1/account-key":
                return self._account_key(AccountKeyRequest.model_validate(body))
        except ValidationError as exc:
            return self._error(400, ErrorCode.MALFORMED_REQUEST, str(exc))
        return self._error(404, ErrorCode.NOT_FOUND, f"no route {path}")

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
                device_id=device.device_id,
                space_id=self.space_id,
                credential=credential,
                account_key=self.ledger.account_key,
            )
        )

    def _account_key(self, request: AccountKeyRequest) -> httpx.Response:
        held = self.ledger.account_key
        if held is not None and held != request.account_key:
            return self._error(
                409, ErrorCode.ACCOUNT_KEY_MISMATCH, "a different account key is registered"
            )
        self.ledger.account_key = request.account_key
        return self._ok(AccountKeyResponse(account_key=request.account_key))

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
        if isinstance(op_id, str) and op_id in self.ledger.receipts:
            _, receipt = step(self.ledger, OPERATION_ADAPTER.validate_python(raw), index, NOW)
            return receipt
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
        refusal = self.refuse_next.pop(op.kind, None)
        if refusal is not None:
            receipt = Receipt(
                index=index,
                op_id=op.op_id,
                status=ReceiptStatus.REFUSED,
                code=refusal[0],
                reason=refusal[1],
                record_id=getattr(op, "record_id", None),
            )
            self.ledger.receipts[op.op_id] = receipt
            self._resend_state(op)
            return receipt
        before = self._snapshot()
        _, receipt = step(self.ledger, op, index, NOW)
        if receipt.status is ReceiptStatus.APPLIED:
            self.applied_effects += 1
            if isinstance(op, AddArtifact):
                self.artifact_kinds[op.artifact_id] = op.artifact_kind
            self._emit(before, op)
        else:
            self._resend_state(op)
        return receipt

    # --- turning ledger changes into pull changes -----------------------------------------

    def _snapshot(self) -> dict[str, Any]:
        return {
            "episodes": set(self.ledger.episodes),
            "records": {
                rid: (set(r.versions), self._state(r)) for rid, r in self.ledger.records.items()
            },
            "artifacts": set(self.ledger.artifacts),
            "projects": dict(self.ledger.projects),
        }

    @staticmethod
    def _state(r: LedgerRecord) -> tuple[Any, ...]:
        return (r.lifecycle, r.version, r.usage, r.superseded_by, tuple(sorted(r.conflicts)))

    def _new_key(self, kind: str, item_id: str, version: int) -> None:
        self.keys[(kind, item_id, version)] = Sealed(make_id("key", self._rand(16)), self._rand(32))

    def _log(self, kind: str, *what: Any) -> None:
        self.seq += 1
        self.log.append((self.seq, kind, what))

    def _resend_state(self, op: AnyOperation) -> None:
        record_id = getattr(op, "record_id", None)
        record = self.ledger.records.get(record_id) if record_id else None
        if record is not None and record.lifecycle is not LifecycleState.FORGOTTEN:
            self._log("record_state", record_id)

    def _emit(self, before: dict[str, Any], op: AnyOperation) -> None:
        ledger = self.ledger
        for episode_id in ledger.episodes:
            if episode_id not in before["episodes"]:
                self._new_key("episode", episode_id, 1)
                self._log("episode", episode_id)
        forgotten: list[str] = []
        for rid, record in ledger.records.items():
            old_versions, old_state = before["records"].get(rid, (set(), None))
            if record.lifecycle is LifecycleState.FORGOTTEN:
                if old_state is not None and old_state[0] is not LifecycleState.FORGOTTEN:
                    forgotten.append(rid)
                continue
            for version in sorted(set(record.versions) - old_versions):
                self._new_key("record", rid, version)
                self._log("record_version", rid, version)
            if self._state(record) != old_state:
                self._log("record_state", rid)
        for artifact_id in ledger.artifacts:
            if artifact_id not in before["artifacts"]:
                self._new_key("artifact", artifact_id, 1)
                self._log("artifact", artifact_id)
        for name, is_open in ledger.projects.items():
            if before["projects"].get(name) != is_open:
                self._log("project", name, is_open)
        gone_episodes = sorted(before["episodes"] - set(ledger.episodes))
        gone_artifacts = sorted(before["artifacts"] - set(ledger.artifacts))
        for n, rid in enumerate(forgotten):
            self._destroy(
                rid,
                gone_episodes if n == 0 else [],
                gone_artifacts if n == 0 else [],
            )

    def _destroy(self, record_id: str, episodes: list[str], artifacts: list[str]) -> FakeEvent:
        key_ids = []
        for (kind, item, _version), sealed in self.keys.items():
            mine = (kind == "record" and item == record_id) or (
                (kind, item) in {("episode", e) for e in episodes}
                or (kind, item) in {("artifact", a) for a in artifacts}
            )
            if mine and sealed.dek is not None:
                sealed.dek = None
                key_ids.append(sealed.key_id)
        self.seq += 1
        event = FakeEvent(
            event_id=len(self.events) + 1,
            seq=self.seq,
            record_id=record_id,
            key_ids=key_ids,
            episode_ids=episodes,
            artifact_ids=artifacts,
            pending={d.device_id for d in self.devices.values()},
        )
        self.events.append(event)
        return event

    # --- pull ------------------------------------------------------------------------

    def _sealed(
        self, box: SealedBox[Any], kind: str, item_id: str, version: int, plain: bytes
    ) -> tuple[str, bytes, bytes] | None:
        key = self.keys[(kind, item_id, version)]
        if key.dek is None:
            return None  # destroyed: the key-destruction event stands for it
        sealed = seal(
            key.dek, self._rand(24), plain, binding(self.space_id, kind, item_id, version)
        )
        if self.tamper_pull and kind == "record":
            sealed = sealed[:-1] + bytes([sealed[-1] ^ 1])
        return key.key_id, sealed, box.encrypt(key.dek)

    def _change(self, box: SealedBox[Any], seq: int, kind: str, what: tuple[Any, ...]) -> Any:
        ledger = self.ledger
        if kind == "episode":
            ep = ledger.episodes.get(what[0])
            if ep is None:
                return None
            plain = EpisodeContent(conversation_id=ep.conversation_id, text=ep.text)
            sealed = self._sealed(box, "episode", what[0], 1, plain.model_dump_json().encode())
            if sealed is None:
                return None
            assert ep.typed_at is not None
            return EpisodeChange(
                seq=seq,
                episode_id=what[0],
                typed_at=ep.typed_at,
                key_id=sealed[0],
                sealed_content=sealed[1],
                sealed_key=sealed[2],
            )
        if kind == "record_version":
            rid, version = what
            record = ledger.records[rid]
            content: RecordContent | None = record.versions.get(version)
            if content is None:
                return None
            sealed = self._sealed(box, "record", rid, version, content.model_dump_json().encode())
            if sealed is None:
                return None
            return RecordVersionChange(
                seq=seq,
                record_id=rid,
                version=version,
                supersedes=version - 1 if version > 1 else None,
                recorded_at=NOW,
                key_id=sealed[0],
                sealed_content=sealed[1],
                sealed_key=sealed[2],
            )
        if kind == "record_state":
            record = ledger.records[what[0]]
            if record.lifecycle is LifecycleState.FORGOTTEN:
                return None  # the key destruction says it
            return RecordStateChange(
                seq=seq,
                record_id=what[0],
                lifecycle_state=record.lifecycle,
                current_version=record.version,
                usage_restriction=record.usage,
                superseded_by_record=record.superseded_by,
                conflicts_with=sorted(record.conflicts),
                at=NOW,
            )
        if kind == "artifact":
            held = ledger.artifacts.get(what[0])
            if held is None:
                return None
            parents, payload = held
            body = ArtifactContent(kind=self.artifact_kinds[what[0]], payload=payload)
            sealed = self._sealed(box, "artifact", what[0], 1, body.model_dump_json().encode())
            if sealed is None:
                return None
            return ArtifactChange(
                seq=seq,
                artifact_id=what[0],
                derived_from=list(parents),
                created_at=NOW,
                key_id=sealed[0],
                sealed_content=sealed[1],
                sealed_key=sealed[2],
            )
        name, is_open = what
        return ProjectChange(seq=seq, project=name, open=is_open, at=NOW)

    def _changes(self, device: FakeDevice) -> list[Any]:
        box = SealedBox(PublicKey(device.public_key))
        out: list[Any] = []
        for seq, kind, what in self.log:
            change = self._change(box, seq, kind, what)
            if change is not None:
                out.append(change)
        for ev in self.events:
            out.append(
                KeyDestruction(
                    seq=ev.seq,
                    event_id=ev.event_id,
                    record_id=ev.record_id,
                    key_ids=ev.key_ids,
                    episode_ids=ev.episode_ids,
                    artifact_ids=ev.artifact_ids,
                    destroyed_at=NOW,
                )
            )
        return sorted(out, key=lambda c: c.seq)

    def _pull(self, device: FakeDevice, request: PullRequest) -> httpx.Response:
        if request.cursor is not None and not request.cursor.startswith("c"):
            return self._error(400, ErrorCode.MALFORMED_CURSOR, "not a cursor of this server")
        after = int(request.cursor[1:]) if request.cursor else 0
        changes = [c for c in self._changes(device) if c.seq > after]
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

    # --- helpers for tests ----------------------------------------------------------------

    def forget(self, record_id: str) -> None:
        """Forget a record directly on the cloud, as another device's push would."""
        op = ForgetPermanently(
            op_id=make_id("op", self._rand(16)),
            made_at=NOW,
            initiated_by=Initiator.USER,
            record_id=record_id,
        )
        before = self._snapshot()
        step(self.ledger, op, 0, NOW)
        self._emit(before, op)

    def pending_for(self, record_id: str) -> set[str]:
        return {d for ev in self.events if ev.record_id == record_id for d in ev.pending}

    def paths(self) -> list[str]:
        return [p for p, _ in self.requests]
