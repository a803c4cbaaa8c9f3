"""A pulled page's derived rows (issue 21 item 2): written once at the page's end, for
every record the page holds at its end, and shredded with the record.

Each test would fail if the page's batched writes missed a record (a subject key, an
FTS row, a vector), wrote rows for a record the same page forgot, or left any of them
behind a forget; and one counts the statements a catch-up issues per record."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from device import search, store
from device.agent import DeviceAgent
from device.db import Database
from device.sync import SyncSession
from protocol import subjects
from protocol.messages import PullResponse
from protocol.model import RecordContent
from protocol.retrieval import lexical, searchable_text
from protocol.retrieval.relations import relation_terms
from tests.device.conftest import PASSPHRASE, MakeAgent
from tests.device.fake_cloud import FakeCloud
from tests.device.sqlcipher_pages import decrypted_pages, index_needles

SENTENCES = [
    "I keep three beehives behind the Quillby allotment.",
    "My sister Odalys teaches cello in Bergen on weekdays.",
    "I grew up in a lighthouse near Varnholm.",
    "My favourite tea is smoked lapsang from the Wexcombe market.",
    "I am learning to sail a small dinghy called Petrel.",
]
GONE = 2  # the lighthouse: its words are looked for after the forget


def _enrolled(make_agent: MakeAgent, cloud: FakeCloud, name: str, seed: int) -> DeviceAgent:
    agent = make_agent(name, seed=seed, cloud=cloud)
    agent.enroll(cloud.new_code())
    return agent


def _phone_with_records(make_agent: MakeAgent, cloud: FakeCloud) -> list[str]:
    phone = _enrolled(make_agent, cloud, "phone", 1)
    records = []
    for i, text in enumerate(SENTENCES):
        phone.say(text, f"c{i}")
        record = phone.remember(text, f"c{i}").record_id
        assert record is not None
        records.append(record)
    phone.sync()
    return records


def _content(db: Database, record_id: str) -> RecordContent:
    row = store.record_row(db, record_id)
    return store.open_version(db, store.version_row(db, record_id, int(row["current_version"])))


def _fts_rowids(db: Database, blinded: str) -> set[int]:
    return {
        r[0] for r in db.all("SELECT rowid FROM record_fts WHERE record_fts MATCH ?", (blinded,))
    }


def _derived(db: Database, record_id: str) -> dict[str, Any]:
    """What the derived tables hold for one record."""
    return {
        "subject": {
            r[0]
            for r in db.all(
                "SELECT subject_key FROM subject_index WHERE record_id = ?", (record_id,)
            )
        },
        "search": [
            tuple(r)
            for r in db.all("SELECT version FROM record_search WHERE record_id = ?", (record_id,))
        ],
        "vectors": db.one("SELECT count(*) FROM record_vectors WHERE record_id = ?", (record_id,))[
            0
        ],
    }


def _blinded_terms(db: Database, content: RecordContent) -> list[str]:
    """The record's blinded terms, computed the slow way (no cache)."""
    key = search.search_key(db)
    plain = lexical.terms(searchable_text(content)) + relation_terms(content)
    return lexical.blind_all(plain, key)


def test_a_caught_up_page_writes_every_derived_row_and_a_forget_leaves_none(
    make_agent: MakeAgent, cloud: FakeCloud
) -> None:
    records = _phone_with_records(make_agent, cloud)
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    report = laptop.sync()
    assert report.pulled == 3 * len(SENTENCES)  # one page: episodes, versions, states
    db = laptop._debug_db()
    terms: dict[str, list[str]] = {}
    for record_id, text in zip(records, SENTENCES, strict=True):
        content = _content(db, record_id)
        assert content.text == text
        rowid = db.one("SELECT rowid FROM records WHERE record_id = ?", (record_id,))[0]
        derived = _derived(db, record_id)
        assert derived["subject"] == set(
            subjects.stored_keys(content.text, content.subject, content.context_text)
        )
        assert derived["search"] == [(1,)] and derived["vectors"] == 1
        terms[record_id] = _blinded_terms(db, content)
        assert terms[record_id]
        assert all(rowid in _fts_rowids(db, t) for t in terms[record_id]), record_id
    gone = records[GONE]
    assert laptop.recall("Where did I grow up?")[0].record_id == gone
    needles = index_needles(db, SENTENCES[GONE], [gone])
    pages = decrypted_pages(laptop.db_path, PASSPHRASE)
    assert all(any(n in p for p in pages) for n in needles)  # positive control

    cloud.forget(gone)
    laptop.sync()

    assert _derived(db, gone) == {"subject": set(), "search": [], "vectors": 0}
    others = {t for r in records if r != gone for t in terms[r]}
    assert not any(_fts_rowids(db, t) for t in terms[gone] if t not in others)
    assert search.lexical_hits(db, "lighthouse Varnholm") == {}
    assert gone not in search.vector_index(db).ids()
    pages = decrypted_pages(laptop.db_path, PASSPHRASE)
    for secret in [*needles, b"Varnholm", b"varnholm", b"lighthouse"]:
        assert not any(secret in p for p in pages), secret
    for record_id in records:  # the others keep every row
        if record_id != gone:
            assert _derived(db, record_id)["vectors"] == 1


