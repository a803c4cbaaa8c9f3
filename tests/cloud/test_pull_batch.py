"""Set-at-a-time pull (issue 21): the page-at-a-time ``cloud.changes.ChangeReader``
answers exactly what the per-row reader it replaced answered (``tests/cloud/pull_oracle``):
the same changes, in the same order, the same rows left out (forgotten content, keys
gone from the key store, states and projects that a later change carries).

Random feeds of versions, corrections, states, forgets (their keys destroyed by the
sweep after each push), episodes, artifacts derived from one or two records, projects
opened and closed, and keys lost from the key store without a forget are read whole by
both readers, and pulled page by page (mirror and subset protocols, random page sizes)
by two fresh devices, one through each reader. Sealed keys differ (each seal has its own
ephemeral key), so a change is compared with its data key opened by the device.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nacl.public import PublicKey, SealedBox

import cloud.service
from cloud.changes import ChangeReader
from cloud.config import CloudConfig
from cloud.service import CloudService
from protocol.messages import AckRequest, AnyChange, PullRequest, PushRequest
from tests.cloud.conftest import MASTER_KEY, Device, FakeClock, Ops, enroll, new_user
from tests.cloud.pull_oracle import PerRowReader

TEXTS = [
    "I grew up in Duluth. My sister lives in Oslo.",
    "My sister lives in Bergen. I drink tea every morning.",
    "I drink coffee every morning. I grew up in Duluth.",
]
RECORDS = ["rec_aaaaaaaa", "rec_bbbbbbbb", "rec_cccccccc"]
PROJECTS = ["garden", "renovation"]

Step = tuple[Any, ...]
steps = st.one_of(
    st.tuples(st.just("episode"), st.integers(0, 2)),
    st.tuples(st.just("remember"), st.sampled_from(RECORDS), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("correct"), st.sampled_from(RECORDS), st.integers(0, 2), st.integers(0, 1)),
    st.tuples(st.just("forget"), st.sampled_from(RECORDS)),
    st.tuples(st.just("dont_use"), st.sampled_from(RECORDS)),
    st.tuples(st.just("use_again"), st.sampled_from(RECORDS)),
    st.tuples(
        st.just("artifact"),
        st.integers(0, 3),
        st.lists(st.sampled_from(RECORDS), min_size=1, max_size=2, unique=True),
    ),
    st.tuples(st.just("project"), st.sampled_from(PROJECTS), st.booleans()),
    # a key gone from the key store with no forget naming it
    st.tuples(
        st.just("lose"), st.sampled_from(["version", "episode", "artifact"]), st.integers(0, 9)
    ),
)


def _op(ops: Ops, step: Step) -> dict[str, Any] | None:
    match step:
        case ("episode", i):
            return ops.episode(f"ep_{i:08d}", TEXTS[i], f"conv-{i % 2}")
        case ("remember" | "correct" as kind, record, i, s):
            text = TEXTS[i].split(". ")[s].rstrip(".") + "."
            build = ops.remember if kind == "remember" else ops.correct
            return build(record, text, [f"ep_{i:08d}"], f"conv-{i % 2}")
        case ("forget", record):
            return ops.forget(record)
        case ("dont_use" | "use_again" as kind, record):
            return ops.simple(kind, record)
        case ("artifact", k, parents):
            return ops.artifact(f"art_{k:08d}", list(parents), f"Summary {k}.")
        case ("project", name, is_open):
            return ops.project(name, open=is_open)
        case ("lose", _kind, _k):
            return None
        case _:
            raise AssertionError(step)


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


def _play(service: CloudService, device: Device, plan: list[Step]) -> None:
    """Push the plan one op a request (a refused op is part of the feed too)."""
    ops = Ops()
    for step in plan:
        op = _op(ops, step)
        if op is None:
            _lose_a_key(service, device.space_id, step[1], step[2])
            continue
        service.push(device.space_id, device.device_id, PushRequest(ops=[op]))
        with service.store.session() as s:
            unacked = s.unacked_events(device.space_id, device.device_id)
        if unacked:  # a device confirms its forgets before it pushes again
            service.ack(device.space_id, device.device_id, AckRequest(event_ids=unacked))


def _lose_a_key(service: CloudService, space_id: str, kind: str, k: int) -> None:
    """Destroy the key of the ``k``-th (mod how many) item of ``kind`` in feed order,
    with no forget naming it."""
    with service.store.session() as s:
        rows = s.changes_after(space_id, 0, 10_000)
        if kind == "version":
            wanted = [
                (r.record_id or "", r.version or 0) for r in rows if r.kind == "record_version"
            ]
            versions = s.version_rows(space_id, wanted)
            key_ids = [versions[v].key_id for v in wanted if v in versions]
        elif kind == "episode":
            ids = [r.episode_id or "" for r in rows if r.kind == "episode"]
            episodes = s.episodes(space_id, ids)
            key_ids = [episodes[i].key_id for i in ids if i in episodes]
        else:
            ids = [r.artifact_id or "" for r in rows if r.kind == "artifact"]
            artifacts = s.artifacts(space_id, ids)
            key_ids = [artifacts[i].key_id for i in ids if i in artifacts]
    if key_ids:
        service.key_store.destroy([key_ids[k % len(key_ids)]])


def _opened(device: Device, change: AnyChange | None) -> dict[str, Any] | None:
    """The change as JSON, its sealed data key replaced by the key it seals."""
    if change is None:
        return None
    out = change.model_dump(mode="json")
    if "sealed_key" in out:
        out["sealed_key"] = device.open_key(change.sealed_key).hex()
    return out


def _read_whole_feed(service: CloudService, device: Device) -> None:
    """Both readers over every feed row at once, and over random chunks of it."""
    space_id = device.space_id
    with service.store.session(space_id, lock=False) as s:
        box = SealedBox(PublicKey(bytes(device.key.public_key)))
        rows = s.changes_after(space_id, 0, 10_000)
        oracle = PerRowReader(s, service.vault, space_id, box).read_page(rows)
        batched = ChangeReader(s, service.vault, space_id, box)
        expected = [_opened(device, c) for c in oracle]
        assert [_opened(device, c) for c in batched.read_page(rows)] == expected
        # loaded by chunks; a row read outside its chunk is loaded alone
        got = []
        for start in range(0, len(rows), 3):
            batched.load(rows[start : start + 3])
            got += [_opened(device, batched.read(row)) for row in rows[start : start + 3]]
        assert got == expected
        assert [_opened(device, batched.read(row)) for row in reversed(rows)] == expected[::-1]


def _pull_all(service: CloudService, device: Device, version: int, limit: int) -> list[Any]:
    changes: list[Any] = []
    cursor = None
    for _ in range(1_000):
        page = service.pull(
            device.space_id,
            device.device_id,
            PullRequest(protocol_version=version, cursor=cursor, limit=limit),
        )
        changes += [_opened(device, c) for c in page.changes]
        cursor = page.cursor
        if not page.has_more:
            return changes
    raise AssertionError(f"{device.device_id} never reached the end of the feed")


def _pulls_agree(service: CloudService, code: Callable[[], str], version: int, limit: int) -> None:
    """Two fresh devices pull the whole feed, one through each reader."""
    batched_device = enroll(service, code(), "laptop")
    oracle_device = enroll(service, code(), "tablet")
    batched = _pull_all(service, batched_device, version, limit)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cloud.service, "ChangeReader", PerRowReader)
        oracle = _pull_all(service, oracle_device, version, limit)
    assert batched == oracle


def _check(service: CloudService, plan: list[Step], limit: int) -> str:
    """Play ``plan`` in a new space and compare the readers; the space's id."""
    (phone,) = new_user(service, "ada", "phone")
    _play(service, phone, plan)
    _read_whole_feed(service, phone)

    def code() -> str:
        return service.new_enrollment_code(phone.space_id)

    for version in (2, 4):  # the mirror, then the subset
        _pulls_agree(service, code, version, limit)
    return phone.space_id


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=st.lists(steps, min_size=1, max_size=16), limit=st.integers(1, 7))
def test_the_page_reader_answers_what_the_per_row_reader_answered(
    plan: list[Step], limit: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        service = _service(f"sqlite:///{Path(tmp) / 'records.db'}", Path(tmp))
        try:
            _check(service, plan, limit)
        finally:
            service.close()


# every kind of row and every reason to leave one out, on both stores
EVERY_KIND: list[Step] = [
    ("episode", 0),
    ("episode", 1),
    ("remember", "rec_aaaaaaaa", 0, 1),
    ("remember", "rec_bbbbbbbb", 0, 0),
    ("correct", "rec_aaaaaaaa", 1, 0),
    ("artifact", 0, ["rec_bbbbbbbb", "rec_aaaaaaaa"]),
    ("artifact", 1, ["rec_bbbbbbbb"]),
    ("project", "garden", True),
    ("project", "garden", False),
    ("dont_use", "rec_bbbbbbbb"),
    ("episode", 2),
    ("remember", "rec_cccccccc", 2, 0),
    ("artifact", 2, ["rec_cccccccc", "rec_bbbbbbbb"]),  # parents out of id order
    ("lose", "version", 1),
    ("lose", "episode", 2),
    ("lose", "artifact", 1),
    ("forget", "rec_aaaaaaaa"),
    ("use_again", "rec_bbbbbbbb"),
]


@pytest.mark.parametrize("store", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_every_kind_of_row_reads_the_same_on_both_stores(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if store == "sqlite":
        url = f"sqlite:///{tmp_path / 'records.db'}"
    else:
        new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
        url = new_database()
    service = _service(url, tmp_path)
    try:
        space_id = _check(service, EVERY_KIND, 3)
        with service.store.session() as s:
            kinds = {r.kind for r in s.changes_after(space_id, 0, 10_000)}
    finally:
        service.close()
    assert kinds >= {"record_version", "record_state", "episode", "artifact", "project"}
    assert "key_destruction" in kinds
