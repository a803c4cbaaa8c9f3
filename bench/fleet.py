"""A fleet of real devices syncing against a real cloud under load (issue 6).

``measure(store_url, folder, ...)`` starts the FastAPI app under uvicorn on loopback
(``simulator.cloud_runner.RunningCloud``) in a process of its own, so the devices'
Python work does not share the server's interpreter lock, and drives ``devices`` real
``DeviceAgent``s (each its own SQLCipher file, spread over ``users`` spaces) from a
pool of ``threads`` threads. Each device does ``rounds`` rounds of: say a sentence,
remember it, sync (push, then pull). Every request is timed at the device's HTTP seam
(``bench.http_timing.TimingTransport``); push and pull latency p50/p99, throughput and
errors by kind come from that log. Afterwards every device syncs once more and its
records are compared with the cloud's view of its space (convergence).

Invariants: nothing here asserts a timing; errors are counted, never hidden (a failed
round is counted by its exception and the run goes on); the cloud process is stopped
and every device closed whatever happened. Devices embed with random unit vectors
(``bench.retrieval.fast_vectors``): 200 phones' model runs would otherwise compete with
the server for the same two cores.
"""

from __future__ import annotations

import os
import random
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.cloud_process import CloudProcess
from bench.http_timing import RequestLog, TimingTransport, percentile
from bench.retrieval import fast_vectors
from bench.spaces import PASSPHRASE, sentence
from cloud.config import CloudConfig
from cloud.service import CloudService
from device.agent import DeviceAgent
from device.errors import DeviceError, ServerRefused
from protocol.model import LifecycleState

FORGOTTEN = LifecycleState.FORGOTTEN.value
PUSH, PULL = "/v1/push", "/v1/pull"


@dataclass
class FleetDevice:
    user: int
    space_id: str
    agent: DeviceAgent
    seed: int


def _error_kind(exc: Exception) -> str:
    if isinstance(exc, ServerRefused):
        return f"{type(exc).__name__} {exc.code}"
    return type(exc).__name__


def _round(device: FleetDevice, number: int, rng: random.Random) -> tuple[int, str | None]:
    """One round: say + remember a sentence, then sync. (ops pushed, error kind or None)."""
    text = sentence(rng, device.seed * 1000 + number)
    conversation = f"fleet-{device.seed}-{number}"
    try:
        device.agent.say(text, conversation)
        device.agent.remember(text, conversation)
        return device.agent.sync().pushed, None
    except DeviceError as exc:
        return 0, _error_kind(exc)


def _live_ids(records: list[Any]) -> set[str]:
    return {r.record_id for r in records if r.lifecycle != FORGOTTEN}


def measure(
    store_url: str,
    folder: Path,
    *,
    devices: int = 200,
    users: int = 20,
    rounds: int = 3,
    threads: int = 24,
    seed: int = 6,
) -> dict[str, Any]:
    """Run the fleet once against ``store_url``; return its figures (see module doc)."""
    folder.mkdir(parents=True, exist_ok=True)
    config = CloudConfig(
        store_url=store_url, key_store_path=folder / "keys.db", master_key=os.urandom(32)
    )
    operator = CloudService(config)  # migrates the store before the server starts
    cloud = CloudProcess(config)
    log = RequestLog()
    fleet: list[FleetDevice] = []
    try:
        spaces = [operator.add_user(f"fleet-user-{u}")[0] for u in range(users)]

        def add_device(i: int) -> FleetDevice:
            user = i % users
            agent = DeviceAgent.create(
                folder / f"device-{i}",
                PASSPHRASE,
                device_name=f"device-{i}",
                cloud_url=cloud.url,
                transport=TimingTransport(log),
            )
            agent.enroll(operator.new_enrollment_code(spaces[user]))
            return FleetDevice(user, spaces[user], agent, seed * 100_000 + i)

        with ThreadPoolExecutor(threads) as pool:
            fleet = list(pool.map(add_device, range(devices)))
        log.entries.clear()
        order = list(fleet)
        random.Random(seed).shuffle(order)  # users' devices interleave, as in life

        def work(device: FleetDevice) -> tuple[int, list[str]]:
            rng = random.Random(device.seed)
            pushed, errors = 0, []
            for number in range(rounds):
                ops, error = _round(device, number, rng)
                pushed += ops
                if error is not None:
                    errors.append(error)
            return pushed, errors

        with fast_vectors(), ThreadPoolExecutor(threads) as pool:
            start = time.perf_counter()
            outcomes = list(pool.map(work, order))
            load_s = time.perf_counter() - start
        load_entries = list(log.entries)
        round_errors = Counter(e for _p, errs in outcomes for e in errs)

        # settle: one more sync each, then every device must hold its space's view
        with fast_vectors(), ThreadPoolExecutor(threads) as pool:
            settle_errors = Counter(
                e for _p, e in pool.map(lambda d: (0, _settle(d)), fleet) if e is not None
            )
        with operator.store.session() as s:
            cloud_view = {sp: _live_ids(s.live_records(sp)) for sp in spaces}
        diverged = [
            d.agent.device_name
            for d in fleet
            if _live_ids(d.agent.list_records()) != cloud_view[d.space_id]
        ]
    finally:
        for device in fleet:
            device.agent.close()
        cloud.stop()
        operator.close()
    return _summary(
        load_entries,
        load_s,
        sum(p for p, _e in outcomes),
        round_errors + settle_errors,
        devices=devices,
        users=users,
        rounds=rounds,
        threads=threads,
        records=sum(len(v) for v in cloud_view.values()),
        diverged=diverged,
    )


def _settle(device: FleetDevice) -> str | None:
    try:
        device.agent.sync()
    except DeviceError as exc:
        return _error_kind(exc)
    return None


def _summary(
    entries: list[tuple[str, float, str]],
    load_s: float,
    ops_pushed: int,
    round_errors: Counter[str],
    **facts: Any,
) -> dict[str, Any]:
    log = RequestLog(entries=entries)
    push, pull = log.seconds(PUSH), log.seconds(PULL)
    ms = 1000.0
    return {
        **{k: v for k, v in facts.items() if k != "diverged"},
        "load_s": load_s,
        "requests": len(entries),
        "requests_per_s": len(entries) / load_s,
        "ops_pushed_per_s": ops_pushed / load_s,
        "push_requests": len(push),
        "push_p50_ms": ms * percentile(push, 50),
        "push_p99_ms": ms * percentile(push, 99),
        "pull_requests": len(pull),
        "pull_p50_ms": ms * percentile(pull, 50),
        "pull_p99_ms": ms * percentile(pull, 99),
        "request_errors": dict(log.outcomes()),
        "round_errors": dict(round_errors),
        "errors": sum(log.outcomes().values()) + sum(round_errors.values()),
        "devices_converged": facts["devices"] - len(facts["diverged"]),
        "diverged_devices": facts["diverged"][:20],
    }
