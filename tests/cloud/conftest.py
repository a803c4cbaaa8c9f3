"""Fixtures for the cloud contract suite: both record stores, a fake clock, seeded
randomness, enrolled devices and op builders.

PostgreSQL databases come from ``postgres_database`` in ``tests/conftest.py``.
"""

from __future__ import annotations

import base64
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nacl.public import PrivateKey, SealedBox

from cloud.config import CloudConfig
from cloud.service import CloudService
from protocol.messages import (
    ArtifactChange,
    EnrollRequest,
    EpisodeChange,
    EpisodeContent,
    KeyDestruction,
    ProjectChange,
    PullRequest,
    PushRequest,
    PushResponse,
    RecordStateChange,
    RecordVersionChange,
    SubsetChange,
)
from protocol.model import ArtifactContent, RecordContent
from protocol.operations import ReceiptStatus
from protocol.sealing import binding, open_sealed

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
MASTER_KEY = bytes(range(32))
SENTENCE = "My favorite number is not 1729."
TYPED = f"{SENTENCE} I drink tea every morning."


class FakeClock:
    """A clock that moves only when told to."""

    def __init__(self, start: datetime = START) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store' / 'records.db'}"
    new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
    return new_database()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def rng() -> Callable[[int], bytes]:
    return random.Random(20260301).randbytes


@pytest.fixture
def config(
    store_url: str, tmp_path: Path, clock: FakeClock, rng: Callable[[int], bytes]
) -> CloudConfig:
    return CloudConfig(
        store_url=store_url,
        key_store_path=tmp_path / "keys" / "keys.db",
        clock=clock,
        random_bytes=rng,
        master_key=MASTER_KEY,
        indexing="manual",  # tests index when they say so (service.index_pending)
    )


@pytest.fixture
def service(config: CloudConfig) -> Iterator[CloudService]:
    svc = CloudService(config)
    try:
        yield svc
    finally:
        svc.close()


@dataclass
class Device:
    space_id: str
    device_id: str
    credential: str
    key: PrivateKey
    name: str

    def open_key(self, sealed_key: bytes) -> bytes:
        return SealedBox(self.key).decrypt(sealed_key)


def enroll(service: CloudService, code: str, name: str = "phone") -> Device:
    key = PrivateKey.generate()
    resp = service.enroll(
        EnrollRequest(code=code, device_name=name, public_key=bytes(key.public_key))
    )
    return Device(resp.space_id, resp.device_id, resp.credential, key, name)


def new_user(service: CloudService, user: str, *devices: str) -> list[Device]:
    """A user with one enrolled device per name."""
    space_id, code = service.add_user(user)
    out = [enroll(service, code, devices[0])]
    for name in devices[1:]:
        out.append(enroll(service, service.new_enrollment_code(space_id), name))
    return out


class Ops:
    """Builders for raw wire ops with unique ids (every op says who started it)."""

    def __init__(self) -> None:
        self._n = itertools.count(1)
        self.at = START.isoformat()

    def op_id(self) -> str:
        return f"op_{next(self._n):010d}"

    def _base(self, kind: str, by: str = "user") -> dict[str, Any]:
        return {"kind": kind, "op_id": self.op_id(), "made_at": self.at, "initiated_by": by}

    def episode(self, episode_id: str, text: str, conversation: str = "conv-1") -> dict[str, Any]:
        return {
            **self._base("add_episode"),
            "episode_id": episode_id,
            "conversation_id": conversation,
            "text": text,
            "typed_at": self.at,
        }

    def remember(
        self,
        record_id: str,
        text: str,
        episodes: list[str],
        conversation: str = "conv-1",
        **fields: Any,
    ) -> dict[str, Any]:
        return {
            **self._base("remember"),
            "record_id": record_id,
            "text": text,
            "conversation_id": conversation,
            "source_episode_ids": episodes,
            **fields,
        }

    def correct(
        self, record_id: str, text: str, episodes: list[str], conversation: str = "conv-1"
    ) -> dict[str, Any]:
        return {
            **self._base("correct"),
            "record_id": record_id,
            "text": text,
            "conversation_id": conversation,
            "source_episode_ids": episodes,
        }

    def simple(self, kind: str, record_id: str, by: str = "user", **fields: Any) -> dict[str, Any]:
        """dont_use, use_again, confirm, forget_permanently, restrict_usage, reaffirm."""
        return {**self._base(kind, by), "record_id": record_id, **fields}

    def forget(self, record_id: str, by: str = "user") -> dict[str, Any]:
        return self.simple("forget_permanently", record_id, by)

    def forget_area(self, area: str | None, proof: bytes, by: str = "user") -> dict[str, Any]:
        return {
            **self._base("forget_area", by),
            "area": area,
            "proof": base64.b64encode(proof).decode(),
        }

    def infer(self, record_id: str, by: str = "assistant", **content: Any) -> dict[str, Any]:
        body = {"epistemic_state": "inferred", "source_kind": "user_behaviour", **content}
        return {**self._base("infer", by), "record_id": record_id, "content": body}

    def artifact(
        self, artifact_id: str, derived_from: list[str], payload: str, kind: str = "summary"
    ) -> dict[str, Any]:
        return {
            **self._base("add_artifact", "assistant"),
            "artifact_id": artifact_id,
            "artifact_kind": kind,
            "derived_from": derived_from,
            "payload": payload,
        }

    def project(self, name: str, open: bool = True) -> dict[str, Any]:
        return {**self._base("set_project"), "project": name, "open": open}


