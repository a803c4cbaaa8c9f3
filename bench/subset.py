"""The device subset (issue 9): what a device holds of a big space, what a smaller
policy costs it, and what a device that was offline pulls.

``measure(folder, smoke)`` runs three parts, each on a SQLite cloud served over
loopback HTTP (``RunningCloud``) whose clock is injected, so records can be learned
over two years while the bench runs in minutes. Spaces are filled through
``CloudService.push`` (an episode and a ``remember`` per record, checked receipts,
``bench.spaces.push_checked``) with a mix of content: mostly personal facts, and
preferences, routines, constraints, relationships, records of the relationships area,
events (``valid_from`` from weeks before to weeks after they were said), "for now"
records (``valid_until`` one week to four months on), goals and opinions. Devices are
real ``DeviceAgent`` s (SQLCipher files) embedding with random unit vectors
(``bench.retrieval.fast_vectors``); every request they send passes a counting
transport (response bytes are the bodies' bytes: the cloud does not compress) that
waits up to 15 minutes for an answer where a device gives up after 10 s
(``device.client.DEFAULT_TIMEOUT``): each sync reports its slowest request and how
many took longer than a device would have waited (``over_device_timeout``).

1. **A 100k space under the default policy.** A protocol-3 device syncs from scratch:
   records it holds (read from its database: live records with versions), its
   database file and WAL, then the file once checkpointed, the pull requests and
   their response bytes, the sync time, and what the cloud chose (``agent.subset()``:
   records, policy bytes, per reason, left out). Before it, the serving cloud reads
   the space's facts once, timed apart (``warm_facts``): a cloud process's first
   choice in a space opens every live record, and a device's first pull would wait
   for it (its HTTP timeout is 10 s).
   Side by side, a protocol-2 device (``protocol_versions=(1, 2)``) mirrors the same
   space, and the whole space's policy bytes (sealed content of every version plus a
   vector per record) are summed from the cloud store.
2. **A subset change that removes 10k records.** A device holds a space of 12k records
   learned in the last ten days (policy budget 20k: it holds all); its policy budget
   becomes 2k records, and the ``sync()`` that evicts the other 10k is timed next to
   the catch-up sync that brought the 12k in (the database is checkpointed between
   the two, so the eviction does not fold the catch-up's WAL). The bench reads the
   device's database after: exactly the kept records are live, and no row of any
   evicted record or its episode remains; a sample of the evicted records is still
   live in the cloud.
3. **A device offline while 1,000 records changed.** On the 100k space of part 1, a
   day passes on the cloud's clock while another device corrects 750 random existing
   records (a new episode and a ``correct`` each) and remembers 250 new ones; then the
   subset device and the mirror catch up, and a new protocol-3 device pulls from
   scratch. Reported: changes pulled, requests, response bytes and sync time of each,
   the subset's enters and leaves. The bench checks that the caught-up device holds
   exactly what the new device holds (the same policy at the same time chooses the
   same subset), that every corrected record it holds is at its new version, and that
   the mirror holds every live record.

Smoke sizes (200 / 120 keeping 20 / 100 changed) run the same code for breakage only.

Invariants: nothing here asserts a timing or a size; a wrong result (a record the
policy did not choose on the device, an evicted record still in its database, a
device that did not converge) is an error naming what is wrong, never a figure.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from rich.table import Table

from bench.retrieval import fast_vectors
from bench.spaces import MIRROR, PASSPHRASE, db_bytes, headless_device, push_checked, sentence
from cloud.service import CloudService
from cloud.subset import VECTOR_BYTES
from device.agent import DeviceAgent
from device.client import DEFAULT_TIMEOUT
from device.errors import Offline, ServerError
from device.views import SyncReport
from protocol.ids import make_id
from protocol.model import ContentType, Initiator, Layer, LifeArea, TimeKind
from protocol.operations import AddEpisode, Correct, Remember
from protocol.subset import SubsetBudget, SubsetPolicy
from simulator.cloud_runner import RunningCloud

MB = 1e6
# how long a bench device waits for an answer: longer than a device's own timeout
# (``device.client.DEFAULT_TIMEOUT``), so a slow cloud still gives figures; every request
# that took longer than the device's own timeout is counted (``over_device_timeout``)
BENCH_TIMEOUT = 900.0
SPAN = timedelta(days=730)  # records of a space are learned over two years
MAX_STEP_RECORDS = 250  # records per push (500 ops, one batch of push_checked)
MIN_STEPS = 40  # at least this many clock steps per build, so a small space spreads too
OP_BASE = 1 << 40  # op and episode numbers of the offline changes start here


@dataclass(frozen=True)
class Sizes:
    space: int  # records in the space of parts 1 and 3
    evict_space: int  # records on the device of part 2
    evict_keep: int  # its budget after the change
    corrected: int  # part 3: existing records corrected while the device was offline
    added: int  # part 3: records remembered while it was offline
    evict_sample: int  # evicted records checked to be live in the cloud still


FULL = Sizes(100_000, 12_000, 2_000, 750, 250, 50)
SMOKE = Sizes(200, 120, 20, 75, 25, 10)


class SubsetBenchBroken(RuntimeError):
    """A device does not hold what its subset says, or an eviction left a trace."""


# --- plumbing: the cloud's clock, counting requests ----------------------------------


class BenchClock:
    """The cloud's injected clock: it says what the bench sets."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@dataclass
