"""An export never silently produces an incomplete package (issue 7): a store it needs
that cannot be read is waited for (through the injected sleep) and then refused 503
naming the store; an item that cannot be read while the package streams stops the
stream with an error chunk naming it, and the device keeps nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from nacl.public import SealedBox
from sqlalchemy import text

from cloud.app import _in_worker
from cloud.config import CloudConfig
from cloud.errors import ExportUnavailable
from cloud.keystore import open_key_store
from cloud.service import CloudService
from protocol.export.stream import StreamAborted, open_stream
from tests.cloud.conftest import MASTER_KEY, FakeClock, Ops, applied, push
from tests.cloud.test_export import _many, export_row, export_text, make_space, request


class Sleeps:
    """The injected sleep: records every wait (no test sleeps); ``then`` runs on each."""

    def __init__(self, then: Callable[[], None] | None = None) -> None:
        self.waits: list[float] = []
        self.then = then

    def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)
        if self.then is not None:
            self.then()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def waiting(config: CloudConfig, sleeps: Sleeps) -> Iterator[CloudService]:
    svc = CloudService(replace(config, export_wait=3.0, sleep=sleeps))
    try:
        yield svc
    finally:
        svc.close()


def test_an_unreachable_key_store_is_waited_for_then_refused_naming_it(
    waiting: CloudService, sleeps: Sleeps, ops: Ops
) -> None:
    space = make_space(waiting, ops)
    sp = space.phone.space_id
    waiting.key_store.close()  # its connection is gone: every read of it fails
    path = str(waiting.key_store.path)
    with pytest.raises(ExportUnavailable) as refused:
        waiting.export(sp, space.phone.device_id, request(sp, "exp_aaaaaaaa50"))
    message = str(refused.value)
    assert f"the key store {path} cannot be read" in message and "waited 3 s" in message
    assert refused.value.status == 503
    assert sleeps.waits == [0.5, 1.0, 1.5]  # doubling, and never past export_wait in all
    assert export_row(waiting, sp, "exp_aaaaaaaa50") is None  # the id is not used up


def test_an_export_goes_on_when_the_key_store_comes_back_while_it_waits(
    config: CloudConfig, clock: FakeClock, rng: Callable[[int], bytes], ops: Ops
) -> None:
    svc: CloudService

    def back() -> None:  # the operator brings the key store back during the first wait
        svc.key_store = open_key_store(config.key_store_path, rng, clock, MASTER_KEY)
        svc.vault.key_store = svc.key_store

    sleeps = Sleeps(back)
    svc = CloudService(replace(config, sleep=sleeps))
    try:
        space = make_space(svc, ops)
        sp = space.phone.space_id
        svc.key_store.close()
        assert "rec_aaaaaaaa01" in export_text(svc, space.phone, request(sp, "exp_aaaaaaaa51"))
        assert sleeps.waits == [0.5]
    finally:
        svc.close()


def test_a_key_store_without_the_space_key_is_refused(
    config: CloudConfig, tmp_path: Path, sleeps: Sleeps, ops: Ops
) -> None:
    first = CloudService(config)
    try:
        space = make_space(first, ops)
    finally:
        first.close()
    other = tmp_path / "another" / "keys.db"  # a deployment pointed at the wrong key store
    svc = CloudService(replace(config, key_store_path=other, export_wait=1.0, sleep=sleeps))
    try:
        sp = space.phone.space_id
        with pytest.raises(
            ExportUnavailable, match=f"the key store {other} holds no key for space {sp}"
        ):
            svc.export(sp, space.phone.device_id, request(sp, "exp_aaaaaaaa52"))
        assert sleeps.waits == [0.5, 0.5]
    finally:
        svc.close()


def _key_of(service: CloudService, table: str, column: str, item: str) -> str:
    with service.store.session() as s:
        row = s.conn.execute(
            text(f"SELECT key_id FROM {table} WHERE {column} = :id ORDER BY key_id"), {"id": item}
        ).first()
    assert row is not None
    return str(row[0])


@pytest.mark.parametrize(
    ("table", "column", "item", "named"),
    [
        ("record_versions", "record_id", "rec_aaaaaaaa01", "record rec_aaaaaaaa01 v"),
        ("episodes", "episode_id", "ep_aaaaaaaa01", "episode ep_aaaaaaaa01"),
    ],
)
def test_a_data_key_missing_under_a_live_item_stops_the_export_naming_it(
    service: CloudService, ops: Ops, table: str, column: str, item: str, named: str
) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    key_id = _key_of(service, table, column, item)
    service.key_store.destroy([key_id])  # gone from under an item no forget names
    with pytest.raises(StreamAborted) as stopped:
        export_text(service, space.phone, request(sp, "exp_aaaaaaaa53"))
    message = str(stopped.value)
    assert named in message
    assert f"its data key {key_id} is missing from the key store" in message
    assert "nothing partial is kept" in message
    assert export_row(service, sp, "exp_aaaaaaaa53").outcome.startswith(f"failed: {named}")


def test_a_key_store_lost_while_streaming_stops_the_export_naming_it(
    service: CloudService, ops: Ops
) -> None:
    space = make_space(service, ops)
    sp = space.phone.space_id
    for first in range(0, 720, 240):  # more than one page
        applied(push(service, space.phone, *_many(ops, first, 240)))
    frames = service.export(sp, space.phone.device_id, request(sp, "exp_aaaaaaaa54"))
    head, first = next(frames), next(frames)
    service.key_store.close()
    kept: list[bytes] = []
    with pytest.raises(StreamAborted, match=f"the key store {service.key_store.path} cannot be"):
        for chunk in open_stream(
            [head, first, *frames], "exp_aaaaaaaa54", SealedBox(space.phone.key).decrypt
        ):
            kept.append(chunk)
    assert kept  # what arrived before the error is never a package: no final chunk came
    assert export_row(service, sp, "exp_aaaaaaaa54").outcome.startswith("failed: the key store")


def test_the_app_closes_the_frames_when_the_response_ends_early() -> None:
    closed: list[str] = []

    def frames() -> Iterator[bytes]:
        try:
            yield b"one"
            yield b"two"
        finally:
            closed.append("closed")

    async def client_goes_away() -> None:
        body = _in_worker(frames())
        assert await body.__anext__() == b"one"
        await body.aclose()

    anyio.run(client_goes_away)
    assert closed == ["closed"]


def _record_store_down(admin: Any, database: str, down: bool) -> None:
    """Refuse (or allow again) every connection to ``database``, and end the open ones:
    the record store is unreachable for real, as when its server is being restarted."""
    admin.execute(f'ALTER DATABASE "{database}" WITH ALLOW_CONNECTIONS {str(not down).lower()}')
    if down:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )


@pytest.mark.postgres
def test_an_unreachable_record_store_is_waited_for_then_refused_naming_it(
    postgres_database: Callable[[], str],
    pg_admin: tuple[Any, str, list[str]],
    tmp_path: Path,
    clock: FakeClock,
    rng: Callable[[int], bytes],
    ops: Ops,
) -> None:
    admin = pg_admin[0]
    url = postgres_database()
    database = url.rsplit("/", 1)[1]
    sleeps = Sleeps()
    config = CloudConfig(
        store_url=url,
        key_store_path=tmp_path / "keys.db",
        clock=clock,
        random_bytes=rng,
        master_key=MASTER_KEY,
        export_wait=3.0,
        sleep=sleeps,
    )
    svc = CloudService(config)
    try:
        space = make_space(svc, ops)
        sp = space.phone.space_id
        _record_store_down(admin, database, True)
        with pytest.raises(ExportUnavailable) as refused:
            svc.export(sp, space.phone.device_id, request(sp, "exp_aaaaaaaa60"))
        message = str(refused.value)
        assert f"the record store postgresql://postgres@127.0.0.1:5432/{database}" in message
        assert "cannot be read" in message and "waited 3 s" in message
        assert sleeps.waits == [0.5, 1.0, 1.5]

        # the store comes back during the first wait: the export waits, then goes on whole
        sleeps.waits.clear()
        sleeps.then = lambda: _record_store_down(admin, database, False)
        _record_store_down(admin, database, True)
        text = export_text(svc, space.phone, request(sp, "exp_aaaaaaaa61"))
        assert "rec_aaaaaaaa01" in text and sleeps.waits == [0.5]
        assert export_row(svc, sp, "exp_aaaaaaaa60") is None  # the refused id is not used up
    finally:
        _record_store_down(admin, database, False)
        svc.close()
