"""A push's hot reads (issue 21): the ended state of every conversation a push names is
read in one go, through the DB-API cursor (``cloud.store.sql_direct``), and decides
exactly as one op per request would, on SQLite and PostgreSQL; ``nul_path``'s quick
check refuses exactly what its walk refuses."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from cloud.service import CloudService
from protocol.messages import PushRequest
from protocol.operations import nul_path
from tests.cloud.conftest import Ops, new_user
from tests.cloud.test_push_batch import TEXTS, _acknowledge, _service, _sqlite, _state


def _mark(ops: Ops, episode: int, sentence: int) -> dict[str, Any]:
    return {
        **ops._base("mark_candidate", "assistant"),
        "episode_id": f"ep_{episode:08d}",
        "sentence": sentence,
        "content_type": "personal_fact",
        "sensitivity": "normal",
        "time_kind": "permanent",
        "score": 0.9,
        "model_id": "test-model",
    }


def _pushed(service: CloudService, pushes: list[list[dict[str, Any]]]) -> list[Any]:
    (device,) = new_user(service, "ada", "phone")
    receipts = []
    for ops in pushes:
        answer = service.push(device.space_id, device.device_id, PushRequest(ops=ops))
        receipts += [r.model_dump(mode="json", exclude={"index"}) for r in answer.receipts]
        _acknowledge(service, device.space_id, device.device_id)
    return receipts


def test_ended_before_and_within_the_push_decide_as_one_by_one() -> None:
    """conv-0 ended in an earlier push, conv-1 ends inside this one: each candidate's
    readiness is the one pushing its op alone gives."""
    ops = Ops()
    first = [
        ops.episode("ep_00000000", TEXTS[0], "conv-0"),
        {**ops._base("end_session"), "conversation_id": "conv-0"},
    ]
    second = [
        ops.episode("ep_00000001", TEXTS[1], "conv-1"),
        _mark(ops, 0, 0),  # conv-0: ended before this push
        _mark(ops, 1, 0),  # conv-1: still open
        {**ops._base("end_session"), "conversation_id": "conv-1"},
        _mark(ops, 1, 1),  # conv-1: ended earlier in this push
    ]
    answers = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, pushes in (
            ("batched", [first, second]),
            ("alone", [[o] for o in first + second]),
        ):
            where = Path(tmp) / name
            where.mkdir()
            service = _service(_sqlite(where), where)
            try:
                answers.append((_pushed(service, pushes), _state(service)))
            finally:
                service.close()
    assert answers[0] == answers[1]
    ready = sorted((r for r in answers[0][1]["work_items"] if "'candidate'" in str(r)), key=str)
    assert len(ready) == 3 and all("('ready_at', 'None')" not in str(r) for r in ready)


def test_the_conversations_a_push_names_are_read_once(store_url: str, tmp_path: Path) -> None:
    service = _service(store_url, tmp_path)
    ops = Ops()
    episodes = [ops.episode(f"ep_{i:08d}", f"I live in town {i}.", f"conv-{i}") for i in range(5)]
    seen: list[str] = []

    def listen(_c: Any, _cur: Any, statement: str, *_rest: Any) -> None:
        seen.append(statement)

    try:
        event.listen(service.store.engine, "before_cursor_execute", listen)
        receipts = _pushed(service, [[*episodes, _mark(ops, 0, 0), _mark(ops, 4, 0)]])
    finally:
        event.remove(service.store.engine, "before_cursor_execute", listen)
        service.close()
    assert all(r["status"] == "applied" for r in receipts)
    reads = [s for s in seen if s.startswith("SELECT") and "ended_conversations" in s]
    assert len(reads) == 1, reads  # every conversation token of the push, in one IN list


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": "x", "b": ["y", {"c": "z\x00"}]}, "b.1.c"),
        ({"a\x00": 1}, "(key)"),
        ({"a": {"b\x00": 1}}, "a.(key)"),
        ("\x00", "(value)"),
        (["ok", ("t", "u\x00")], "1.1"),
        ({"a": "x", "b": [1, 2.5, None, True], 3: "y"}, None),
    ],
)
def test_nul_path_finds_the_nul_its_walk_finds(value: Any, path: str | None) -> None:
    assert nul_path(value) == path


def test_nul_path_walks_deep_values_without_recursion() -> None:
    deep: Any = "x\x00"
    for _ in range(5000):
        deep = [deep]
    assert nul_path(deep) == ".".join(["0"] * 5000)
    clean: Any = "x"
    for _ in range(5000):
        clean = {"k": clean}
    assert nul_path(clean) is None
