"""Retrieval's speed work keeps its answers and forgets what is forgotten: the batch
read equals the one-by-one read on a varied store; the opened-version cache and the
in-memory vector matrix lose a record on every forget, eviction, pulled key
destruction, retirement and wipe, also across a second agent on the same file; the
lexical leg is the top of the full bm25 ranking; BLAS is pinned to one thread."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench import sentences
from device import retrieval, search, shred, threads, version_cache
from device.agent import DeviceAgent
from protocol.model import LifeArea
from protocol.retrieval.pipeline import retrieve
from tests.device.conftest import PASSPHRASE, MakeAgent, TickingClock, reopen
from tests.device.fake_cloud import FakeCloud
from tests.device.test_memory_ops import told
from tests.device.test_sync import _forgotten_elsewhere


def _cached_texts(agent: DeviceAgent) -> set[str]:
    return {c.text for c in version_cache.contents(agent.db_path)}


def _cached_records(agent: DeviceAgent) -> set[str]:
    return {k[1] for k in version_cache.held(agent.db_path)}


def _varied(agent: DeviceAgent, n: int = 40, seed: int = 5) -> list[str]:
    """A store with plain records, corrections, newer statements, conflicts, a record
    not in use, a usage restriction and a forgotten one."""
    rng = random.Random(seed)
    ids = [told(agent, sentences.sentence(rng), f"v{i}") for i in range(n)]
    told(agent, "I drink my coffee iced.", "k1")
    told(agent, "I drink my coffee hot now.", "k2")
    told(agent, "My sister lives in Oslo.", "k3")
    told(agent, "My sister lives in Bergen.", "k4")
    agent.say("Actually my brother Ben lives in Porto.", "k5")
    agent.correct(ids[0], "Actually my brother Ben lives in Porto.", "k5")
    agent.dont_use(ids[1])
    agent.restrict_usage(ids[2], area=LifeArea.WORK)
    agent.forget_permanently(ids[3])
    return ids


QUERIES = (
    "Where does my sister live?",
    "how do I drink my coffee",
    "Who lives in Porto?",
    "What am I allergic to?",
    "When did I fly to Kyoto?",
    "What is the code for the garage door?",
)


def _both(agent: DeviceAgent, query: str) -> tuple[object, object]:
    db = agent._db
    task = retrieval.task_for(query, datetime(2026, 3, 2, 12, 0, tzinfo=UTC), limit=5)
    batched, hits_b = retrieval.gather(db, task)
    single, hits_s = retrieval.gather(db, task, one_by_one=True)
    assert sorted(batched, key=lambda c: c.record_id) == sorted(single, key=lambda c: c.record_id)
    assert [c.record_id for c in batched] == [c.record_id for c in single]
    assert hits_b == hits_s
    return retrieve(task, batched, hits_b), retrieve(task, single, hits_s)


def test_batch_read_returns_exactly_what_one_by_one_returns(make_agent: MakeAgent) -> None:
    agent = make_agent()
    _varied(agent)
    rng = random.Random(9)
    queries = [*QUERIES, *(sentences.sentence(rng) for _ in range(6))]
    for query in queries:
        batched, single = _both(agent, query)  # cold cache
        assert batched == single, query
        again, _ = _both(agent, query)  # from the cache
        assert again == single, query


@settings(max_examples=15, deadline=None)
@given(words=st.lists(st.sampled_from(sorted(sentences.FOODS + sentences.PLACES)), max_size=4))
def test_batch_read_equals_one_by_one_for_any_query(
    shared_store: DeviceAgent, words: list[str]
) -> None:
    batched, single = _both(shared_store, "What about " + " ".join(words) + "?")
    assert batched == single


def test_forgotten_after_recall_leaves_the_cache_and_the_matrix(make_agent: MakeAgent) -> None:
    agent = make_agent()
    record = told(agent, "My locker code is 4417 at the Duluth gym.")
    told(agent, "My sister lives in Oslo.", "c2")
    assert [h.record_id for h in agent.recall("Duluth gym locker code")] == [record]
    assert record in _cached_records(agent)  # it was opened and cached
    assert search.vector_index(agent._db).contains(record)
    agent.forget_permanently(record)
    assert agent.recall("Duluth gym locker code") == []
    assert record not in _cached_records(agent)
    assert not any("4417" in t for t in _cached_texts(agent))
    assert not search.vector_index(agent._db).contains(record)


def test_forget_through_a_second_agent_on_the_same_file(make_agent: MakeAgent) -> None:
    first = make_agent()
    record = told(first, "My locker code is 4417 at the Duluth gym.")
    assert first.recall("Duluth gym locker code")
    second = reopen(first)
    assert second.recall("Duluth gym locker code")
    second.forget_permanently(record)
    assert record not in _cached_records(first)
    assert first.recall("Duluth gym locker code") == []
    assert second.recall("Duluth gym locker code") == []
    assert not any("4417" in t for t in _cached_texts(first))
    second.close()


def test_a_stale_cache_entry_is_never_returned(make_agent: MakeAgent) -> None:
    """Even an entry no invalidation reached (another process shredded) is used only
    while its version row and data key are still there."""
    agent = make_agent()
    record = told(agent, "My locker code is 4417 at the Duluth gym.")
    assert agent.recall("Duluth gym locker code")
    [key] = [k for k in version_cache.held(agent.db_path) if k[1] == record]
    content = version_cache.get(key)
    agent.forget_permanently(record)
    assert content is not None
    version_cache.put(key, content)  # as if the forget had happened elsewhere
    assert agent.recall("Duluth gym locker code") == []
    found = retrieval.batch.candidates(agent._db, [record], {})
    assert found[record].content is None
    assert version_cache.get(key) is None  # the read dropped it


def test_pulled_key_destruction_leaves_the_cache(make_agent: MakeAgent, cloud: FakeCloud) -> None:
    _, laptop, record, _ = _forgotten_elsewhere(make_agent, cloud)
    assert record in _cached_records(laptop)  # the laptop recalled it before the forget
    laptop.sync()
    assert record not in _cached_records(laptop)
    assert not any("Duluth" in t for t in _cached_texts(laptop))
    assert not search.vector_index(laptop._db).contains(record)
    assert laptop.recall("duluth") == []


def test_eviction_and_retirement_leave_the_cache(make_agent: MakeAgent) -> None:
    agent = make_agent()
    kept = told(agent, "My sister lives in Oslo.")
    gone = told(agent, "My locker code is 4417 at the Duluth gym.", "c2")
    agent.recall("sister Oslo")
    agent.recall("Duluth gym locker code")
    assert {kept, gone} <= _cached_records(agent)
    db = agent._db
    with db.atomic():
        db.execute("UPDATE records SET sync_state = 'synced' WHERE record_id = ?", (gone,))
        db.execute("DELETE FROM op_queue WHERE record_id = ?", (gone,))  # as if it was sent
        assert shred.evict_record(db, gone)
    assert gone not in _cached_records(agent) and kept in _cached_records(agent)
    assert not search.vector_index(db).contains(gone)
    with db.atomic():
        shred.retire_version(db, kept, 1)
    assert kept not in _cached_records(agent)


def test_wipe_empties_both_caches(make_agent: MakeAgent) -> None:
    agent = make_agent()
    told(agent, "My sister lives in Oslo.")
    agent.recall("sister Oslo")
    assert _cached_records(agent)
    with agent._db.atomic():
        shred.wipe(agent._db, at="2026-03-02T00:00:00+00:00")
    assert version_cache.held(agent.db_path) == set()
    assert search.vector_index(agent._db).rows == 0


def test_matrix_follows_writes_and_equals_a_rebuild(make_agent: MakeAgent) -> None:
    agent = make_agent()
    rng = random.Random(3)
    ids = [told(agent, sentences.sentence(rng), f"m{i}") for i in range(12)]
    m = search.vector_index(agent._db)
    told(agent, "I keep my passport in the attic.", "n1")  # appended in place
    agent.say("Actually my brother Ben lives in Porto.", "n2")
    agent.correct(ids[0], "Actually my brother Ben lives in Porto.", "n2")  # replaced
    agent.forget_permanently(ids[1])  # removed
    assert search.vector_index(agent._db) is m  # followed, not rebuilt
    followed = {i: m.nearest(q, 50) for i, q in enumerate(_probe_vectors(agent))}
    held = m.ids()
    assert ids[1] not in held and len(held) == 12
    search.forget_cache(agent._db)
    assert m.rows == 0  # dropped and overwritten
    rebuilt = search.vector_index(agent._db)
    assert rebuilt is not m and sorted(rebuilt.ids()) == sorted(held)
    for i, q in enumerate(_probe_vectors(agent)):
        assert rebuilt.nearest(q, 50) == followed[i]


def _probe_vectors(agent: DeviceAgent) -> list[object]:
    embedder = search.embedder_for(agent._db)
    return list(embedder.embed(["sister Oslo", "passport attic", "Porto", "tacos"]))


def test_a_rolled_back_index_write_is_never_served(make_agent: MakeAgent) -> None:
    agent = make_agent()
    told(agent, "My sister lives in Oslo.")
    before = search.vector_index(agent._db)
    probe = "I keep my passport in the attic."
    try:
        with agent._db.atomic():
            told(agent, probe, "r1")
            inside = search.vector_index(agent._db)
            assert inside.rows == 2  # this transaction sees its own write
            raise RuntimeError("roll back")
    except RuntimeError:
        pass
    after = search.vector_index(agent._db)
    assert after.rows == 1 and not any(h.text == probe for h in agent.recall(probe))
    assert before.rows in (1, 2)  # followed the write, then was dropped at the rollback
    assert all(h.text != probe for h in agent.recall("passport attic"))


def test_lexical_leg_is_the_top_of_the_full_ranking(make_agent: MakeAgent) -> None:
    agent = make_agent()
    rng = random.Random(7)
    for i in range(60):
        told(agent, sentences.sentence(rng), f"l{i}")
    db = agent._db
    full = search.lexical_hits(db, "my sister lives in Lisbon with tacos", limit=10_000)
    top = search.lexical_hits(db, "my sister lives in Lisbon with tacos", limit=5)
    assert len(top) == 5 < len(full)
    assert list(top.items()) == list(full.items())[:5]


def test_blas_environment_defaults_to_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in threads.ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")  # a setting of the user's own stays
    threads.set_environment()
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1" and os.environ["OMP_NUM_THREADS"] == "1"
    assert os.environ["MKL_NUM_THREADS"] == "3"


def test_blas_runs_on_one_thread_after_a_query(make_agent: MakeAgent) -> None:
    agent = make_agent()
    told(agent, "My sister lives in Oslo.")
    agent.recall("sister")
    assert threads.blas_threads() in (None, 1)  # None: no OpenBLAS loaded to ask


# --- a store shared by the property test (built once per module) ---------------------

_SHARED: dict[str, DeviceAgent] = {}


def _shared(tmp_root: str) -> DeviceAgent:
    if "agent" not in _SHARED:
        agent = DeviceAgent.create(
            __import__("pathlib").Path(tmp_root) / "shared",
            PASSPHRASE,
            device_name="shared",
            clock=TickingClock(),
            random_bytes=random.Random(4).randbytes,
        )
        _varied(agent, n=60, seed=8)
        _SHARED["agent"] = agent
    return _SHARED["agent"]


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> object:
    agent = _shared(str(tmp_path_factory.mktemp("speed")))
    yield agent
    agent.close()
    _SHARED.clear()


def test_relation_lookups_follow_every_index_write(make_agent: MakeAgent) -> None:
    """The per-generation memo of relation-term holders never misses a write."""
    agent = make_agent()
    first = told(agent, "My sister Priya lives in Lisbon.")
    db = agent._db
    content = retrieval.candidate(db, first, {})
    assert content is not None and content.content is not None
    before = search.related(db, {first: content.content})
    second = told(agent, "My sister Priya plays the cello.", "c2")
    after = search.related(db, {first: content.content})
    assert all(second not in [o for o, _ in links] for links in before.values())
    assert second in [o for o, _ in after.get(first, [])]
    agent.forget_permanently(second)
    assert second not in [o for o, _ in search.related(db, {first: content.content}).get(first, [])]