class Wire:
    """Requests a device sent since the last ``reset``: count and bytes each way."""

    requests: int = 0
    pulls: int = 0
    sent: int = 0
    received: int = 0
    pull_received: int = 0
    slowest_s: float = 0.0  # the slowest request, answer read whole
    over_timeout: int = 0  # requests a device with its own timeout would have given up on

    def reset(self) -> None:
        self.requests = self.pulls = self.sent = self.received = self.pull_received = 0
        self.slowest_s = 0.0
        self.over_timeout = 0

    def add(self, path: str, sent: int, received: int, seconds: float) -> None:
        self.requests += 1
        self.slowest_s = max(self.slowest_s, seconds)
        self.over_timeout += seconds > DEFAULT_TIMEOUT
        self.sent += sent
        self.received += received
        if path == "/v1/pull":
            self.pulls += 1
            self.pull_received += received


class CountingTransport(httpx.BaseTransport):
    """A real transport that counts every request's and answer's body bytes, and waits
    up to ``BENCH_TIMEOUT`` for an answer instead of the device's own timeout."""

    def __init__(self, wire: Wire, inner: httpx.BaseTransport | None = None) -> None:
        self.wire = wire
        self.inner = inner or httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        timeouts = dict(request.extensions.get("timeout") or {})
        timeouts.update(read=BENCH_TIMEOUT, write=BENCH_TIMEOUT, pool=BENCH_TIMEOUT)
        request.extensions["timeout"] = timeouts
        sent = len(request.read())
        start = time.perf_counter()
        response = self.inner.handle_request(request)
        received = len(response.read())
        self.wire.add(request.url.path, sent, received, time.perf_counter() - start)
        return response

    def close(self) -> None:
        self.inner.close()


# --- building spaces with a mix of content over time ---------------------------------


def _ident(prefix: str, tag: int, i: int) -> str:
    return make_id(prefix, tag.to_bytes(2, "big") + i.to_bytes(8, "big"))


_PLAIN_AREAS = (
    LifeArea.WORK,
    LifeArea.HOME,
    LifeArea.HEALTH,
    LifeArea.LEISURE,
    LifeArea.TRAVEL,
    LifeArea.GENERAL,
)


def _shape(rng: random.Random, at: datetime) -> dict[str, Any]:
    """The content fields of one record said at ``at``: mostly personal facts."""
    r = rng.random()
    if r < 0.010:
        return {"content_type": ContentType.PREFERENCE}
    if r < 0.013:
        return {"content_type": ContentType.ROUTINE}
    if r < 0.015:
        return {"content_type": ContentType.CONSTRAINT}
    if r < 0.025:
        return {"content_type": ContentType.RELATIONSHIP, "life_areas": [LifeArea.RELATIONSHIPS]}
    if r < 0.030:
        return {"life_areas": [LifeArea.RELATIONSHIPS]}
    if r < 0.060:
        return {
            "content_type": ContentType.EVENT,
            "layer": Layer.EVENT,
            "time_kind": TimeKind.ONE_OFF,
            "valid_from": at + timedelta(days=rng.uniform(-20, 40)),
        }
    if r < 0.070:
        return {
            "time_kind": TimeKind.FOR_NOW,
            "valid_until": at + timedelta(days=rng.uniform(7, 120)),
        }
    if r < 0.080:
        return {"content_type": rng.choice((ContentType.GOAL, ContentType.OPINION))}
    return {"life_areas": [rng.choice(_PLAIN_AREAS)]}


