"""Live sync latency: from a forget's commit in the cloud to the other devices' keys gone.

Invariant: nothing here asserts a timing. Three devices of one user are in live mode
(``DeviceAgent.live``); the phone remembers a sentence, the others receive it live,
then the phone forgets it and nobody calls ``sync``. The clock starts when the cloud
process that applied the forget has committed it (its ``live.changed`` hook, right
after the commit) and stops, per other device, when that device's live sync returns
with the record shredded: its keys and text destroyed, the WAL truncated and the key
destruction acknowledged. On SQLite one cloud serves all three devices; on PostgreSQL
two cloud services share one database and the laptop is on the other one, so its
wake-up crosses processes through LISTEN/NOTIFY.
"""

from __future__ import annotations

import secrets
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import psycopg
from rich.table import Table

from cloud.config import CloudConfig
from device.agent import DeviceAgent
from device.live import LiveEvent
from simulator.cloud_runner import RunningCloud
from simulator.transport import SwitchableTransport

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"
WAIT = 20.0  # the live pull's wait, as a device uses it by default
DEADLINE = 30.0  # seconds before a stuck run is reported as such (never expected)
NAMES = ("phone", "laptop", "tablet")


class _Stopwatch:
    """Commit times from the cloud's hook and shred times from the devices' events."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.armed = False
        self.committed: float | None = None
        self.shredded: dict[str, float] = {}
        self.record: str | None = None

    def on_commit(self, space_id: str | None) -> None:
        now = time.perf_counter()
        with self.cond:
            if self.armed and self.committed is None and space_id is not None:
                self.committed = now

    def device(self, name: str) -> Callable[[LiveEvent], None]:
        if name == NAMES[0]:  # the phone shreds its own forget locally, at once
            return lambda event: None

        def on_event(event: LiveEvent) -> None:
            now = time.perf_counter()
            with self.cond:
                report = event.report
                if report is not None and self.record in report.shredded:
                    self.shredded.setdefault(name, now)
                self.cond.notify_all()

        return on_event

    def until(self, predicate: Callable[[], bool], what: str) -> None:
        with self.cond:
            if not self.cond.wait_for(predicate, DEADLINE):
                raise RuntimeError(f"live bench: not within {DEADLINE} s: {what}")


def _app_service(cloud: RunningCloud) -> Any:
    """The ``CloudService`` inside the running app (not the runner's operator handle)."""
    assert cloud._server is not None
    app: Any = cloud._server.config.app
    return app.state.service


def _measure(clouds: list[RunningCloud], folder: Path, forgets: int) -> dict[str, float]:
    space_id, code = clouds[0].operator.add_user("bench")
    watch = _Stopwatch()
    _app_service(clouds[0]).live.on_change(watch.on_commit)  # the phone's cloud
    agents: list[DeviceAgent] = []
    latencies: list[float] = []
    with ExitStack() as stack:
        for index, name in enumerate(NAMES):
            agent = DeviceAgent.create(
                folder / name,
                f"bench {name}",
                device_name=name,
                cloud_url=clouds[index % len(clouds)].url,
                transport=SwitchableTransport(),
            )
            stack.callback(agent.close)
            agent.enroll(code if index == 0 else clouds[0].operator.new_enrollment_code(space_id))
            agents.append(agent)
        for agent, name in zip(agents, NAMES, strict=True):
            stack.enter_context(agent.live(wait=WAIT, on_event=watch.device(name)))
        phone, others = agents[0], agents[1:]
        for n in range(forgets):
            sentence = f"My locker code number {n} at the gym is {4000 + n}."
            phone.say(sentence, f"gym-{n}")
            record = phone.remember(sentence, f"gym-{n}").record_id
            assert record is not None

            def arrived(record_id: str = record) -> bool:
                return all(bool(a.data_keys_for(record_id)) for a in others)

            watch.until(arrived, "the record reaches every device")
            with watch.cond:
                watch.armed, watch.committed, watch.shredded = True, None, {}
                watch.record = record
            phone.forget_permanently(record)
            watch.until(lambda: len(watch.shredded) == len(others), "the forget reaches all")
            with watch.cond:
                watch.armed = False
                assert watch.committed is not None
                latencies.extend(at - watch.committed for at in watch.shredded.values())
    ms = sorted(1000 * s for s in latencies)
    return {
        "forgets": forgets,
        "samples": len(ms),
        "p50_ms": statistics.median(ms),
        "max_ms": ms[-1],
        "under_1s": sum(1 for v in ms if v < 1000) / len(ms),
    }


@contextmanager
def _postgres_database() -> Iterator[str | None]:
    """A fresh PostgreSQL database (dropped after), or None when none is reachable."""
    try:
        admin = psycopg.connect(PG_ADMIN, autocommit=True)
    except psycopg.OperationalError:
        yield None
        return
    name = f"memsync_bench_{secrets.token_hex(4)}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def measure(folder: Path, smoke: bool) -> dict[str, Any]:
    """Forget-to-shred latency on SQLite (one service) and PostgreSQL (two services)."""
    forgets = 3 if smoke else 20
    results: dict[str, Any] = {"wait_s": WAIT}
    with RunningCloud.sqlite(folder / "sqlite-cloud") as cloud:
        results["sqlite_one_service"] = _measure([cloud], folder / "sqlite-devices", forgets)
    with _postgres_database() as url:
        if url is None:
            results["postgres_two_services"] = {"skipped": "PostgreSQL is not reachable"}
        else:
            config = CloudConfig(store_url=url, key_store_path=folder / "pg-keys.db")
            with RunningCloud(config) as one, RunningCloud(config) as two:
                results["postgres_two_services"] = _measure(
                    [one, two], folder / "pg-devices", forgets
                )
    return results


def render(result: dict[str, Any]) -> Table:
    table = Table(
        title="live sync: a forget's commit to the other online devices' keys destroyed "
        f"(live pulls of {result['wait_s']:g} s)"
    )
    for column in ("setup", "forgets", "samples", "p50 ms", "max ms", "under 1 s"):
        table.add_column(column, justify="right")
    for setup in ("sqlite_one_service", "postgres_two_services"):
        row = result[setup]
        if "skipped" in row:
            table.add_row(setup, "-", "-", "-", "-", row["skipped"])
            continue
        table.add_row(
            setup,
            str(row["forgets"]),
            str(row["samples"]),
            f"{row['p50_ms']:.0f}",
            f"{row['max_ms']:.0f}",
            f"{100 * row['under_1s']:.0f}%",
        )
    return table
