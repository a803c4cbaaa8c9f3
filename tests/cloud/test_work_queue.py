"""The consolidator's work queue in the record store, on SQLite and PostgreSQL: readiness,
final states, forgetting, and leases (two claimers never hold one item at once)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cloud.errors import StoreError
from cloud.store import SqlStore, open_store
from cloud.store.base import WorkItemRow

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
LEASE = 60.0
_spaces = itertools.count(1)


@pytest.fixture
def store(store_url: str) -> Iterator[SqlStore]:
    s = open_store(store_url, lambda: T0)
    try:
        yield s
    finally:
        s.close()


def _space(store: SqlStore) -> str:
    space_id = f"sp_queue{next(_spaces):06d}"
    with store.session() as s:
        s.create_space(space_id, space_id, T0)
    return space_id


def _item(store: SqlStore, space: str, key: tuple[str, int | None]) -> WorkItemRow:
    with store.session() as s:
        row = s.work_item(space, *key)
    assert row is not None, key
    return row


def test_a_candidate_waits_for_its_conversation_to_end(store: SqlStore) -> None:
    space = _space(store)
    with store.session() as s:
        assert s.add_work_item(space, "ep_aaaaaaaa01", 0, "candidate", "conv-a", T0)
        assert not s.add_work_item(space, "ep_aaaaaaaa01", 0, "candidate", "conv-a", T0)
        assert s.add_work_item(space, "ep_aaaaaaaa01", 1, "candidate", "conv-a", T0)
        assert s.add_work_item(space, "ep_aaaaaaaa02", 0, "candidate", "conv-b", T0)
        assert s.candidate_exists(space, "ep_aaaaaaaa01", 0)
        assert not s.candidate_exists(space, "ep_aaaaaaaa01", 2)
        assert not s.candidate_exists("sp_other000001", "ep_aaaaaaaa01", 0)  # walls
    with store.session() as s:
        assert s.claim_work("w1", T0, LEASE, 10) == []
        assert s.end_conversation(space, "conv-a", T0 + timedelta(minutes=1)) == 2
        assert s.end_conversation(space, "conv-a", T0 + timedelta(minutes=2)) == 0
        # a candidate marked after its conversation ended is ready at once
        assert s.add_work_item(space, "ep_aaaaaaaa03", 0, "candidate", "conv-a", T0)
    a1 = _item(store, space, ("ep_aaaaaaaa01", 0))
    assert a1.ready_at == T0 + timedelta(minutes=1) and a1.state == "waiting"
    assert _item(store, space, ("ep_aaaaaaaa03", 0)).ready_at == T0
    assert _item(store, space, ("ep_aaaaaaaa02", 0)).ready_at is None
    with store.session() as s:
        claimed = s.claim_work("w1", T0 + timedelta(minutes=3), LEASE, 10)
    assert {c.key for c in claimed} == {
        ("ep_aaaaaaaa01", 0),
        ("ep_aaaaaaaa01", 1),
        ("ep_aaaaaaaa03", 0),
    }


def test_behaviour_and_external_items_are_ready_at_once(store: SqlStore) -> None:
    space = _space(store)
    with store.session() as s:
        s.add_work_item(space, "ep_bbbbbbbb01", None, "behaviour", "conv-x", T0)
        s.add_work_item(space, "ep_bbbbbbbb02", None, "external", "conv-x", T0)
        with pytest.raises(StoreError, match="names its sentence"):
            s.add_work_item(space, "ep_bbbbbbbb03", None, "candidate", "conv-x", T0)
        with pytest.raises(StoreError, match="not one of"):
            s.add_work_item(space, "ep_bbbbbbbb03", None, "gossip", "conv-x", T0)
    with store.session() as s:
        only_external = s.claim_work("w1", T0, LEASE, 10, kinds=("external",))
        assert [c.key for c in only_external] == [("ep_bbbbbbbb02", None)]
        rest = s.claim_work("w1", T0, LEASE, 10)
        assert [(c.key, c.item_kind) for c in rest] == [(("ep_bbbbbbbb01", None), "behaviour")]
        assert s.work_items(space, "behaviour")[0].sentence is None


def test_waiting_since_takes_candidates_whose_conversation_never_ended(store: SqlStore) -> None:
    space = _space(store)
    with store.session() as s:
        s.add_work_item(space, "ep_cccccccc01", 0, "candidate", "conv-a", T0)
        s.add_work_item(space, "ep_cccccccc02", 0, "candidate", "conv-a", T0 + timedelta(hours=2))
    now = T0 + timedelta(hours=2, minutes=30)
    with store.session() as s:
        claimed = s.claim_work("daily", now, LEASE, 10, waiting_since=now - timedelta(hours=1))
    assert [c.key for c in claimed] == [("ep_cccccccc01", 0)]


def test_leases_are_exclusive_until_they_expire(store: SqlStore) -> None:
    space = _space(store)
    with store.session() as s:
        for n in range(3):
            s.add_work_item(space, f"ep_dddddddd0{n}", None, "external", "c", T0)
    with store.session() as s:
        first = s.claim_work("w1", T0, LEASE, 2)
    assert [c.lease_owner for c in first] == ["w1", "w1"]
    assert all(c.attempts == 1 and c.lease_until == T0 + timedelta(seconds=LEASE) for c in first)
    with store.session() as s:
        second = s.claim_work("w2", T0 + timedelta(seconds=10), LEASE, 5)
        assert len(second) == 1 and second[0].key not in {c.key for c in first}
        assert s.claim_work("w3", T0 + timedelta(seconds=59), LEASE, 5) == []
    # w1 crashed: its leases expire and another worker takes its items over
    later = T0 + timedelta(seconds=LEASE)
    with store.session() as s:
        taken = s.claim_work("w3", later, LEASE, 5)
    assert {c.key for c in taken} == {c.key for c in first}
    assert all(c.attempts == 2 and c.lease_owner == "w3" for c in taken)
    assert _item(store, space, first[0].key).lease_owner == "w3"


def test_done_and_dropped_are_final(store: SqlStore) -> None:
    space = _space(store)
    with store.session() as s:
        for n in range(4):
            s.add_work_item(space, "ep_eeeeeeee01", n, "candidate", "c", T0)
        s.add_work_item(space, "ep_eeeeeeee02", None, "external", "c", T0)
        s.end_conversation(space, "c", T0)
        claimed = s.claim_work("w1", T0, LEASE, 10)
        assert len(claimed) == 5
    with store.session() as s:
        assert s.resolve_work(space, [("ep_eeeeeeee01", 0)], "rec_aaaaaaaa01") == 1
        assert s.resolve_work(space, [("ep_eeeeeeee01", 0)], "rec_bbbbbbbb01") == 0
        assert s.complete_work(space, [("ep_eeeeeeee01", 1)], dropped=True) == 1
        assert s.release_work("w2", space, [("ep_eeeeeeee01", 2)]) == 0  # not w2's lease
        assert s.release_work("w1", space, [("ep_eeeeeeee01", 2)]) == 1
        # a forget drops the destroyed episode's waiting work, and only that
        assert s.drop_work_for_episodes(space, ["ep_eeeeeeee01"]) == 2
        assert s.complete_work(space, [("ep_eeeeeeee01", 2)], record_id="rec_cccccccc01") == 0
        assert s.complete_work(space, [("ep_eeeeeeee02", None)], record_id="rec_dddddddd01") == 1
    states = {
        key: (row.state, row.record_id, row.lease_owner)
        for key in [("ep_eeeeeeee01", n) for n in range(4)] + [("ep_eeeeeeee02", None)]
        for row in [_item(store, space, key)]
    }
    assert states == {
        ("ep_eeeeeeee01", 0): ("done", "rec_aaaaaaaa01", None),
        ("ep_eeeeeeee01", 1): ("dropped", None, None),
        ("ep_eeeeeeee01", 2): ("dropped", None, None),
        ("ep_eeeeeeee01", 3): ("dropped", None, None),
        ("ep_eeeeeeee02", None): ("done", "rec_dddddddd01", None),
    }
    with store.session() as s:
        assert s.claim_work("w9", T0 + timedelta(days=9), LEASE, 10) == []
        assert [r.key for r in s.work_items(space, "candidate", ("done",))] == [
            ("ep_eeeeeeee01", 0)
        ]


@pytest.mark.postgres
def test_two_postgres_claimers_skip_each_others_locked_rows(
    postgres_database: object,
) -> None:
    assert callable(postgres_database)
    url = postgres_database()
    first_store = open_store(url, lambda: T0)
    second_store = open_store(url, lambda: T0)
    try:
        space = _space(first_store)
        with first_store.session() as s:
            for n in range(6):
                s.add_work_item(space, f"ep_gggggggg0{n}", None, "behaviour", "c", T0)
        holding = threading.Event()
        release = threading.Event()
        first: list[WorkItemRow] = []

        def claim_and_hold() -> None:
            with first_store.session() as s:
                first.extend(s.claim_work("w1", T0, LEASE, 3))
                holding.set()  # the rows stay locked until this transaction ends
                release.wait(timeout=30)

        thread = threading.Thread(target=claim_and_hold)
        thread.start()
        assert holding.wait(timeout=30)
        with second_store.session() as s:
            # without SKIP LOCKED this claim would wait for w1's rows: fail instead
            s.conn.exec_driver_sql("SET LOCAL lock_timeout = '3s'")
            second = s.claim_work("w2", T0, LEASE, 6)
        release.set()
        thread.join(timeout=30)
        assert len(first) == 3 and len(second) == 3
        assert not {c.key for c in first} & {c.key for c in second}
        with second_store.session() as s:
            assert s.claim_work("w3", T0, LEASE, 6) == []
    finally:
        first_store.close()
        second_store.close()


@st.composite
def _claims(draw: st.DrawFn) -> list[tuple[str, int, int]]:
    return draw(
        st.lists(
            st.tuples(
                st.sampled_from(["w1", "w2", "w3"]),
                st.integers(min_value=0, max_value=40),  # seconds the clock moves first
                st.integers(min_value=1, max_value=4),  # claim limit
            ),
            min_size=1,
            max_size=12,
        )
    )


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(claims=_claims())
def test_no_item_is_ever_leased_to_two_claimers_at_once(
    store: SqlStore, claims: list[tuple[str, int, int]]
) -> None:
    space = _space(store)
    lease = 30.0
    with store.session() as s:
        for n in range(5):
            s.add_work_item(space, f"ep_hhhhhhhh0{n}", None, "external", "c", T0)
    now = T0
    live: dict[tuple[str, int | None], tuple[str, datetime]] = {}
    try:
        for owner, advance, limit in claims:
            now += timedelta(seconds=advance)
            claimable = 5 - sum(1 for _o, until in live.values() if until > now)
            with store.session() as s:
                got = [c for c in s.claim_work(owner, now, lease, limit) if c.space_id == space]
            for item in got:
                held = live.get(item.key)
                assert held is None or held[1] <= now, (item.key, held, owner, now)
                live[item.key] = (owner, now + timedelta(seconds=lease))
            assert len(got) == min(limit, claimable)  # nothing claimable is held back
    finally:
        with store.session() as s:  # leave nothing claimable for the next example
            s.complete_work(space, [(f"ep_hhhhhhhh0{n}", None) for n in range(5)], dropped=True)
