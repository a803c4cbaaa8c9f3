"""A push's data keys: batched per push, written before it commits, never kept after it."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from sqlalchemy import event

from cloud.keystore import KeyBatch
from cloud.service import CloudService
from cloud.store.sql import SqlSession
from protocol.messages import AckRequest, KeyDestruction
from tests.cloud.conftest import SENTENCE, TYPED, Device, Ops, new_user, pull_all, push


def _data_key_count(service: CloudService) -> int:
    db = sqlite3.connect(service.key_store_path)
    try:
        return int(db.execute("SELECT count(*) FROM data_keys").fetchone()[0])
    finally:
        db.close()


def _ack_all(service: CloudService, device: Device) -> None:
    events = [c.event_id for c in pull_all(service, device) if isinstance(c, KeyDestruction)]
    if events:
        service.ack(device.space_id, device.device_id, AckRequest(event_ids=events))


def test_one_push_decides_like_one_push_per_op(service: CloudService, ops: Ops) -> None:
    """Keys created and read inside one push, and forgets within it, change nothing."""
    (alice,) = new_user(service, "alice", "phone")
    (bob,) = new_user(service, "bob", "phone")
    batch: list[dict[str, Any]] = [
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
        ops.remember("rec_aaaaaaaa02", SENTENCE, ["ep_aaaaaaaa01"]),
        ops.forget("rec_aaaaaaaa01"),
        ops.remember("rec_aaaaaaaa03", SENTENCE, ["ep_aaaaaaaa01"]),
        ops.forget("rec_aaaaaaaa02"),
        ops.episode("ep_aaaaaaaa02", TYPED),
        ops.remember("rec_aaaaaaaa04", SENTENCE, ["ep_aaaaaaaa02"]),
    ]
    together = push(service, alice, *batch).receipts
    apart = []
    for op in batch:
        apart.extend(push(service, bob, op).receipts)
        _ack_all(service, bob)

    def shape(receipts: list[Any]) -> list[tuple[Any, ...]]:
        return [(r.op_id, r.status, r.code) for r in receipts]

    assert shape(together) == shape(apart)
    kinds = [c.kind for c in pull_all(service, alice)]
    assert kinds == [c.kind for c in pull_all(service, bob)]
    for device in (alice, bob):
        destroyed = [
            k for c in pull_all(service, device) if isinstance(c, KeyDestruction) for k in c.key_ids
        ]
        assert destroyed and service.key_store.existing(destroyed) == set()


def test_a_failed_push_leaves_no_data_key(
    service: CloudService, ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    before = _data_key_count(service)

    def fail(*_: Any) -> None:
        raise RuntimeError("the store went away")

    monkeypatch.setattr(SqlSession, "touch_device", fail)
    with pytest.raises(RuntimeError):
        push(
            service,
            phone,
            ops.episode("ep_aaaaaaaa01", TYPED),
            ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
        )
    assert _data_key_count(service) == before
    monkeypatch.undo()
    assert pull_all(service, phone) == []


def test_keys_are_written_once_per_push_before_it_commits(
    service: CloudService, ops: Ops, monkeypatch: pytest.MonkeyPatch
) -> None:
    (phone,) = new_user(service, "alice", "phone")
    order: list[str] = []
    write = KeyBatch.write

    def logged(self: KeyBatch) -> None:
        order.append("keys")
        write(self)

    monkeypatch.setattr(KeyBatch, "write", logged)
    event.listen(service.store.engine, "commit", lambda _conn: order.append("commit"))
    before = _data_key_count(service)
    push(
        service,
        phone,
        ops.episode("ep_aaaaaaaa01", TYPED),
        ops.remember("rec_aaaaaaaa01", SENTENCE, ["ep_aaaaaaaa01"]),
    )
    assert _data_key_count(service) == before + 2
    assert order[:2] == ["keys", "commit"]
    assert order.count("keys") == 1
