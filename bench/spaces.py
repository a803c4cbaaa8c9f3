"""Spaces of a given size, built fast but through the real paths, for the sync benches.

``fill_space`` applies ``n`` remembered sentences (an ``add_episode`` and a
``remember`` each, distinct subjects so none supersedes another) through
``CloudService.push`` in batches of 500 ops, exactly as a device's pushes would be
applied (decide, effects, sealing, receipts), minus HTTP. ``caught_up_device`` makes
a real ``DeviceAgent`` (its own SQLCipher file) in that space and syncs it over HTTP
until its cursor is at the end. The device speaks protocol 2 at most (``MIRROR``), so
it holds the whole space: issue 6's benches (pull cost, key destruction) measure the
feed and the shredding on every record, not a device subset (issue 9's bench,
``bench.subset``, measures that), with random unit vectors instead of the embedding
model (``bench.retrieval.fast_vectors``: the store holds the same rows either way).

Invariants: nothing here times anything it does not return; every push's receipts
are checked (a refused op is an error naming it, not a smaller space).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from nacl.public import PrivateKey

from bench.http_timing import RequestLog, TimingTransport
from bench.retrieval import WORDS, fast_vectors
from cloud.service import CloudService
from device.agent import DeviceAgent
from protocol.ids import make_id
from protocol.messages import EnrollRequest, PushRequest
from protocol.model import Initiator
from protocol.operations import AddEpisode, ForgetPermanently, ReceiptStatus, Remember
from protocol.version import VersionRange

AT = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)
BATCH = 500
PASSPHRASE = "bench passphrase"
MIRROR = (1, 2)  # a device speaking protocol 2 at most mirrors the whole space


class BuildFailed(RuntimeError):
    """An op of a bench build was not applied; the bench would measure a wrong space."""


def sentence(rng: random.Random, i: int) -> str:
    """A sentence whose first words are its own (``i`` is unique within a space)."""
    first, second = rng.sample(WORDS, 2)
    rest = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9)))
    return f"My {first} {i} {second} {rest}."


def _id(prefix: str, tag: int, i: int) -> str:
    return make_id(prefix, tag.to_bytes(2, "big") + i.to_bytes(8, "big"))


def memory_ops(tag: int, start: int, n: int, seed: int) -> list[dict[str, Any]]:
    """Wire ops for ``n`` remembered sentences, numbered from ``start`` (ids from ``tag``)."""
    rng = random.Random(seed * 1_000_003 + start)
    user = {"made_at": AT, "initiated_by": Initiator.USER}
    ops: list[dict[str, Any]] = []
    for i in range(start, start + n):
        episode = _id("ep", tag, i)
        text = sentence(rng, i)
        ops.append(
            AddEpisode(
                op_id=_id("op", tag, 2 * i),
                episode_id=episode,
                conversation_id=f"c{i}",
                text=text,
                typed_at=AT,
                **user,
            ).model_dump(mode="json")
        )
        ops.append(
            Remember(
                op_id=_id("op", tag, 2 * i + 1),
                record_id=_id("rec", tag, i),
                text=text,
                conversation_id=f"c{i}",
                source_episode_ids=[episode],
                **user,
            ).model_dump(mode="json")
        )
    return ops


def forget_ops(tag: int, record_numbers: range, op_base: int) -> list[dict[str, Any]]:
    """Wire ``forget_permanently`` ops for the records ``memory_ops`` numbered so."""
    return [
        ForgetPermanently(
            op_id=_id("op", tag, op_base + i),
            record_id=_id("rec", tag, i),
            made_at=AT,
            initiated_by=Initiator.USER,
        ).model_dump(mode="json")
        for i in record_numbers
    ]


def push_checked(
    service: CloudService, space_id: str, device_id: str, ops: list[dict[str, Any]]
) -> None:
    """Apply ``ops`` in batches of 500; raise ``BuildFailed`` naming any op not applied."""
    for start in range(0, len(ops), BATCH):
        response = service.push(space_id, device_id, PushRequest(ops=ops[start : start + BATCH]))
        for receipt in response.receipts:
            if receipt.status is not ReceiptStatus.APPLIED:
                raise BuildFailed(
                    f"op {receipt.op_id} in space {space_id} was {receipt.status.value}: "
                    f"{receipt.code} {receipt.reason}"
                )


@dataclass
class BuiltSpace:
    """A space, the id of the in-process "writer" device that filled it, and its size."""

    space_id: str
    writer_id: str
    tag: int
    records: int
    build_s: float


def fill_space(service: CloudService, name: str, n: int, tag: int) -> BuiltSpace:
    """A new space holding ``n`` remembered sentences, applied in batches of 500 ops."""
    space_id, _code = service.add_user(name)
    writer = headless_device(service, space_id, "writer")
    start = time.perf_counter()
    chunk = 5_000  # records per generated slice, so 100k ops never sit in memory at once
    for first in range(0, n, chunk):
        push_checked(service, space_id, writer, memory_ops(tag, first, min(chunk, n - first), tag))
        analyze(service)
    return BuiltSpace(space_id, writer, tag, n, time.perf_counter() - start)


def analyze(service: CloudService) -> None:
    """PostgreSQL: refresh the planner's statistics, as autovacuum would in production.

    The server here runs with autovacuum off. psycopg prepares a statement after five
    runs and PostgreSQL may then keep a generic plan chosen while the tables were nearly
    empty (a sequential scan) until an ANALYZE invalidates it; filling 100k records
    then slows down with every batch. SQLite: nothing to do."""
    if service.store.dialect == "postgresql":
        with service.store.engine.connect() as conn:
            conn.exec_driver_sql("ANALYZE")
            conn.commit()


def headless_device(service: CloudService, space_id: str, name: str) -> str:
    """Enroll a device that exists only as an id and a public key (it pushes in-process);
    the cloud counts it as holding what it pushes, never what it did not pull."""
    enrolled = service.enroll(
        EnrollRequest(
            code=service.new_enrollment_code(space_id),
            device_name=name,
            public_key=bytes(PrivateKey.generate().public_key),
        )
    )
    return enrolled.device_id


def caught_up_device(
    service: CloudService,
    space: BuiltSpace,
    folder: Path,
    cloud_url: str,
    transport: httpx.BaseTransport | None = None,
    *,
    protocol_versions: VersionRange | None = MIRROR,
    name: str = "reader",
) -> tuple[DeviceAgent, float]:
    """A real device enrolled in ``space`` whose cursor is at the end, holding every
    record (a protocol-2 mirror; ``protocol_versions=None``: every version, a default
    device's subset); and its sync time."""
    agent = DeviceAgent.create(
        folder,
        PASSPHRASE,
        device_name=name,
        cloud_url=cloud_url,
        transport=transport,
        protocol_versions=protocol_versions,
    )
    agent.enroll(service.new_enrollment_code(space.space_id))
    start = time.perf_counter()
    with fast_vectors():
        agent.sync()
    return agent, time.perf_counter() - start


def db_bytes(agent: DeviceAgent) -> tuple[int, int]:
    """The device database's size on disk: (the file, its WAL)."""
    path = agent.db_path
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size, wal.stat().st_size if wal.exists() else 0


@dataclass
class SpaceWithDevice:
    """A built space and a real device caught up in it, its requests timed in ``log``."""

    space: BuiltSpace
    agent: DeviceAgent
    log: RequestLog
    catch_up_s: float
    added: int = 0  # memories added after the build (numbered from ``space.records``)

    def add_memory(self, service: CloudService) -> None:
        """One more remembered sentence, applied as the writer device's push."""
        ops = memory_ops(self.space.tag, self.space.records + self.added, 1, self.space.tag)
        push_checked(service, self.space.space_id, self.space.writer_id, ops)
        self.added += 1


def prepare(
    service: CloudService, cloud_url: str, folder: Path, name: str, n: int, tag: int
) -> SpaceWithDevice:
    """``fill_space`` then ``caught_up_device`` (its transport timed)."""
    space = fill_space(service, name, n, tag)
    log = RequestLog()
    agent, catch_up_s = caught_up_device(
        service, space, folder / name, cloud_url, TimingTransport(log)
    )
    return SpaceWithDevice(space, agent, log, catch_up_s)