def _by_user(at: datetime) -> dict[str, Any]:
    return {"made_at": at, "initiated_by": Initiator.USER}


def _said(op_id: str, episode: str, conversation: str, text: str, at: datetime) -> dict[str, Any]:
    """The user's words, as the episode a record is made from."""
    return AddEpisode(
        op_id=op_id,
        episode_id=episode,
        conversation_id=conversation,
        text=text,
        typed_at=at,
        **_by_user(at),
    ).model_dump(mode="json")


def _memory(
    tag: int, i: int, op_number: int, text: str, at: datetime, shape: dict[str, Any]
) -> list[dict[str, Any]]:
    """An episode and the record ``remember`` makes of it."""
    episode = _ident("ep", tag, i)
    return [
        _said(_ident("op", tag, op_number), episode, f"c{i}", text, at),
        Remember(
            op_id=_ident("op", tag, op_number + 1),
            record_id=_ident("rec", tag, i),
            text=text,
            conversation_id=f"c{i}",
            source_episode_ids=[episode],
            **_by_user(at),
            **shape,
        ).model_dump(mode="json"),
    ]


def _correction(tag: int, j: int, record: int, text: str, at: datetime) -> list[dict[str, Any]]:
    """A new episode and a ``correct`` of record number ``record`` in its words."""
    episode = _ident("ep", tag, OP_BASE + j)
    return [
        _said(_ident("op", tag, OP_BASE + 2 * j), episode, f"fix{j}", text, at),
        Correct(
            op_id=_ident("op", tag, OP_BASE + 2 * j + 1),
            record_id=_ident("rec", tag, record),
            text=text,
            conversation_id=f"fix{j}",
            source_episode_ids=[episode],
            **_by_user(at),
        ).model_dump(mode="json"),
    ]


@dataclass
class Space:
    space_id: str
    writer_id: str
    tag: int
    records: int
    build_s: float
    rng: random.Random = field(repr=False)

    def record_id(self, i: int) -> str:
        return _ident("rec", self.tag, i)

    def episode_id(self, i: int) -> str:
        return _ident("ep", self.tag, i)


