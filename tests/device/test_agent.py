"""Local operations of the offline core: say, remember (verbatim check), recall with
re-checks, list, and permanent forget (shredding)."""

from __future__ import annotations

import contextlib
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from device import search, store
from device.agent import DeviceAgent
from device.errors import InvalidOperation, Refused
from protocol.retrieval import lexical
from tests.device.conftest import PASSPHRASE, MakeAgent, TickingClock, seeded
from tests.device.sqlcipher_pages import decrypted_pages

TYPED = "My favorite number is not 1729. I grew up in Duluth."


def snapshot(agent: DeviceAgent) -> dict[str, Any]:
    db = agent._debug_db()
    tables = [
        "records", "record_versions", "episodes", "data_keys", "record_search",
        "record_vectors", "search_state", "op_queue", "receipts", "forgotten_episodes",
        "shred_permits",
    ]  # fmt: skip
    return {t: [tuple(r) for r in db.all(f"SELECT * FROM {t} ORDER BY 1")] for t in tables}


def test_say_and_remember(make_agent: MakeAgent) -> None:
    agent = make_agent()
    said = agent.say_detected(TYPED, "conv-1")
    episode = said.episode_id
    assert episode.startswith("ep_")
    marks = ["mark_candidate"] * len(said.candidates)  # the detector's verdicts, no text
    result = agent.remember("I grew up in Duluth.", "conv-1")
    assert result.record_id.startswith("rec_") and result.sync_state == "pending"
    [view] = agent.list_records()
    assert (view.record_id, view.text, view.epistemic_state, view.lifecycle, view.sync_state) == (
        result.record_id, "I grew up in Duluth.", "said", "active", "pending",
    )  # fmt: skip
    assert agent.pending_ops() == 2 + len(marks)
    queued = agent._debug_db().all("SELECT kind, op_json FROM op_queue ORDER BY seq")
    assert [q["kind"] for q in queued] == ["add_episode", *marks, "remember"]
    for q in queued:  # the text lives only in the sealed row
        assert "Duluth" not in q["op_json"] and "text" not in json.loads(q["op_json"])
    assert json.loads(queued[-1]["op_json"])["source_episode_ids"] == [episode]


