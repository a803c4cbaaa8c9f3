"""The cloud's side of ``POST /v1/export`` at the device's transport seam
(``httpx.MockTransport``), built from the real protocol pieces: the package text from
``protocol.export.layout.write_package``, sealed with ``StreamSealer`` to the asking
device's public key, the proof checked with ``strongauth.verify_export`` against the
account key the fake cloud holds. Every other path goes to ``FakeCloud``.

Faults, for tests: ``FakeCloud.fail_before`` (the connection is refused), ``refuse``
(answer an ``ErrorBody`` instead), ``text_hook`` (alter the package text before it is
sealed, as a cloud that got it wrong), ``frames_hook`` (turn the list of frames into the
bytes actually sent: cut, tamper, break the connection),
``seal_for`` (seal for another export id or another key), ``error_after`` (an error
chunk instead of the final one), ``header_fields`` (another space, another id).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx
from nacl.public import PrivateKey, PublicKey, SealedBox

from protocol import strongauth
from protocol.export.layout import Item, write_package
from protocol.export.package import (
    ConnectedAccount,
    ExportedDevice,
    ExportedProject,
    ExportedRecord,
    ExportedVersion,
    PackageHeader,
    Section,
)
from protocol.export.stream import MEDIA_TYPE, StreamSealer
from protocol.messages import ErrorBody, ErrorCode, ExportRequest
from protocol.model import (
    ContentType,
    Episode,
    Layer,
    LifeArea,
    LifecycleState,
    RecordContent,
    Sensitivity,
    Skeleton,
)
from tests.device.fake_cloud import FakeCloud

T0 = datetime(2026, 2, 1, 8, 0, tzinfo=UTC)
T1 = datetime(2026, 2, 3, 8, 0, tzinfo=UTC)
EXPORTED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)

# words a Markdown view must never render as markup
HOSTILE = "I moved to *Lisbon* [now](https://evil.example) <b>bold</b> # and `code`."


def _record(
    record_id: str,
    texts: list[str],
    episode_id: str,
    *,
    sensitivity: Sensitivity = Sensitivity.NORMAL,
    layer: Layer = Layer.CONSOLIDATED_FACT,
    content_type: ContentType = ContentType.PERSONAL_FACT,
) -> ExportedRecord:
    versions = [
        ExportedVersion.of(
            version=n,
            supersedes=n - 1 if n > 1 else None,
            recorded_at=T0 if n == 1 else T1,
            content=RecordContent(
                text=text,
                source_episode_ids=[episode_id],
                sensitivity=sensitivity,
                layer=layer,
                content_type=content_type,
                life_areas=[
                    LifeArea.HEALTH if sensitivity is Sensitivity.HEALTH else LifeArea.HOME
                ],
            ),
        )
        for n, text in enumerate(texts, start=1)
    ]
    return ExportedRecord(
        id=record_id,
        lifecycle_state=LifecycleState.ACTIVE,
        created_at=T0,
        current_version=len(versions),
        versions=versions,
    )


def sample_items(include_sensitive: bool) -> list[Item]:
    """One item or more of every section (the sensitive ones only when asked)."""
    episode = Episode(
        id="ep_cloudepisode1", conversation_id="c0", text="I moved to Lisbon.", typed_at=T0
    )
    items = [
        Item(
            Section.RECORDS,
            _record("rec_cloudrecord1", ["I live in Duluth.", HOSTILE], episode.id),
        ),
        Item(
            Section.BEHAVIOUR_RULES,
            _record(
                "rec_cloudrule0001",
                ["Always answer in *short* sentences."],
                episode.id,
                layer=Layer.BEHAVIOUR_RULE,
                content_type=ContentType.PREFERENCE,
            ),
        ),
        Item(Section.SKELETONS, Skeleton(id="rec_cloudforgot01", forgotten_at=T1)),
        Item(Section.EPISODES, episode),
        Item(Section.PROJECTS, ExportedProject(name="garden", open=True, updated_at=T0)),
        Item(
            Section.CONNECTED_ACCOUNTS,
            ConnectedAccount(
                source_id="mail.example", first_episode_at=T0, latest_episode_at=T1, episodes=2
            ),
        ),
        Item(
            Section.DEVICES,
            ExportedDevice(device_id="dev_clouddevice1", name="phone", enrolled_at=T0),
        ),
    ]
    if include_sensitive:
        sensitive_episode = Episode(
            id="ep_cloudsensitive1", conversation_id="c0", text="I have asthma.", typed_at=T0
        )
        items += [
            Item(
                Section.SENSITIVE_RECORDS,
                _record(
                    "rec_cloudsensitive1",
                    ["I have asthma."],
                    sensitive_episode.id,
                    sensitivity=Sensitivity.HEALTH,
                ),
            ),
            Item(Section.SENSITIVE_EPISODES, sensitive_episode),
        ]
    return items


def package_text(header: PackageHeader, items: Iterable[Item]) -> bytes:
    return "".join(write_package(header, items)).encode("utf-8")


def sealed_frames(
    text: bytes,
    export_id: str,
    public_key: bytes,
    rng: random.Random,
    *,
    error_after: int | None = None,
    chunk: int = 1024,
) -> list[bytes]:
    """The frames of a sealed stream of ``text`` (small chunks, so a package has many).
    ``error_after``: that many data chunks, then an error chunk instead of the rest."""
    stream_key = rng.randbytes(32)
    sealer = StreamSealer(stream_key, rng.randbytes(16), export_id)
    frames = [sealer.header(SealedBox(PublicKey(public_key)).encrypt(stream_key))]
    pieces = [text[i : i + chunk] for i in range(0, len(text), chunk)] or [b""]
    for index, piece in enumerate(pieces[:-1]):
        if error_after is not None and index == error_after:
            frames.append(sealer.error("the record store stopped answering"))
            return frames
        frames.append(sealer.data(piece))
    if error_after is not None:
        frames.append(sealer.error("the record store stopped answering"))
        return frames
    frames.append(sealer.final(pieces[-1]))
    return frames


@dataclass
class Sent:
    request: ExportRequest
    header: PackageHeader
    items: list[Item]
    text: bytes


class ExportCloud:
    def __init__(self, cloud: FakeCloud, seed: int = 11) -> None:
        self.cloud = cloud
        self.rng = random.Random(seed)
        self.used: set[str] = set()
        self.sent: list[Sent] = []
        self.export_requests = 0
        self.refuse: tuple[int, ErrorCode, str] | None = None
        self.items: Callable[[bool], list[Item]] = sample_items
        self.header_fields: dict[str, Any] = {}
        self.seal_export_id: str | None = None
        self.seal_to: bytes | None = None
        self.error_after: int | None = None
        self.frames_hook: Callable[[list[bytes]], Iterable[bytes]] | None = None
        self.text_hook: Callable[[bytes], bytes] | None = None
        self.only_version_1 = False  # refuse a newer protocol version, naming (1, 1)
        self.versions_seen: list[int] = []
        cloud.transport = httpx.MockTransport(self.handle)

    @property
    def transport(self) -> httpx.MockTransport:
        return self.cloud.transport  # type: ignore[return-value]

    @staticmethod
    def _error(status: int, code: ErrorCode, message: str) -> httpx.Response:
        return httpx.Response(
            status, content=ErrorBody(code=code, message=message).model_dump_json()
        )

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path != "/v1/export":
            return self.cloud.handle(request)
        self.export_requests += 1
        if "/v1/export" in self.cloud.fail_before:
            self.cloud.fail_before.remove("/v1/export")
            raise httpx.ConnectError("fault: connection refused", request=request)
        auth = request.headers.get("authorization", "").removeprefix("Bearer ")
        device = self.cloud.devices.get(auth)
        if device is None:
            return self._error(401, ErrorCode.UNAUTHORIZED, "missing or unknown credential")
        raw = json.loads(request.content)
        self.versions_seen.append(raw["protocol_version"])
        if self.only_version_1 and raw["protocol_version"] != 1:
            refusal = ErrorBody(
                code=ErrorCode.UNSUPPORTED_PROTOCOL_VERSION,
                message=f"protocol version {raw['protocol_version']} is not supported",
                supported_versions=(1, 1),
            )
            return httpx.Response(400, content=refusal.model_dump_json())
        body = ExportRequest.model_validate(raw)
        if self.refuse is not None:
            return self._error(*self.refuse)
        space = self.cloud.space_id
        account_key = self.cloud.ledger.account_key
        if account_key is None:
            return self._error(
                403, ErrorCode.STRONG_AUTH_REQUIRED, f"space {space} has no account key"
            )
        if not strongauth.verify_export(
            account_key, body.proof, space, body.export_id, body.include_sensitive
        ):
            return self._error(
                403,
                ErrorCode.STRONG_AUTH_REQUIRED,
                f"export {body.export_id}: the proof does not verify with the account key",
            )
        if body.export_id in self.used:
            return self._error(
                409, ErrorCode.EXPORT_ID_USED, f"export {body.export_id} was already started"
            )
        self.used.add(body.export_id)
        header = PackageHeader(
            **{
                "export_id": body.export_id,
                "exported_at": EXPORTED_AT,
                "space_id": space,
                "includes_sensitive": body.include_sensitive,
                **self.header_fields,
            }
        )
        items = self.items(body.include_sensitive)
        text = package_text(header, items)
        if self.text_hook is not None:
            text = self.text_hook(text)
        self.sent.append(Sent(body, header, items, text))
        frames = sealed_frames(
            text,
            self.seal_export_id or body.export_id,
            self.seal_to or device.public_key,
            self.rng,
            error_after=self.error_after,
        )
        sent: Iterable[bytes] = frames if self.frames_hook is None else self.frames_hook(frames)
        return httpx.Response(200, headers={"content-type": MEDIA_TYPE}, content=iter(sent))


def another_public_key(seed: int = 5) -> bytes:
    return bytes(PrivateKey(random.Random(seed).randbytes(32)).public_key)


def broken_after(count: int) -> Callable[[list[bytes]], Iterator[bytes]]:
    """Send ``count`` frames, then lose the connection."""

    def hook(frames: list[bytes]) -> Iterator[bytes]:
        yield from frames[:count]
        raise httpx.ReadError("fault: connection reset by peer")

    return hook