@pytest.fixture
def ops() -> Ops:
    return Ops()


def push(service: CloudService, device: Device, *raw: dict[str, Any]) -> PushResponse:
    return service.push(device.space_id, device.device_id, PushRequest(ops=list(raw)))


def pull_all(service: CloudService, device: Device, cursor: str | None = None) -> list[Any]:
    changes: list[Any] = []
    while True:
        page = service.pull(device.space_id, device.device_id, PullRequest(cursor=cursor))
        changes.extend(page.changes)
        cursor = page.cursor
        if not page.has_more:
            return changes


def applied(response: PushResponse) -> PushResponse:
    """Assert every op of a push was applied (naming the first that was not)."""
    for receipt in response.receipts:
        assert receipt.status is ReceiptStatus.APPLIED, receipt
    return response


@dataclass
class Feed:
    """What one device learned from a full pull, opened with its private key."""

    versions: dict[tuple[str, int], RecordContent]
    states: dict[str, RecordStateChange]
    episodes: dict[str, EpisodeContent]
    artifacts: dict[str, tuple[list[str], ArtifactContent]]
    projects: dict[str, bool]
    destroyed: list[KeyDestruction]
    kinds: list[str]
    subset: list[SubsetChange] = field(default_factory=list)  # enters and leaves (protocol 3)


def feed(service: CloudService, device: Device) -> Feed:
    out = Feed({}, {}, {}, {}, {}, [], [])
    space = device.space_id
    for change in pull_all(service, device):
        out.kinds.append(change.kind)
        if isinstance(change, RecordVersionChange):
            plain = open_sealed(
                device.open_key(change.sealed_key),
                change.sealed_content,
                binding(space, "record", change.record_id, change.version),
            )
            out.versions[(change.record_id, change.version)] = RecordContent.model_validate_json(
                plain
            )
        elif isinstance(change, RecordStateChange):
            out.states[change.record_id] = change
        elif isinstance(change, EpisodeChange):
            plain = open_sealed(
                device.open_key(change.sealed_key),
                change.sealed_content,
                binding(space, "episode", change.episode_id, 1),
            )
            out.episodes[change.episode_id] = EpisodeContent.model_validate_json(plain)
        elif isinstance(change, ArtifactChange):
            plain = open_sealed(
                device.open_key(change.sealed_key),
                change.sealed_content,
                binding(space, "artifact", change.artifact_id, 1),
            )
            out.artifacts[change.artifact_id] = (
                change.derived_from,
                ArtifactContent.model_validate_json(plain),
            )
        elif isinstance(change, ProjectChange):
            out.projects[change.project] = change.open
        elif isinstance(change, SubsetChange):
            out.subset.append(change)
        else:
            assert isinstance(change, KeyDestruction)
            out.destroyed.append(change)
    return out


def key_store_bytes(path: Path) -> bytes:
    """The raw bytes of the key store file and its WAL/journal, for forensic scans."""
    data = b""
    for suffix in ("", "-wal", "-journal"):
        p = Path(str(path) + suffix)
        if p.exists():
            data += p.read_bytes()
    return data
