"""A push's opened episodes (issue 21): an episode this push read is opened once and
held on the push's session only; it is gone when the push ends, a forgotten key still
hides it, and the push decides exactly as one op per request would."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from cloud import push as push_module
from cloud.facts import FactsReader
from cloud.store.sql_batch import BatchSession
from cloud.vault import Vault
from tests.cloud.conftest import Ops
from tests.cloud.test_push_batch import _service, _sqlite, _state
from tests.cloud.test_push_direct import _pushed


def _ops() -> list[dict[str, Any]]:
    ops = Ops()
    return [
        ops.episode("ep_00000000", "I live in Paris. My dog is called Rex.", "conv-1"),
        ops.remember("rec_00000000", "I live in Paris.", ["ep_00000000"]),
        ops.remember("rec_00000001", "My dog is called Rex.", ["ep_00000000"]),
        ops.remember("rec_00000002", "I never said this.", ["ep_00000000"]),
    ]


def test_an_episode_is_opened_once_per_push_and_dropped_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sessions: list[BatchSession] = []
    opens: list[str] = []
    real_session, real_open = push_module.BatchSession, Vault.open

    def session(*a: Any) -> BatchSession:
        sessions.append(real_session(*a))
        return sessions[-1]

    def counted(self: Vault, s: Any, space: str, kind: str, item: str, *a: Any) -> Any:
        opens.append(f"{kind}:{item}")
        return real_open(self, s, space, kind, item, *a)

    answers = []
    for name, pushes in (("batched", [_ops()]), ("alone", [[o] for o in _ops()])):
        where = tmp_path / name
        where.mkdir()
        service = _service(_sqlite(where), where)
        monkeypatch.setattr(push_module, "BatchSession", session)
        monkeypatch.setattr(Vault, "open", counted)
        try:
            answers.append((_pushed(service, pushes), _state(service)))
        finally:
            monkeypatch.undo()
            service.close()
        if name == "batched":
            assert opens.count("episode:ep_00000000") == 1, opens
    assert answers[0] == answers[1]
    assert [r["status"] for r in answers[0][0]][:3] == ["applied"] * 3
    assert sessions and all(s.opened_episodes == {} for s in sessions)


def test_a_held_episode_whose_key_is_forgotten_is_not_read() -> None:
    row = SimpleNamespace(key_id="k1", sealed_content=b"", typed_at=None)
    held = SimpleNamespace(conversation_id="c", text="held", source_kind="user", source_id=None)
    session = SimpleNamespace(
        opened_episodes={("ep_1", "k1"): held}, episodes=lambda _sp, _ids: {"ep_1": row}
    )
    alive = SimpleNamespace(data_key=lambda *_a: b"k", open=lambda *_a: None)
    assert FactsReader(session, alive, "sp").episodes(["ep_1"])["ep_1"].text == "held"  # type: ignore[arg-type]
    gone = SimpleNamespace(data_key=lambda *_a: None, open=lambda *_a: None)
    assert FactsReader(session, gone, "sp").episodes(["ep_1"]) == {}  # type: ignore[arg-type]