def _steps(n: int) -> tuple[int, int]:
    """(records per push, pushes) so that ``n`` records spread over enough clock steps."""
    per = max(1, min(MAX_STEP_RECORDS, n // MIN_STEPS))
    return per, math.ceil(n / per)


def build(
    service: CloudService, clock: BenchClock, name: str, tag: int, n: int, start: datetime
) -> Space:
    """A new space of ``n`` records of mixed content, learned from ``start`` to the
    clock's time now (which the clock shows again at the end)."""
    end = clock.at
    clock.at = start
    space_id, _code = service.add_user(name)
    writer = headless_device(service, space_id, "writer")
    rng = random.Random(tag)
    per, steps = _steps(n)
    began = time.perf_counter()
    for step in range(steps):
        clock.at = start + (end - start) * (step + 1) / steps
        ops: list[dict[str, Any]] = []
        for i in range(step * per, min(n, (step + 1) * per)):
            ops += _memory(tag, i, 2 * i, sentence(rng, i), clock.at, _shape(rng, clock.at))
        push_checked(service, space_id, writer, ops)
    clock.at = end
    return Space(space_id, writer, tag, n, time.perf_counter() - began, rng)


# --- devices -------------------------------------------------------------------------


@dataclass
class Device:
    name: str
    agent: DeviceAgent
    wire: Wire


def enroll(
    service: CloudService,
    cloud: RunningCloud,
    space: Space,
    folder: Path,
    name: str,
    versions: tuple[int, int] | None = None,
) -> Device:
    wire = Wire()
    agent = DeviceAgent.create(
        folder / name,
        PASSPHRASE,
        device_name=name,
        cloud_url=cloud.url,
        transport=CountingTransport(wire),
        protocol_versions=versions,
    )
    agent.enroll(service.new_enrollment_code(space.space_id))
    return Device(name, agent, wire)


def timed_sync(device: Device) -> tuple[SyncReport, float]:
    device.wire.reset()
    start = time.perf_counter()
    try:
        with fast_vectors():
            report = device.agent.sync()
    except (Offline, ServerError) as exc:
        wire = device.wire
        raise SubsetBenchBroken(
            f"the {device.name}'s sync failed after {time.perf_counter() - start:.1f} s "
            f"and {wire.requests} answered requests (the slowest {wire.slowest_s:.1f} s): "
            f"{exc}"
        ) from exc
    seconds = time.perf_counter() - start
    if report.refused:
        raise SubsetBenchBroken(f"a sync had refused ops: {report.refused[:3]}")
    return report, seconds


def held(agent: DeviceAgent) -> set[str]:
    """The records whose content this device holds, read from its database."""
    rows = agent._debug_db().all(
        "SELECT DISTINCT r.record_id FROM records r JOIN record_versions v "
        "ON v.record_id = r.record_id WHERE r.lifecycle != 'permanently_forgotten'"
    )
    return {row[0] for row in rows}


def _db_mb(agent: DeviceAgent) -> dict[str, float]:
    """The database on disk as the sync left it (file, WAL), then checkpointed: the
    device lets its WAL grow to ~40 MB (``device.db.WAL_AUTOCHECKPOINT``), which would
    hide what a small subset takes."""
    file, wal = db_bytes(agent)
    agent._debug_db().checkpoint()
    folded, _ = db_bytes(agent)
    return {
        "db_file_mb": file / MB,
        "db_wal_mb": wal / MB,
        "db_mb": (file + wal) / MB,
        "db_checkpointed_mb": folded / MB,
    }


def _sync_figures(device: Device, report: SyncReport, seconds: float) -> dict[str, Any]:
    wire = device.wire
    return {
        "sync_s": seconds,
        "changes_pulled": report.pulled,
        "requests": wire.requests,
        "pulls": wire.pulls,
        "response_mb": wire.received / MB,
        "pull_response_mb": wire.pull_received / MB,
        "request_mb": wire.sent / MB,
        "slowest_request_s": wire.slowest_s,
        "over_device_timeout": wire.over_timeout,
        "entered": len(report.entered),
        "left": len(report.left),
    }


def _in_chunks(values: list[str], size: int = 500) -> Iterable[list[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _traces(agent: DeviceAgent, record_ids: list[str], episode_ids: list[str]) -> dict[str, int]:
    """Rows of the device's database that still name any of these records or episodes."""
    db = agent._debug_db()
    tables = (
        "records",
        "record_versions",
        "record_search",
        "record_vectors",
        "subject_index",
        "record_events",
        "subset_entries",
        "record_uses",
        "deferred_evictions",
    )
    out = dict.fromkeys((*tables, "episodes"), 0)
    for chunk in _in_chunks(record_ids):
        marks = ",".join("?" for _ in chunk)
        for table in tables:
            row = db.one(f"SELECT count(*) FROM {table} WHERE record_id IN ({marks})", chunk)
            out[table] += row[0]
    for chunk in _in_chunks(episode_ids):
        marks = ",".join("?" for _ in chunk)
        row = db.one(f"SELECT count(*) FROM episodes WHERE episode_id IN ({marks})", chunk)
        out["episodes"] += row[0]
    return {table: n for table, n in out.items() if n}


def _whole_space(service: CloudService, space_id: str) -> dict[str, float]:
    """The whole space in the policy's measure: sealed content of every version of every
    live record, plus a vector each (what a mirror would hold of it)."""
    with service.store.engine.connect() as conn:
        sealed = conn.exec_driver_sql(
            "SELECT coalesce(sum(length(v.sealed_content)), 0) FROM record_versions v "
            "JOIN records r ON r.space_id = v.space_id AND r.record_id = v.record_id "
            "WHERE v.space_id = ? AND r.lifecycle != 'permanently_forgotten'",
            (space_id,),
        ).scalar_one()
        live = conn.exec_driver_sql(
            "SELECT count(*) FROM records WHERE space_id = ? "
            "AND lifecycle != 'permanently_forgotten'",
            (space_id,),
        ).scalar_one()
    return {"records": int(live), "policy_mb": (int(sealed) + int(live) * VECTOR_BYTES) / MB}


def warm_facts(cloud: RunningCloud, space: Space) -> float:
    """Seconds the serving cloud takes to read the space's facts the first time (what a
    first choice in a cloud process waits for); after it, its cache is warm."""
    server = cloud._server
    if server is None:
        raise SubsetBenchBroken("the bench cloud is not serving")
    app: Any = server.config.app  # the FastAPI app ``create_app`` made
    service: CloudService = app.state.service
    start = time.perf_counter()
    with service.store.session(space.space_id) as s:
        service.subsets.facts.refresh(s, space.space_id)
    return time.perf_counter() - start


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


# --- part 1 and 3: the big space -----------------------------------------------------


def _subset_of_space(
    cloud: RunningCloud, clock: BenchClock, folder: Path, sizes: Sizes
) -> dict[str, Any]:
    service = cloud.operator
    now = clock.at
    offline_start = now - timedelta(days=1)
    clock.at = offline_start
    space = build(service, clock, "subset-space", 1, sizes.space, offline_start - SPAN)
    cold_facts_s = warm_facts(cloud, space)

    # part 1: a protocol-3 device from scratch, and a protocol-2 mirror
    phone = enroll(service, cloud, space, folder, "phone")
    report, seconds = timed_sync(phone)
    subset_sync = _sync_figures(phone, report, seconds)
    view = phone.agent.subset()
    phone_holds = held(phone.agent)
    if len(phone_holds) != view.records or view.records > view.policy.budget.max_records:
        raise SubsetBenchBroken(
            f"the phone holds {len(phone_holds)} records; the cloud chose {view.records} "
            f"within a budget of {view.policy.budget.max_records}"
        )
    subset_sync.update(_db_mb(phone.agent))
    subset_sync.update(
        records=len(phone_holds),
        chosen=view.records,
        policy_mb=view.size_bytes / MB,
        left_out=view.left_out,
        by_reason={e.reason.value: e.records for e in view.by_reason},
    )
    mirror = enroll(service, cloud, space, folder, "mirror", MIRROR)
    report, seconds = timed_sync(mirror)
    mirror_sync = _sync_figures(mirror, report, seconds)
    mirror_holds = held(mirror.agent)
    if len(mirror_holds) != sizes.space:
        raise SubsetBenchBroken(
            f"the protocol-2 mirror holds {len(mirror_holds)} of {sizes.space} records"
        )
    mirror_sync.update(_db_mb(mirror.agent), records=len(mirror_holds))
    whole = _whole_space(service, space.space_id)
    part1 = {
        "records": sizes.space,
        "build_s": space.build_s,
        "cold_facts_s": cold_facts_s,
        "subset": subset_sync,
        "mirror": mirror_sync,
        "whole_space_policy_mb": whole["policy_mb"],
        "ratio_records": _ratio(subset_sync["records"], mirror_sync["records"]),
        "ratio_db_mb": _ratio(subset_sync["db_mb"], mirror_sync["db_mb"]),
        "ratio_db_checkpointed_mb": _ratio(
            subset_sync["db_checkpointed_mb"], mirror_sync["db_checkpointed_mb"]
        ),
        "ratio_response_mb": _ratio(subset_sync["response_mb"], mirror_sync["response_mb"]),
        "ratio_sync_s": _ratio(subset_sync["sync_s"], mirror_sync["sync_s"]),
        "ratio_policy_mb": _ratio(subset_sync["policy_mb"], whole["policy_mb"]),
    }

    # part 3: a day offline while another device corrects and adds records
    numbers = space.rng.sample(range(sizes.space), sizes.corrected)
    corrected = {space.record_id(i) for i in numbers}
    held_before = len(corrected & phone_holds)
    changes = sizes.corrected + sizes.added
    per, steps = _steps(changes)
    jobs: list[tuple[str, int]] = [("correct", i) for i in numbers]
    jobs += [("add", sizes.space + k) for k in range(sizes.added)]
    space.rng.shuffle(jobs)
    began = time.perf_counter()
    for step in range(steps):
        clock.at = offline_start + (now - offline_start) * (step + 1) / steps
        ops: list[dict[str, Any]] = []
        for j, (kind, i) in enumerate(jobs[step * per : (step + 1) * per], start=step * per):
            text = sentence(space.rng, i)
            if kind == "correct":
                ops += _correction(space.tag, j, i, text, clock.at)
            else:
                ops += _memory(space.tag, i, 2 * i, text, clock.at, _shape(space.rng, clock.at))
        push_checked(service, space.space_id, space.writer_id, ops)
    changes_s = time.perf_counter() - began
    clock.at = now

    report, seconds = timed_sync(phone)
    back = _sync_figures(phone, report, seconds)
    report, seconds = timed_sync(mirror)
    mirror_back = _sync_figures(mirror, report, seconds)
    fresh = enroll(service, cloud, space, folder, "new-phone")
    report, seconds = timed_sync(fresh)
    fresh_pull = _sync_figures(fresh, report, seconds)
    phone_holds, fresh_holds = held(phone.agent), held(fresh.agent)
    if phone_holds != fresh_holds:
        raise SubsetBenchBroken(
            f"after its catch-up the phone holds {len(phone_holds)} records and a new "
            f"device with the same policy {len(fresh_holds)}; "
            f"{len(phone_holds - fresh_holds)} only on the phone, "
            f"{len(fresh_holds - phone_holds)} only on the new device"
        )
    stale = _stale_corrections(phone.agent, sorted(corrected & phone_holds))
    if stale:
        raise SubsetBenchBroken(
            f"the phone holds {len(stale)} corrected records without their correction, "
            f"e.g. {stale[0]}"
        )
    mirror_holds = held(mirror.agent)
    if len(mirror_holds) != sizes.space + sizes.added:
        raise SubsetBenchBroken(
            f"the mirror holds {len(mirror_holds)} of {sizes.space + sizes.added} records"
        )
    back.update(_db_mb(phone.agent), records=len(phone_holds))
    mirror_back.update(_db_mb(mirror.agent), records=len(mirror_holds))
    fresh_pull.update(_db_mb(fresh.agent), records=len(fresh_holds))
    part3 = {
        "space_records": sizes.space + sizes.added,
        "corrected": sizes.corrected,
        "added": sizes.added,
        "corrected_held_before": held_before,
        "changes_applied_s": changes_s,
        "subset": back,
        "mirror": mirror_back,
        "fresh_subset": fresh_pull,
        "ratio_response_vs_mirror": _ratio(back["response_mb"], mirror_back["response_mb"]),
        "ratio_response_vs_fresh": _ratio(back["response_mb"], fresh_pull["response_mb"]),
        "ratio_sync_s_vs_mirror": _ratio(back["sync_s"], mirror_back["sync_s"]),
        "ratio_sync_s_vs_fresh": _ratio(back["sync_s"], fresh_pull["sync_s"]),
    }
    for device in (phone, mirror, fresh):
        device.agent.close()
    return {"space": part1, "offline": part3}


def _stale_corrections(agent: DeviceAgent, record_ids: list[str]) -> list[str]:
    """Of these corrected records, those the device holds at a version below 2."""
    db = agent._debug_db()
    stale: list[str] = []
    for chunk in _in_chunks(record_ids):
        marks = ",".join("?" for _ in chunk)
        rows = db.all(
            f"SELECT record_id FROM record_versions WHERE record_id IN ({marks}) "
            "GROUP BY record_id HAVING max(version) < 2",
            chunk,
        )
        stale += [row[0] for row in rows]
    return stale


# --- part 2: a smaller policy evicts 10k records --------------------------------------


def _evict(cloud: RunningCloud, clock: BenchClock, folder: Path, sizes: Sizes) -> dict[str, Any]:
    service = cloud.operator
    n, keep = sizes.evict_space, sizes.evict_keep
    space = build(service, clock, "subset-evict", 2, n, clock.at - timedelta(days=10))
    cold_facts_s = warm_facts(cloud, space)
    laptop = enroll(service, cloud, space, folder, "laptop")
    roomy = SubsetPolicy(budget=SubsetBudget(max_records=max(20_000, n)))
    laptop.agent.set_subset_policy(roomy)
    report, catch_up_s = timed_sync(laptop)
    catch_up = _sync_figures(laptop, report, catch_up_s)
    if len(held(laptop.agent)) != n:
        raise SubsetBenchBroken(f"the laptop holds {len(held(laptop.agent))} of {n} records")
    catch_up.update(_db_mb(laptop.agent), records=n)

    start = time.perf_counter()
    view = laptop.agent.set_subset_policy(SubsetPolicy(budget=SubsetBudget(max_records=keep)))
    choose_s = time.perf_counter() - start
    before = _db_mb(laptop.agent)
    report, evict_s = timed_sync(laptop)
    evict = _sync_figures(laptop, report, evict_s)
    left = sorted(set(report.left))
    kept = held(laptop.agent)
    if view.records != keep or len(kept) != keep or len(left) != n - keep:
        raise SubsetBenchBroken(
            f"a budget of {keep} records on a device holding {n}: the cloud chose "
            f"{view.records}, the sync evicted {len(left)}, the device holds {len(kept)}"
        )
    if report.shredded or report.left_later:
        raise SubsetBenchBroken(
            f"the eviction forgot {len(report.shredded)} records and deferred "
            f"{len(report.left_later)}; a leave is neither"
        )
    numbers = {space.record_id(i): i for i in range(n)}
    traces = _traces(laptop.agent, left, [space.episode_id(numbers[r]) for r in left])
    if traces:
        raise SubsetBenchBroken(f"evicted records still have rows on the device: {traces}")
    for record_id in left[:: max(1, len(left) // sizes.evict_sample)]:
        state = service.record_status(space.space_id, record_id).lifecycle_state.value
        if state != "active":
            raise SubsetBenchBroken(f"evicted record {record_id} is {state} in the cloud")
    after = _db_mb(laptop.agent)
    laptop.agent.close()
    return {
        "records": n,
        "kept": keep,
        "build_s": space.build_s,
        "cold_facts_s": cold_facts_s,
        "catch_up": catch_up,
        "evict": {
            **evict,
            "choose_s": choose_s,
            "evicted_per_s": len(left) / evict_s,
            "db_mb_before": before["db_checkpointed_mb"],
            "db_mb_after": after["db_checkpointed_mb"],
            "db_file_mb_after_sync": after["db_file_mb"],
            "db_wal_mb_after_sync": after["db_wal_mb"],
        },
        "catch_up_records_per_s": n / catch_up_s,
        "ratio_evict_s_vs_catch_up_s": _ratio(evict_s, catch_up_s),
        "ratio_per_record": _ratio(evict_s / (n - keep), catch_up_s / n),
    }


# --- the bench -----------------------------------------------------------------------


def _on_cloud(
    folder: Path, now: datetime, part: Callable[[RunningCloud, BenchClock], dict[str, Any]]
) -> dict[str, Any]:
    clock = BenchClock(now)
    with RunningCloud.sqlite(folder / "cloud", clock=clock) as cloud:
        return part(cloud, clock)


def measure(folder: Path, smoke: bool) -> dict[str, Any]:
    """Parts 1 and 3 (``space``, ``offline``) and part 2 (``evict``), each with its
    figures, its baseline and their ratios."""
    sizes = SMOKE if smoke else FULL
    now = datetime.now(UTC).replace(microsecond=0)
    out = _on_cloud(
        folder / "space", now, lambda c, k: _subset_of_space(c, k, folder / "space", sizes)
    )
    out["evict"] = _on_cloud(
        folder / "evict", now, lambda c, k: _evict(c, k, folder / "evict", sizes)
    )
    return out


def _slowest(*figures: dict[str, Any]) -> str:
    return " / ".join(
        f"{f['slowest_request_s']:.1f} ({f['over_device_timeout']:,})" for f in figures
    )


def _reasons(by_reason: dict[str, int]) -> str:
    return ", ".join(f"{reason} {n:,}" for reason, n in by_reason.items())


def render(result: dict[str, Any]) -> Table:
    space, evict, offline = result["space"], result["evict"], result["offline"]
    table = Table(title="device subset (SQLite cloud over loopback, default policy unless said)")
    for col in ("measure", "subset device", "baseline", "ratio"):
        table.add_column(col, justify="left" if col == "measure" else "right")
    sub, mir = space["subset"], space["mirror"]
    n = space["records"]
    table.add_row(
        f"{n:,}-record space, sync from scratch (baseline: protocol-2 mirror)", "", "", ""
    )
    table.add_row(
        "  records held",
        f"{sub['records']:,}",
        f"{mir['records']:,}",
        f"{space['ratio_records']:.3f}x",
    )
    table.add_row(
        "  device DB MB (file + WAL)",
        f"{sub['db_file_mb']:.1f} + {sub['db_wal_mb']:.1f}",
        f"{mir['db_file_mb']:.1f} + {mir['db_wal_mb']:.1f}",
        f"{space['ratio_db_mb']:.3f}x",
    )
    table.add_row(
        "  device DB MB, checkpointed",
        f"{sub['db_checkpointed_mb']:.1f}",
        f"{mir['db_checkpointed_mb']:.1f}",
        f"{space['ratio_db_checkpointed_mb']:.3f}x",
    )
    table.add_row(
        "  policy MB (sealed + vector; baseline: whole space)",
        f"{sub['policy_mb']:.1f}",
        f"{space['whole_space_policy_mb']:.1f}",
        f"{space['ratio_policy_mb']:.3f}x",
    )
    table.add_row(
        "  pull responses MB (requests)",
        f"{sub['response_mb']:.1f} ({sub['requests']:,})",
        f"{mir['response_mb']:.1f} ({mir['requests']:,})",
        f"{space['ratio_response_mb']:.3f}x",
    )
    table.add_row(
        "  sync s",
        f"{sub['sync_s']:.1f}",
        f"{mir['sync_s']:.1f}",
        f"{space['ratio_sync_s']:.2f}x",
    )
    table.add_row(
        f"  slowest request s (requests over {DEFAULT_TIMEOUT:.0f} s)",
        _slowest(sub),
        _slowest(mir),
        "",
    )
    table.add_row("  chosen by reason", _reasons(sub["by_reason"]), "", "")
    table.add_row("  left out (over budget)", f"{sub['left_out']:,}", "", "")
    table.add_row(
        "  cloud: first read of the space's facts s", f"{space['cold_facts_s']:.1f}", "", ""
    )
    ev, cu = evict["evict"], evict["catch_up"]
    gone = evict["records"] - evict["kept"]
    table.add_row(
        f"budget {evict['records']:,} -> {evict['kept']:,} records: the sync evicting "
        f"{gone:,} (baseline: the catch-up that pulled {evict['records']:,} in)",
        "",
        "",
        "",
    )
    table.add_row(
        "  sync s",
        f"{ev['sync_s']:.2f}",
        f"{cu['sync_s']:.2f}",
        f"{evict['ratio_evict_s_vs_catch_up_s']:.2f}x",
    )
    table.add_row(
        "  records/s (per record)",
        f"{ev['evicted_per_s']:,.0f}",
        f"{evict['catch_up_records_per_s']:,.0f}",
        f"{evict['ratio_per_record']:.2f}x",
    )
    table.add_row(
        "  device DB MB before -> after (checkpointed)",
        f"{ev['db_mb_before']:.1f} -> {ev['db_mb_after']:.1f}",
        f"{cu['db_checkpointed_mb']:.1f}",
        "",
    )
    table.add_row(
        f"  slowest request s (requests over {DEFAULT_TIMEOUT:.0f} s)",
        _slowest(ev),
        _slowest(cu),
        "",
    )
    table.add_row("  cloud choosing (set_subset_policy) s", f"{ev['choose_s']:.2f}", "", "")
    sub, mir, fresh = offline["subset"], offline["mirror"], offline["fresh_subset"]
    table.add_row(
        f"offline a day while {offline['corrected']:,} records were corrected and "
        f"{offline['added']:,} added (baseline: mirror / a new subset device)",
        "",
        "",
        "",
    )
    table.add_row(
        "  changes pulled",
        f"{sub['changes_pulled']:,}",
        f"{mir['changes_pulled']:,} / {fresh['changes_pulled']:,}",
        "",
    )
    table.add_row(
        "  response MB (requests)",
        f"{sub['response_mb']:.2f} ({sub['requests']:,})",
        f"{mir['response_mb']:.2f} ({mir['requests']:,}) / "
        f"{fresh['response_mb']:.2f} ({fresh['requests']:,})",
        f"{offline['ratio_response_vs_mirror']:.2f}x / {offline['ratio_response_vs_fresh']:.2f}x",
    )
    table.add_row(
        "  sync s",
        f"{sub['sync_s']:.2f}",
        f"{mir['sync_s']:.2f} / {fresh['sync_s']:.2f}",
        f"{offline['ratio_sync_s_vs_mirror']:.2f}x / {offline['ratio_sync_s_vs_fresh']:.2f}x",
    )
    table.add_row(
        f"  slowest request s (requests over {DEFAULT_TIMEOUT:.0f} s)",
        _slowest(sub),
        _slowest(mir, fresh),
        "",
    )
    table.add_row(
        "  entered / left the subset",
        f"{sub['entered']:,} / {sub['left']:,}",
        "",
        "",
    )
    return table
