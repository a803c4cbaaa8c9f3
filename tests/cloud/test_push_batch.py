"""Set-at-a-time apply (issue 21): a push applied as one batch answers the same receipts
and leaves the same stored state as its ops pushed one per request.

The oracle is the same service pushing each op alone (every op then reads only what is
committed). A push whose later ops depend on its earlier ones (remember then correct
then forget, a candidate marked twice, an op id repeated inside the push) would part
from it if the batch's buffered rows were not read through (``cloud.store.sql_batch``).
"""

from __future__ import annotations

import json
import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from cloud.config import CloudConfig
from cloud.service import CloudService
from cloud.store import schema as t
from protocol.messages import AckRequest, PushRequest
from tests.cloud.conftest import MASTER_KEY, FakeClock, Ops, new_user

TEXTS = [
    "I grew up in Duluth. My sister lives in Oslo.",
    "My sister lives in Bergen. I drink tea every morning.",
    "I drink coffee every morning. I grew up in Duluth.",
]
RECORDS = ["rec_aaaaaaaa", "rec_bbbbbbbb"]

Step = tuple[Any, ...]
steps = st.one_of(
    st.tuples(st.just("episode"), st.integers(0, 2)),
    st.tuples(st.just("remember"), st.sampled_from(RECORDS), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("correct"), st.sampled_from(RECORDS), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("forget"), st.sampled_from(RECORDS)),
    st.tuples(st.just("dont_use"), st.sampled_from(RECORDS)),
    st.tuples(st.just("mark"), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("end"), st.integers(0, 1)),
    st.tuples(st.just("again"), st.integers(0, 20)),  # an earlier op, its id repeated
)


def _ops(plan: list[Step]) -> list[dict[str, Any]]:
    ops = Ops()
    out: list[dict[str, Any]] = []
    for step in plan:
        match step:
            case ("episode", i):
                out.append(ops.episode(f"ep_{i:08d}", TEXTS[i], f"conv-{i % 2}"))
            case ("remember" | "correct" as kind, record, i, s):
                text = TEXTS[i].split(". ")[s].rstrip(".") + "."
                build = ops.remember if kind == "remember" else ops.correct
                out.append(build(record, text, [f"ep_{i:08d}"], f"conv-{i % 2}"))
            case ("forget", record):
                out.append(ops.forget(record))
            case ("dont_use", record):
                out.append(ops.simple("dont_use", record))
            case ("mark", i, s):
                out.append(
                    {
                        **ops._base("mark_candidate", "assistant"),
                        "episode_id": f"ep_{i:08d}",
                        "sentence": s,
                        "content_type": "personal_fact",
                        "sensitivity": "normal",
                        "time_kind": "permanent",
                        "score": 0.9,
                        "model_id": "test-model",
                    }
                )
            case ("end", c):
                out.append({**ops._base("end_session", "user"), "conversation_id": f"conv-{c}"})
            case ("again", k):
                if out:
                    out.append(dict(out[k % len(out)]))
            case _:
                raise AssertionError(step)
    return out


def _service(url: str, folder: Path) -> CloudService:
    return CloudService(
        CloudConfig(
            store_url=url,
            key_store_path=folder / "keys.db",
            clock=FakeClock(),
            random_bytes=random.Random(2121).randbytes,
            master_key=MASTER_KEY,
            indexing="manual",
        )
    )


def _state(service: CloudService) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table (receipts without their position in the request; the
    same seeded randomness gives both services the same keys, nonces and ids)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    with service.store.engine.connect() as conn:
        for table in t.metadata.sorted_tables:
            rows = []
            for row in conn.execute(select(table)):
                values = dict(row._mapping)
                if table is t.devices:
                    values.pop("public_key")  # the test device's own key (PrivateKey.generate)
                if table is t.applied_ops:
                    receipt = json.loads(values["receipt"])
                    receipt.pop("index")
                    values["receipt"] = receipt
                rows.append(tuple(sorted((k, repr(v)) for k, v in values.items())))
            out[table.name] = sorted(rows)
    return out


def _both(
    make_url: Callable[[Path], str], folder: Path, plan: list[Step]
) -> tuple[tuple[list[Any], Any], tuple[list[Any], Any]]:
    ops = _ops(plan)
    answers = []
    for name in ("batched", "one-by-one"):
        where = folder / name
        where.mkdir(parents=True)
        service = _service(make_url(where), where)
        try:
            (device,) = new_user(service, "ada", "phone")
            # (no op at all: both push one empty request)
            pushes = [ops] if name == "batched" else [[op] for op in ops] or [[]]
            receipts = []
            for batch in pushes:
                answer = service.push(device.space_id, device.device_id, PushRequest(ops=batch))
                receipts += [r.model_dump(mode="json", exclude={"index"}) for r in answer.receipts]
                _acknowledge(service, device.space_id, device.device_id)
            answers.append((receipts, _state(service)))
        finally:
            service.close()
    return answers[0], answers[1]


def _acknowledge(service: CloudService, space_id: str, device_id: str) -> None:
    """The device confirms its forgets (a device must, before it pushes again)."""
    with service.store.session() as s:
        unacked = s.unacked_events(space_id, device_id)
    if unacked:
        service.ack(space_id, device_id, AckRequest(event_ids=unacked))


def _sqlite(folder: Path) -> str:
    return f"sqlite:///{folder / 'records.db'}"


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=st.lists(steps, min_size=1, max_size=14))
def test_a_batched_push_equals_its_ops_pushed_one_by_one(plan: list[Step]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (receipts, state), (alone, alone_state) = _both(_sqlite, Path(tmp), plan)
    assert receipts == alone
    assert state == alone_state


# later ops that read what earlier ops of the same push wrote
DEPENDENT = [
    ("episode", 0),
    ("episode", 1),
    ("remember", "rec_aaaaaaaa", 0, 1),  # "My sister lives in Oslo."
    ("mark", 0, 0),
    ("mark", 0, 0),  # the same candidate again, inside the push
    ("correct", "rec_aaaaaaaa", 1, 0),  # "My sister lives in Bergen."
    ("remember", "rec_bbbbbbbb", 0, 0),
    ("again", 2),  # the first remember's op id again: duplicate
    ("dont_use", "rec_bbbbbbbb"),
    ("end", 0),
    ("forget", "rec_aaaaaaaa"),
    ("correct", "rec_aaaaaaaa", 1, 1),  # refused: forgotten earlier in this push
    ("episode", 0),  # refused: the episode exists (written earlier in this push)
]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_push_whose_ops_depend_on_each_other(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if store == "sqlite":
        make_url = _sqlite
    else:
        new_database: Callable[[], str] = request.getfixturevalue("postgres_database")

        def make_url(_folder: Path) -> str:
            return new_database()

    (receipts, state), (alone, alone_state) = _both(make_url, tmp_path, DEPENDENT)
    assert receipts == alone
    assert state == alone_state
    statuses = [r["status"] for r in receipts]
    assert statuses[7] == "duplicate"
    assert statuses[11] == "refused" and statuses[12] == "refused"
    assert any(r for r in state["record_events"])
