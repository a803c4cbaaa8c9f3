"""Fixtures for device tests: real SQLCipher files in tmp_path, a fixed clock, seeded
randomness, and a fake cloud at the transport seam."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from device.agent import DeviceAgent
from tests.device.fake_cloud import FakeCloud

MakeAgent = Callable[..., DeviceAgent]

PASSPHRASE = "correct horse 'battery' staple"
CLOUD_URL = "https://cloud.test"


class TickingClock:
    """Starts at a fixed instant and moves one second per reading."""

    def __init__(self, start: datetime = datetime(2026, 3, 1, 9, 30, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        current = self.now
        self.now += timedelta(seconds=1)
        return current


def seeded(seed: int) -> Callable[[int], bytes]:
    rng = random.Random(seed)
    return rng.randbytes


@pytest.fixture
def make_agent(tmp_path: Path) -> Iterator[Callable[..., DeviceAgent]]:
    agents: list[DeviceAgent] = []

    def make(
        name: str = "phone",
        seed: int = 1,
        cloud: FakeCloud | None = None,
        clock: TickingClock | None = None,
    ) -> DeviceAgent:
        agent = DeviceAgent.create(
            tmp_path / name,
            PASSPHRASE,
            device_name=name,
            cloud_url=CLOUD_URL if cloud else None,
            transport=cloud.transport if cloud else None,
            clock=clock or TickingClock(),
            random_bytes=seeded(seed),
        )
        agents.append(agent)
        return agent

    yield make
    for agent in agents:
        with contextlib.suppress(Exception):
            agent.close()


@pytest.fixture
def cloud() -> FakeCloud:
    return FakeCloud()


def reopen(agent: DeviceAgent, cloud: FakeCloud | None = None, seed: int = 99) -> DeviceAgent:
    return DeviceAgent.open(
        agent.directory,
        PASSPHRASE,
        transport=cloud.transport if cloud else None,
        clock=TickingClock(datetime(2026, 3, 5, 8, 0, tzinfo=UTC)),
        random_bytes=seeded(seed),
    )