def test_a_record_forgotten_in_the_page_that_brought_it_gets_no_derived_row(
    make_agent: MakeAgent, cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    records = _phone_with_records(make_agent, cloud)
    gone = records[GONE]
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    real_pull = SyncSession._pull_page

    def one_page_brings_it_and_forgets_it(self: SyncSession, cursor: str | None) -> PullResponse:
        first = real_pull(self, cursor)
        if cursor is not None:
            return first
        cloud.forget(gone)  # lands after the page was read: the next page destroys it
        then = real_pull(self, first.cursor)
        return PullResponse(
            changes=[*first.changes, *then.changes], cursor=then.cursor, has_more=then.has_more
        )

    monkeypatch.setattr(SyncSession, "_pull_page", one_page_brings_it_and_forgets_it)
    report = laptop.sync()
    assert gone in report.shredded
    db = laptop._debug_db()
    assert _derived(db, gone) == {"subject": set(), "search": [], "vectors": 0}
    assert db.one("SELECT lifecycle FROM records WHERE record_id = ?", (gone,))[0] == (
        "permanently_forgotten"
    )
    for record_id in records:
        if record_id != gone:
            assert _derived(db, record_id)["vectors"] == 1
            assert _derived(db, record_id)["subject"]
    assert search.lexical_hits(db, "lighthouse Varnholm") == {}
    pages = decrypted_pages(laptop.db_path, PASSPHRASE)
    assert not any(b"Varnholm" in p or b"varnholm" in p for p in pages)


def test_a_catch_up_issues_a_bounded_number_of_statements_per_record(
    make_agent: MakeAgent, cloud: FakeCloud, monkeypatch: pytest.MonkeyPatch
) -> None:
    """47 statements per record before the page batched its derived rows (issue 21);
    about 17 after (22 here, with the sync's own statements over five records). A
    per-record write slipping back in shows here."""
    records = _phone_with_records(make_agent, cloud)
    laptop = _enrolled(make_agent, cloud, "laptop", 2)
    db = laptop._debug_db()
    counted: Counter[str] = Counter()
    for name in ("execute", "one", "all", "executemany"):
        real = getattr(db, name)

        def counting(sql: str, params: Any = (), _real: Any = real, _name: str = name) -> Any:
            if _name == "executemany":
                params = list(params)
                counted["statements"] += len(params)
            else:
                counted["statements"] += 1
            return _real(sql, params)

        monkeypatch.setattr(db, name, counting)
    laptop.sync()
    assert store.held_count(db) == len(records)
    per_record = counted["statements"] / len(records)
    assert per_record <= 26, per_record


def test_the_blinded_term_cache_gives_what_the_uncached_function_gives() -> None:
    key, other_key = bytes(range(32)), bytes(range(1, 33))
    blinder = search.Blinder(key)
    words = ["garden", "bike", "@person:odalys", "garden", "", "ünïcode", "garden"]
    assert [blinder.blind(w) for w in words] == [lexical.blind(w, key) for w in words]
    assert len(blinder) == len(set(words))  # each distinct term computed once
    assert search.Blinder(other_key).blind("garden") != blinder.blind("garden")
    content = RecordContent.model_validate(
        {
            "text": "My sister Odalys keeps bikes in the garden.",
            "source_episode_ids": ["ep_aaaaaaaa01"],
        }
    )
    expected = lexical.document(_blind_slowly(content, key))
    assert blinder.document(content) == expected == search.document_for(content, key)
    assert blinder.document(content) == expected  # served from the cache: the same


def _blind_slowly(content: RecordContent, key: bytes) -> list[str]:
    plain = lexical.terms(searchable_text(content)) + relation_terms(content)
    return lexical.blind_all(plain, key)


@settings(max_examples=60)
@given(st.lists(st.text(min_size=0, max_size=12), max_size=30), st.binary(min_size=32, max_size=32))
def test_a_shared_blinder_agrees_with_blind_for_any_terms(terms: list[str], key: bytes) -> None:
    blinder = search.Blinder(key)
    twice = terms + terms
    assert [blinder.blind(t) for t in twice] == [lexical.blind(t, key) for t in twice]
