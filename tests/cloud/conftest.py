"""Fixtures for the cloud contract suite: both record stores, a fake clock, seeded
randomness, enrolled devices and op builders.

PostgreSQL databases come from ``postgres_database`` in ``tests/conftest.py``.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from nacl.public import PrivateKey, SealedBox

from cloud.config import CloudConfig
from cloud.service import CloudService
from protocol.messages import EnrollRequest, PullRequest, PushRequest, PushResponse

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
    """Builders for raw wire ops with unique ids."""

    def __init__(self) -> None:
        self._n = itertools.count(1)
        self.at = START.isoformat()

    def op_id(self) -> str:
        return f"op_{next(self._n):010d}"

    def episode(self, episode_id: str, text: str, conversation: str = "conv-1") -> dict[str, Any]:
        return {
            "kind": "add_episode",
            "op_id": self.op_id(),
            "episode_id": episode_id,
            "conversation_id": conversation,
            "text": text,
            "typed_at": self.at,
        }

    def remember(
        self, record_id: str, text: str, episodes: list[str], conversation: str = "conv-1"
    ) -> dict[str, Any]:
        return {
            "kind": "remember",
            "op_id": self.op_id(),
            "record_id": record_id,
            "text": text,
            "conversation_id": conversation,
            "source_episode_ids": episodes,
            "made_at": self.at,
        }

    def forget(self, record_id: str) -> dict[str, Any]:
        return {
            "kind": "forget_permanently",
            "op_id": self.op_id(),
            "record_id": record_id,
            "made_at": self.at,
        }


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