def test_fragment_is_refused_and_nothing_changes(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(TYPED, "conv-1")
    before = snapshot(agent)
    with pytest.raises(Refused) as caught:
        agent.remember("1729", "conv-1")
    assert caught.value.code == "not_said"
    assert "'1729' is only a fragment" in caught.value.reason
    assert "My favorite number is not 1729." in caught.value.reason
    assert snapshot(agent) == before


@pytest.mark.parametrize(
    ("text", "conversation", "expected"),
    [
        ("I was raised in Duluth.", "conv-1", "not a sentence the user typed"),
        ("I grew up in Duluth.", "conv-2", "nothing typed in conversation 'conv-2'"),
        ("My favorite number is not 1729. I grew up in Duluth.", "conv-1", "more than one"),
    ],
)
def test_paraphrase_other_conversation_and_two_sentences_refused(
    make_agent: MakeAgent, text: str, conversation: str, expected: str
) -> None:
    agent = make_agent()
    agent.say(TYPED, "conv-1")
    before = snapshot(agent)
    with pytest.raises(Refused, match=expected):
        agent.remember(text, conversation)
    assert snapshot(agent) == before


def test_invalid_input_names_the_problem(make_agent: MakeAgent) -> None:
    agent = make_agent()
    with pytest.raises(InvalidOperation, match=r"episode ep_\w+ is invalid.*conversation_id"):
        agent.say("hello.", "bad conversation id!")
    with pytest.raises(InvalidOperation, match="record_id"):
        agent.forget_permanently("not-a-record")
    assert agent.pending_ops() == 0


def test_recall_by_word_with_dated_quote(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(TYPED, "conv-1")
    agent.say("The dog is called Biscuit.", "conv-1")
    duluth = agent.remember("I grew up in Duluth.", "conv-1").record_id
    agent.remember("The dog is called Biscuit.", "conv-1")
    [hit] = agent.recall("Where did I grow up? duluth")
    assert hit.record_id == duluth and hit.epistemic_state == "said"
    assert hit.line == (
        'On 2026-03-01 at 09:30 you wrote: "I grew up in Duluth."  '
        "[personal_fact | said | You told me]"
    )
    assert agent.recall("nothing matches this") == []
    assert agent.recall("the I") == []  # stop words alone match nothing
    both = "Duluth Biscuit"
    assert len(agent.recall(both, limit=2)) == 2 and len(agent.recall(both, limit=1)) == 1


def test_recall_rechecks_authoritative_state(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(TYPED, "conv-1")
    record = agent.remember("I grew up in Duluth.", "conv-1").record_id
    assert agent.recall("duluth")
    db = agent._debug_db()
    content = store.open_version(db, store.version_row(db, record, 1))
    vector = db.one("SELECT * FROM record_vectors WHERE record_id = ?", (record,))
    agent.forget_permanently(record)
    assert db.one("SELECT 1 FROM record_vectors WHERE record_id = ?", (record,)) is None
    with db.atomic():  # stale index rows left behind by some bug: both indexes propose it
        rowid = db.one("SELECT rowid FROM records WHERE record_id = ?", (record,))[0]
        db.execute(
            "INSERT INTO record_fts (rowid, terms) VALUES (?, ?)",
            (rowid, search.document_for(content, search.search_key(db))),
        )
        db.execute("INSERT INTO record_vectors VALUES (?, ?, ?, ?)", tuple(vector))
        db.execute("UPDATE search_state SET generation = generation + 1")
    assert record in search.lexical_hits(db, "Where did I grow up in Duluth?")
    assert record in search.vector_hits(db, "Where did I grow up in Duluth?")
    assert agent.recall("Where did I grow up in Duluth?") == []
    # and a record the cloud refused is not recalled either
    agent.say("I like tea.", "conv-2")
    tea = agent.remember("I like tea.", "conv-2").record_id
    assert [h.record_id for h in agent.recall("tea")] == [tea]
    with db.atomic():
        db.execute("UPDATE records SET sync_state = 'refused' WHERE record_id = ?", (tea,))
    assert agent.recall("tea") == []


def test_forget_shreds_keys_text_and_queued_ops(make_agent: MakeAgent) -> None:
    agent = make_agent()
    agent.say(TYPED, "conv-1")
    agent.say("Keep this other one.", "conv-1")
    record = agent.remember("I grew up in Duluth.", "conv-1").record_id
    other = agent.remember("Keep this other one.", "conv-1").record_id
    deks = agent.data_keys_for(record)
    assert len(deks) == 2  # the version's key and its source episode's key
    db = agent._debug_db()
    key = search.search_key(db)
    # derived data: the blinded index terms (FTS5 stores a term after the prefix it
    # shares with the previous one, so look for its tail) and the stored vector
    derived = [lexical.blind(t, key)[3:].encode() for t in lexical.terms("grew Duluth")]
    derived.append(db.one("SELECT vector FROM record_vectors WHERE record_id = ?", (record,))[0])
    pages = decrypted_pages(agent.db_path, PASSPHRASE)
    for secret in [*deks, *derived]:  # positive control
        assert any(secret in p for p in pages), secret

    result = agent.forget_permanently(record)

    assert result.forgotten_at == agent.list_records()[0].forgotten_at
    assert agent.data_keys_for(record) == []
    [skeleton, kept] = agent.list_records()
    assert skeleton.is_skeleton and skeleton.text is None and skeleton.record_id == record
    assert skeleton.lifecycle_state.value == "permanently_forgotten"
    assert kept.record_id == other and kept.text == "Keep this other one."
    queued = agent._debug_db().all("SELECT kind, record_id FROM op_queue ORDER BY seq")
    assert [(q["kind"], q["record_id"]) for q in queued] == [
        ("add_episode", None),  # the other episode
        ("remember", other),
        ("forget_permanently", record),
    ]
    assert agent.db_path.with_name("device.db-wal").stat().st_size == 0  # checkpointed
    pages = decrypted_pages(agent.db_path, PASSPHRASE)
    for secret in [*deks, *derived, b"duluth", b"Duluth", b"1729"]:
        assert not any(secret in p for p in pages), secret
    assert db.one("SELECT count(*) FROM record_search WHERE record_id = ?", (record,))[0] == 0
    with pytest.raises(Refused, match="permanently forgotten") as caught:
        agent.forget_permanently(record)
    assert caught.value.code == "forgotten"
    with pytest.raises(Refused) as unknown:
        agent.forget_permanently("rec_" + "a" * 26)
    assert unknown.value.code == "unknown_record"
    # the forgotten episode's words no longer back a "said" record
    with pytest.raises(Refused):
        agent.remember("I grew up in Duluth.", "conv-1")


def test_reopen_keeps_state(make_agent: MakeAgent) -> None:
    agent = make_agent()
    marks = len(agent.say_detected(TYPED, "conv-1").candidates)
    record = agent.remember("I grew up in Duluth.", "conv-1").record_id
    agent.close()
    again = DeviceAgent.open(agent.directory, PASSPHRASE, clock=TickingClock())
    assert [v.record_id for v in again.list_records()] == [record]
    assert again.pending_ops() == 2 + marks
    again.close()


# --- property: a forgotten record's content is unreadable on the device ----------------

WORDS = ["amber", "birch", "cobalt", "delta", "ember", "fjord", "garnet", "harbor"]

step = st.one_of(
    st.tuples(st.just("say"), st.integers(0, 7), st.integers(0, 1)),
    st.tuples(st.just("remember"), st.integers(0, 7), st.integers(0, 1)),
    st.tuples(st.just("forget"), st.integers(0, 7), st.integers(0, 1)),
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(steps=st.lists(step, min_size=1, max_size=12))
def test_forgotten_content_never_readable(steps: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        agent = DeviceAgent.create(
            Path(tmp), PASSPHRASE, device_name="p", clock=TickingClock(), random_bytes=seeded(3)
        )
        records: dict[int, str] = {}
        forgotten: dict[str, tuple[str, list[bytes]]] = {}
        gone: set[int] = set()  # sentences forgotten; typing them again would be new words
        for action, n, conv in steps:
            sentence = f"Marker {WORDS[n]}zz{n} is here."
            if n in gone:
                continue
            if action == "say":
                agent.say(sentence, f"c{conv}")
            elif action == "remember" and n not in records:  # one record per sentence
                with contextlib.suppress(Refused):
                    records[n] = agent.remember(sentence, f"c{conv}").record_id
            elif n in records:
                gone.add(n)
                rid = records[n]
                forgotten[rid] = (f"{WORDS[n]}zz{n}", agent.data_keys_for(rid))
                agent.forget_permanently(rid)
        for rid, (word, _) in forgotten.items():
            assert not any(h.record_id == rid for h in agent.recall(word))
            assert agent.data_keys_for(rid) == []
            assert all(v.text is None for v in agent.list_records() if v.record_id == rid)
        agent.close()  # closing checkpoints the WAL into the file we scan
        pages = decrypted_pages(Path(tmp) / "device.db", PASSPHRASE)
        for rid, (word, deks) in forgotten.items():
            for secret in [word.encode(), *deks]:
                assert not any(secret in p for p in pages), (rid, secret)
