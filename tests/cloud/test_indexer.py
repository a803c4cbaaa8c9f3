"""Indexing after commit (issue 20): a push owes its space an index catch-up, run
outside any request; a recall answers at once from what is indexed and says how many
records it could not search; two processes on one PostgreSQL database never index the
same space at once. Both record stores, unless a test says PostgreSQL.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cloud.config import CloudConfig
from cloud.embedder import default_embedder
from cloud.indexer import MAX_ATTEMPTS, Indexer
from cloud.service import CloudService
from protocol.embedding import Embedder
from protocol.messages import RecallAnswer, RecallRequest
from protocol.versioned import parse
from tests.cloud.conftest import MASTER_KEY, Device, Ops, applied, new_user, push
from tests.cloud.test_recall import DULUTH, OTHERS, ids, index_rows, tell

TOLD = [DULUTH, *OTHERS]


class Counting:
    """The real embedder, counting the texts it embeds; with a ``gate``, a call from
    the thread named ``gated`` waits for the gate (a slow indexer, at the seam)."""

    def __init__(self, gate: threading.Event | None = None, gated: str = "") -> None:
        self.inner: Embedder = default_embedder()
        self.model_id = self.inner.model_id
        self.texts = 0
        self.gate = gate
        self.gated = gated
        self.entered = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
        if self.gate is not None and threading.current_thread().name == self.gated:
            self.entered.set()
            assert self.gate.wait(120), "the test never opened the gate"
        self.texts += len(texts)
        return list(self.inner.embed(list(texts)))


def ask(service: CloudService, device: Device, query: str, version: int = 4) -> dict[str, Any]:
    """The opened answer as JSON, asked in protocol ``version`` (indexing nothing first)."""
    sealed = service.recall(
        device.space_id,
        device.device_id,
        RecallRequest(query=query, protocol_version=version),
    ).sealed_answer
    raw: dict[str, Any] = json.loads(device.open_key(sealed))
    return raw


def tell_all(service: CloudService, ops: Ops, phone: Device) -> dict[str, str]:
    return {s: tell(service, ops, phone, i, s) for i, s in enumerate(TOLD, 1)}


def test_a_push_owes_an_index_and_a_recall_answers_at_once_from_what_is_indexed(
    service: CloudService, ops: Ops
) -> None:
    assert service.indexer.mode == "manual"  # the tests' config: nothing runs by itself
    (phone,) = new_user(service, "ada", "phone")
    told = tell_all(service, ops, phone)
    space = phone.space_id
    assert service.indexer.owed() == [space]
    assert index_rows(service, space, told[DULUTH]) == (0, 0)  # the push indexed nothing

    behind = parse(RecallAnswer, ask(service, phone, "Where did I grow up?"), 4)
    assert behind.lines == [] and behind.unindexed == len(TOLD)
    assert index_rows(service, space, told[DULUTH]) == (0, 0)  # nor did the recall
    old = ask(service, phone, "Where did I grow up?", version=3)
    assert "unindexed" not in old  # a version-3 device gets the answer it always got
    parse(RecallAnswer, old, 3)

    assert service.index_pending() == len(TOLD)
    assert service.indexer.owed() == []
    caught_up = parse(RecallAnswer, ask(service, phone, "Where did I grow up?"), 4)
    assert caught_up.unindexed == 0 and ids(caught_up)[0] == told[DULUTH]

    # a correction makes the record unsearchable at its new version until indexed
    applied(
        push(
            service,
            phone,
            ops.episode("ep_0000000099", "No. I grew up in Superior.", "c9"),
            ops.correct(told[DULUTH], "I grew up in Superior.", ["ep_0000000099"], "c9"),
        )
    )
    assert parse(RecallAnswer, ask(service, phone, "Superior"), 4).unindexed == 1
    assert service.index_pending() == 1
    assert ids(parse(RecallAnswer, ask(service, phone, "Superior"), 4)) == [told[DULUTH]]


def test_a_recall_that_finds_its_space_behind_owes_it_to_the_indexer(
    service: CloudService, ops: Ops, config: CloudConfig
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    tell_all(service, ops, phone)
    restarted = CloudService(config)  # a new process: no push of its own owes anything
    try:
        assert restarted.indexer.owed() == []
        assert ask(restarted, phone, "coffee")["unindexed"] == len(TOLD)
        assert restarted.indexer.owed() == [phone.space_id]
        assert restarted.index_pending() == len(TOLD)
        assert ask(restarted, phone, "coffee")["unindexed"] == 0
    finally:
        restarted.close()


def test_an_in_process_cloud_indexes_in_the_background_with_no_worker(
    config: CloudConfig, ops: Ops
) -> None:
    service = CloudService(replace(config, indexing="background"))
    try:
        (phone,) = new_user(service, "ada", "phone")
        told = tell_all(service, ops, phone)
        assert service.indexer.wait_idle(timeout=120)  # a condition, not a sleep
        answer = parse(RecallAnswer, ask(service, phone, "Where did I grow up?"), 4)
        assert answer.unindexed == 0 and ids(answer)[0] == told[DULUTH]
        assert service.indexer.indexed == len(TOLD)
    finally:
        service.close()


@pytest.mark.postgres
def test_two_processes_on_one_postgres_database_never_index_a_space_twice(
    postgres_database: Callable[[], str], tmp_path: Path, ops: Ops
) -> None:
    config = CloudConfig(
        store_url=postgres_database(),
        key_store_path=tmp_path / "keys.db",
        master_key=MASTER_KEY,
        indexing="manual",
    )
    gate = threading.Event()
    slow, fast = Counting(gate, gated="process-a"), Counting()
    a = CloudService(replace(config, embedder=lambda: slow))
    b = CloudService(replace(config, embedder=lambda: fast))
    try:
        (phone,) = new_user(a, "ada", "phone")
        tell_all(a, ops, phone)
        space = phone.space_id
        done: list[int] = []
        run = threading.Thread(
            target=lambda: done.append(a.index_catch_up(space)), name="process-a"
        )
        run.start()
        assert slow.entered.wait(120)  # A holds the space's lock, inside its embedding
        assert b.search.try_catch_up(space) is None  # refused at once ...
        assert b.index_catch_up(space) == 0 and fast.texts == 0  # ... embedding nothing
        b.indexer.schedule(space)
        assert b.index_pending() == 0 and b.indexer.owed() == [space]  # stays owed
        gate.set()
        run.join(120)
        assert done == [len(TOLD)] and slow.texts == len(TOLD)
        assert b.index_pending() == 0 and b.indexer.owed() == []  # the work was done
        assert fast.texts == 0  # every record embedded once, by A alone
        assert b.search.unindexed(space) == 0
        assert ask(b, phone, "Where did I grow up?")["lines"][0]["text"] == DULUTH
    finally:
        gate.set()
        a.close()
        b.close()


def test_a_closing_service_stops_its_catch_up_between_chunks(
    config: CloudConfig, ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("cloud.search.CATCH_UP_CHUNK", 2)
    service: CloudService

    class ClosesMidway(Counting):
        def embed(self, texts: Sequence[str]) -> list[np.ndarray]:
            service.search.close()  # the service begins closing during the first chunk
            return super().embed(texts)

    embedder = ClosesMidway()
    service = CloudService(replace(config, embedder=lambda: embedder))
    try:
        (phone,) = new_user(service, "ada", "phone")
        tell_all(service, ops, phone)
        assert service.index_pending() == 2  # the chunk under way is written whole
        assert embedder.texts == 2 and service.search.unindexed(phone.space_id) == 3
    finally:
        service.close()


# --- the indexer itself (no store) ----------------------------------------------------------


def test_a_failing_catch_up_is_retried_then_given_up_and_owed_again_by_the_next_commit() -> None:
    calls: list[str] = []

    def failing(space_id: str) -> int | None:
        calls.append(space_id)
        raise RuntimeError("the embedder fell over")

    indexer = Indexer(failing, "manual")
    indexer.schedule("sp_a")
    for attempt in range(1, MAX_ATTEMPTS + 1):
        assert indexer.run_pending() == 0
        assert len(calls) == attempt
        assert indexer.owed() == ([] if attempt == MAX_ATTEMPTS else ["sp_a"])
    indexer.schedule("sp_a")  # the next push owes it again
    assert indexer.owed() == ["sp_a"]


def test_a_commit_while_its_space_is_indexed_owes_it_again() -> None:
    indexer: Indexer

    def catch_up(space_id: str) -> int:
        if len(seen) == 0:
            indexer.schedule(space_id)  # a push committed while this ran
        seen.append(space_id)
        return 1

    seen: list[str] = []
    indexer = Indexer(catch_up, "manual")
    indexer.schedule("sp_a")
    assert indexer.run_pending() == 1 and indexer.owed() == ["sp_a"]
    assert indexer.run_pending() == 1 and indexer.owed() == []
    assert indexer.wait_idle(timeout=0)


def test_a_closed_indexer_takes_nothing_and_a_mode_must_be_known() -> None:
    indexer = Indexer(lambda _space: 0, "background")
    indexer.close()
    indexer.schedule("sp_a")
    assert indexer.owed() == []
    with pytest.raises(ValueError, match="'sideways'"):
        Indexer(lambda _space: 0, "sideways")  # type: ignore[arg-type]
