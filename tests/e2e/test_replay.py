"""Replaying an old request changes nothing, over real HTTP, on both record stores.

A real device runs a realistic session (enroll, account key, remember, correct, forget,
pull, ack) through a recording transport at its one transport seam; the cloud then
moves on (another device writes). Every captured request is sent again, byte for byte
with the same headers, and the digest of every table of the record store and of the
key store must be unchanged by each replay. The one column left out is
``devices.last_seen``: a liveness timestamp that nothing the cloud decides reads
(asserted below), so a replay that moves it cannot change what any device is told or
what the cloud decides. Its one reader is ``GET /v1/devices`` (the inspector's devices
table): the account's owner is shown when each device last reached the cloud, and a
replay did reach it with that device's credential, so showing it moved is the truth.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import inspect, text

from cloud.config import CloudConfig
from device.agent import DeviceAgent
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet

pytestmark = pytest.mark.e2e

LIVENESS_ONLY = {("devices", "last_seen")}
REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Captured:
    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    body: bytes


class RecordingTransport(httpx.BaseTransport):
    """The real HTTP transport, keeping a copy of every request that went through it."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.captured: list[Captured] = []
        self.recording = True

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        body = request.read()
        if self.recording:
            headers = tuple((k.decode(), v.decode()) for k, v in request.headers.raw)
            self.captured.append(Captured(request.method, str(request.url), headers, body))
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def cloud(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningCloud]:
    if request.param == "sqlite":
        running = RunningCloud.sqlite(tmp_path / "cloud")
    else:
        new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
        running = RunningCloud(
            CloudConfig(store_url=new_database(), key_store_path=tmp_path / "keys.db")
        )
    with running:
        yield running


def digest(cloud: RunningCloud) -> dict[str, str]:
    """A hash of every row of every table of the record store and of the key store."""
    out: dict[str, str] = {}
    engine = cloud.operator.store.engine
    with engine.connect() as conn:
        for table in sorted(inspect(conn).get_table_names()):
            columns = [c["name"] for c in inspect(conn).get_columns(table)]
            shown = ["NULL" if (table, c) in LIVENESS_ONLY else f'"{c}"' for c in columns]
            rows = conn.execute(text(f'SELECT {", ".join(shown)} FROM "{table}"')).all()
            out[f"records.{table}"] = _hash(rows)
    path = Path(cloud.config.key_store_path)
    keys = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        names = keys.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        for (table,) in sorted(names):
            out[f"keys.{table}"] = _hash(keys.execute(f'SELECT * FROM "{table}"').fetchall())
    finally:
        keys.close()
    return out


def _hash(rows: Sequence[Sequence[Any]]) -> str:
    return hashlib.sha256("\n".join(sorted(repr(tuple(r)) for r in rows)).encode()).hexdigest()


def test_a_replayed_request_changes_nothing(cloud: RunningCloud, tmp_path: Path) -> None:
    fleet = Fleet(cloud, tmp_path / "devices")
    ada = fleet.add_user("ada")
    recorder = RecordingTransport()
    phone = DeviceAgent.create(
        tmp_path / "phone",
        "phone passphrase",
        device_name="phone",
        cloud_url=cloud.url,
        transport=recorder,
    )
    try:
        phone.enroll(
            cloud.operator.new_enrollment_code(ada.space_id), account_passphrase="correct horse"
        )
        phone.say("I grew up in Duluth. My sister lives in Oslo.", "c1")
        duluth = phone.remember("I grew up in Duluth.", "c1").record_id
        oslo = phone.remember("My sister lives in Oslo.", "c1").record_id
        phone.sync()
        phone.say("My sister lives in Bergen.", "c2")
        phone.correct(oslo, "My sister lives in Bergen.", "c2")
        phone.forget_permanently(duluth)
        phone.sync()
        phone.sync()  # pulls its own forget's key destruction and acknowledges it
        recorder.recording = False

        # the cloud moves on: another device writes, and the phone catches up
        laptop = fleet.add_device(ada, "laptop")
        laptop.agent.say("I drink tea every morning.", "c3")
        laptop.agent.remember("I drink tea every morning.", "c3")
        laptop.agent.sync()
        phone.sync()

        routes = [(c.method, httpx.URL(c.url).path) for c in recorder.captured]
        assert {p for _, p in routes} >= {
            "/v1/enroll",
            "/v1/account-key",
            "/v1/push",
            "/v1/pull",
            "/v1/ack",
        }, routes
        pushes = [c for c in recorder.captured if c.url.endswith("/v1/push")]
        assert len(pushes) >= 2

        with httpx.Client(timeout=30) as http:
            for captured in recorder.captured:
                before = digest(cloud)
                answer = http.request(
                    captured.method,
                    captured.url,
                    headers=list(captured.headers),
                    content=captured.body,
                )
                after = digest(cloud)
                changed = sorted(k for k in before if before[k] != after.get(k))
                assert before == after, (captured.method, captured.url, changed)
                path = httpx.URL(captured.url).path
                if path == "/v1/enroll":  # a single-use code: refused the second time
                    assert answer.status_code == 403, answer.text
                    assert "already used" in answer.json()["message"]
                elif path == "/v1/push":
                    assert answer.status_code == 200, answer.text
                    receipts = answer.json()["receipts"]
                    assert receipts and {r["status"] for r in receipts} == {"duplicate"}
                else:
                    assert answer.status_code == 200, (path, answer.text)

        # the forget stayed a forget, the correction a correction
        assert cloud.operator.record_status(ada.space_id, duluth).lifecycle_state.value == (
            "permanently_forgotten"
        )
        assert cloud.operator.record_status(ada.space_id, oslo).version == 2
        assert cloud.operator.pending(ada.space_id).forgets[0].pending == []
        phone.sync()
        assert sorted(v.text for v in phone.list_records() if v.text) == [
            "I drink tea every morning.",
            "My sister lives in Bergen.",
        ]
    finally:
        phone.close()
        fleet.close()


def test_the_column_left_out_of_the_digest_is_read_by_nothing() -> None:
    """``devices.last_seen`` is only ever written, except by ``GET /v1/devices``'s store
    query (its row and wire field carry it to the account's owner: when each device last
    reached the cloud, which a replay did, with that credential). If any other code starts
    reading it, replays must be shown not to move it (or it must join the digest)."""
    uses = []
    for folder in ("cloud", "protocol", "simulator", "device"):
        for source in sorted((REPO / folder).rglob("*.py")):
            for number, line in enumerate(source.read_text().splitlines(), 1):
                if "last_seen" in line:
                    uses.append(f"{source.relative_to(REPO)}:{number}: {line.strip()}")
    allowed = ("values(last_seen=at)", 'Column("last_seen"', "last_seen {ts}")
    # GET /v1/devices: its store query, the row it fills and the wire field, nothing else
    devices_route = (
        (
            "cloud/store/sql.py:",
            "seen = c.last_seen  # read for GET /v1/devices only",
        ),
        (
            "cloud/store/base.py:",
            "last_seen: datetime | None  # read for GET /v1/devices only",
        ),
        (
            "protocol/messages.py:",
            "last_seen: UtcDatetime | None = None  # the wire field of GET /v1/devices",
        ),
    )
    unexpected = [
        u
        for u in uses
        if not any(a in u for a in allowed)
        and not any(u.startswith(f) and u.endswith(line) for f, line in devices_route)
        and "protocol/consolidation/observations.py" not in u
    ]
    for where, line in devices_route:  # each allowance is used exactly once
        assert sum(u.startswith(where) and u.endswith(line) for u in uses) == 1, (where, line)
    assert not unexpected, unexpected
