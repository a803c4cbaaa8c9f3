"""Cloud retrieval (issue 4) on both record stores: the eight steps over a whole space,
indexes that only propose, lazy indexing, forgetting that leaves no index trace, walls.

The embedder is the real one ``make model`` builds (``cloud.embedder``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from cloud.config import CloudConfig
from cloud.effects import EffectWriter
from cloud.search import VECTOR_KIND, blinded_terms
from cloud.service import CloudService
from cloud.store.search import ts_any_of
from protocol.embedding import Embedder
from protocol.messages import RecallAnswer, RecallRequest
from protocol.model import (
    EpistemicState,
    LifeArea,
    LifecycleState,
    RecordContent,
    Sensitivity,
    SourceKind,
)
from protocol.retrieval import lexical, vectors
from protocol.retrieval.relations import relation_terms
from protocol.rules import CreateRecord
from tests.cloud.conftest import Device, Ops, applied, new_user, push

DULUTH = "I grew up in Duluth."
OTHERS = [
    "I drink my coffee iced.",
    "My sister lives in Oslo.",
    "I work as a nurse at the county hospital.",
    "We adopted two cats last spring.",
]


def tell(
    service: CloudService, ops: Ops, device: Device, n: int, sentence: str, **fields: Any
) -> str:
    """The user says ``sentence`` and asks to remember it; returns the record id."""
    record_id, episode_id = f"rec_{n:010d}", f"ep_{n:010d}"
    applied(
        push(
            service,
            device,
            ops.episode(episode_id, sentence),
            ops.remember(record_id, sentence, [episode_id], **fields),
        )
    )
    return record_id


def recall(
    service: CloudService, device: Device, query: str, *, index: bool = True, **kw: Any
) -> RecallAnswer:
    """Index what the pushes so far owe (``index``: the background indexer's work, done
    here so the test decides when), then ask as ``device`` and open the answer, sealed
    to that device's key."""
    if index:
        service.index_pending()
    sealed = service.recall(
        device.space_id, device.device_id, RecallRequest(query=query, **kw)
    ).sealed_answer
    return RecallAnswer.model_validate_json(device.open_key(sealed))


def ids(response: RecallAnswer) -> list[str]:
    return [line.record_id for line in response.lines]


def rows(service: CloudService, sql: str, **params: Any) -> list[Any]:
    with service.store.engine.connect() as conn:
        return list(conn.execute(text(sql), params).all())


def index_rows(service: CloudService, space_id: str, record_id: str) -> tuple[int, int]:
    where = "WHERE space_id = :sp AND record_id = :rid"
    lexical_rows = rows(
        service, f"SELECT version FROM record_search {where}", sp=space_id, rid=record_id
    )
    vector_rows = rows(
        service, f"SELECT version FROM record_vectors {where}", sp=space_id, rid=record_id
    )
    return len(lexical_rows), len(vector_rows)


@pytest.fixture
def ada(service: CloudService, ops: Ops) -> tuple[Device, dict[str, str]]:
    (phone,) = new_user(service, "ada", "phone")
    told = {s: tell(service, ops, phone, i, s) for i, s in enumerate([DULUTH, *OTHERS], 1)}
    return phone, told


# --- found by meaning and by word forms ---------------------------------------------------


def test_found_by_meaning_and_by_word_forms(
    service: CloudService, ada: tuple[Device, dict[str, str]]
) -> None:
    phone, told = ada
    duluth = told[DULUTH]
    answer = recall(service, phone, "Where did I grow up?")
    assert ids(answer)[0] == duluth
    first = answer.lines[0]
    assert first.text == DULUTH and first.epistemic_state is EpistemicState.SAID
    assert first.line.startswith('On 2026-03-01 at 09:00 you wrote: "I grew up in Duluth."')
    assert answer.scope == "cloud" and answer.factual is False
    assert f'you wrote: "{DULUTH}"' in answer.block and answer.block.startswith("<memory-data")
    assert ids(recall(service, phone, "childhood home town"))[0] == duluth
    space, retrieval, now = phone.space_id, service.retrieval, service.config.clock()
    # meaning alone (no lexical index): nothing shares a word with the query
    by_meaning = retrieval.recall(space, "childhood home town", now=now, lexical=False)
    assert [line.record_id for line in by_meaning.lines][:1] == [duluth]
    with service.store.session(space) as s:
        assert service.search.lexical_hits(s, space, "childhood home town") == {}
    # word forms alone (no vectors): grow, growing and grew share one stem
    for query in ("grow", "growing", "Where did I grow up?"):
        by_words = retrieval.recall(space, query, now=now, vector=False)
        assert [line.record_id for line in by_words.lines] == [duluth], query


def test_a_factual_question_leaves_opinions_out_and_personalization_off_reads_nothing(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    opinion = tell(service, ops, phone, 1, "Jazz is the best music.", content_type="opinion")
    nothing = recall(service, phone, "jazz", personalized=False, index=False)
    assert nothing.lines == [] and nothing.block == ""
    assert index_rows(service, phone.space_id, opinion) == (0, 0)  # a recall never indexes
    assert ids(recall(service, phone, "Do I like jazz music?")) == [opinion]
    factual = recall(service, phone, "What is jazz music?")
    assert factual.lines == [] and factual.factual is True


# --- the indexes only propose; authoritative state decides ---------------------------------


@dataclass
class Kind:
    name: str
    visible_with: dict[str, Any]  # a task under which the record may be returned


KINDS = [
    Kind("not_in_use", {}),
    Kind("candidate", {}),
    Kind("invalid", {}),
    Kind("restricted_to_another_area", {"area": LifeArea.WORK}),
    Kind("sensitive_without_consent", {"consents": [Sensitivity.HEALTH]}),
]


def _make(service: CloudService, ops: Ops, phone: Device, kind: str) -> str:
    sentence = "I play the piano every evening."
    if kind == "not_in_use":
        record = tell(service, ops, phone, 20, sentence)
        applied(push(service, phone, ops.simple("dont_use", record)))
    elif kind == "candidate":
        applied(push(service, phone, ops.episode("ep_0000000020", "A web page about pianos.")))
        record = "rec_0000000020"
        applied(
            push(
                service,
                phone,
                ops.infer(
                    record,
                    text=sentence,
                    source_kind="external_content",
                    source_episode_ids=["ep_0000000020"],
                ),
            )
        )
    elif kind == "invalid":
        # no operation makes a current version invalid; write one past the rules to show
        # that the pipeline, not the index, keeps it out
        record = "rec_0000000020"
        applied(push(service, phone, ops.episode("ep_0000000020", sentence)))
        content = RecordContent(
            text=sentence,
            epistemic_state=EpistemicState.INVALID,
            source_episode_ids=["ep_0000000020"],
            source_kind=SourceKind.USER_STATEMENT,
        )
        vault = service.vault.for_push()
        with service.store.session(phone.space_id, lock=True) as s:
            writer = EffectWriter(s, vault, phone.space_id, phone.device_id, service.config.clock())
            effect = CreateRecord(record, 1, LifecycleState.ACTIVE, content)
            writer.perform(None, effect)  # type: ignore[arg-type]
            writer.finish()
            vault.write_keys()
    elif kind == "restricted_to_another_area":
        record = tell(service, ops, phone, 20, sentence)
        applied(
            push(service, phone, ops.simple("restrict_usage", record, restriction={"area": "work"}))
        )
    else:
        record = tell(service, ops, phone, 20, sentence, sensitivity="health")
    return record


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_the_index_proposes_but_the_pipeline_never_returns(
    service: CloudService, ops: Ops, kind: Kind
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    tell(service, ops, phone, 1, DULUTH)
    record = _make(service, ops, phone, kind.name)
    space = phone.space_id
    assert service.index_catch_up(space) >= 1
    query = "Do I play the piano in the evening?"
    with service.store.session(space) as s:
        assert record in service.search.lexical_hits(s, space, query)
    assert record in service.search.vector_hits(space, query)
    for q in (query, "piano", "I play the piano every evening."):
        for limit in (1, 5, 50):
            assert record not in ids(recall(service, phone, q, limit=limit)), (q, limit)
    if kind.visible_with:  # the same record, under a task that may see it
        assert ids(recall(service, phone, query, **kind.visible_with))[:1] == [record]


def test_a_correction_is_reindexed_and_the_old_words_never_come_back(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    record = tell(service, ops, phone, 1, "My favorite color is blue.")
    space = phone.space_id
    assert index_rows(service, space, record) == (0, 0)  # a push indexes nothing
    assert ids(recall(service, phone, "blue")) == [record]
    assert rows(service, "SELECT version FROM record_search WHERE record_id = :r", r=record) == [
        (1,)
    ]
    sentence = "No. My favorite color is orange."
    applied(
        push(
            service,
            phone,
            ops.episode("ep_0000000002", sentence, "c2"),
            ops.correct(record, "My favorite color is orange.", ["ep_0000000002"], "c2"),
        )
    )
    with service.store.session(space) as s:  # the index still holds version 1 ...
        assert record in service.search.lexical_hits(s, space, "blue")
    answer = recall(service, phone, "What is my favorite color? blue")
    assert [line.text for line in answer.lines] == ["My favorite color is orange."]
    assert "blue" not in answer.block
    for table in ("record_search", "record_vectors"):  # ... until the query caught it up
        assert rows(service, f"SELECT version FROM {table} WHERE record_id = :r", r=record) == [
            (2,)
        ]
    with service.store.session(space) as s:
        assert service.search.lexical_hits(s, space, "blue") == {}


def test_conflicts_come_together_and_supersession_labels_outdated(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    berlin = tell(service, ops, phone, 1, "I live in Berlin.")
    applied(
        push(
            service,
            phone,
            ops.infer(
                "rec_0000000002",
                text="I live in Munich.",
                epistemic_state="observed",
                source_kind="connected_source",
                source_episode_ids=["ep_0000000001"],
            ),
        )
    )
    lines = recall(service, phone, "Berlin").lines
    assert [(line.record_id, line.conflict) for line in lines] == [
        (berlin, True),
        ("rec_0000000002", True),
    ]
    assert lines[1].pulled_in_by == berlin
    assert all("CONFLICT" in line.line for line in lines)
    iced = tell(service, ops, phone, 3, "I drink my coffee iced.")
    hot = tell(service, ops, phone, 4, "I drink my coffee hot now.")
    answer = recall(service, phone, "how do I drink my coffee")
    assert [(x.record_id, x.current, x.outdated, x.pulled_in_by) for x in answer.lines] == [
        (hot, True, False, None),
        (iced, False, True, hot),  # never a hit of its own, only beside its successor
    ]
    assert answer.lines[0].line.endswith("| CURRENT: replaces line 2 (said 2026-03-01 at 09:00)]")
    assert answer.lines[1].line.endswith("| OUTDATED: replaced by line 1]")
    assert lines[0].line.endswith("| CONFLICT: disagrees with line 2]")
    assert lines[1].line.endswith("| CONFLICT: disagrees with line 1]")
    applied(push(service, phone, ops.simple("dont_use", hot)))
    assert ids(recall(service, phone, "coffee")) == [iced]


ROME, TURIN, OSLO = "I live in Rome.", "I live in Turin now.", "Actually, we moved, it's Oslo now."


def test_an_outdated_records_words_find_its_current_statement(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    rome = tell(service, ops, phone, 1, ROME, subject="where I live")
    tell(service, ops, phone, 2, "My sister lives in Lisbon.")
    oslo = tell(service, ops, phone, 3, OSLO, subject="where I live")
    for query in ("Where do I live?", "Do I live in Rome?"):
        answer = recall(service, phone, query)
        assert [(x.record_id, x.current, x.outdated) for x in answer.lines][:2] == [
            (oslo, True, False),
            (rome, False, True),
        ], query
        assert answer.lines[0].line == (
            f'On 2026-03-01 at 09:00 you wrote: "{OSLO}"  [personal_fact | said | You told me | '
            "CURRENT: replaces line 2 (said 2026-03-01 at 09:00)]"
        )
        assert answer.lines[1].pulled_in_by == oslo
        assert answer.lines[1].line.endswith("| OUTDATED: replaced by line 1]")
        assert answer.lines[0].score > 0
    # the newest statement replaces both; the old words still find it, the others beside it
    turin = tell(service, ops, phone, 4, TURIN, subject="where I live")
    answer = recall(service, phone, "Do I live in Rome?", limit=1)
    assert [(x.record_id, x.current, x.outdated) for x in answer.lines] == [
        (turin, True, False),
        (rome, False, True),  # said at the same instant: in id order
        (oslo, False, True),
    ]
    assert answer.lines[0].line.endswith(
        "CURRENT: replaces line 2 (said 2026-03-01 at 09:00) and line 3 (said 2026-03-01 at 09:00)]"
    )
    # a successor not in use is never brought back: what it replaced stands again
    applied(push(service, phone, ops.simple("dont_use", turin)))
    lines = recall(service, phone, "Do I live in Rome?").lines
    assert turin not in [x.record_id for x in lines]
    assert [(x.record_id, x.outdated, x.current) for x in lines][:1] == [(rome, False, False)]


def test_the_cloud_index_holds_a_follow_ups_context_words(service: CloudService) -> None:
    (phone,) = new_user(service, "ada", "phone")
    key = service.vault.search_key(phone.space_id)
    content = RecordContent(
        text="No wait, it's on the 17th.",
        source_episode_ids=["ep_0000000001"],
        context_text="The school play is on the 7th.",
    )
    terms = set(blinded_terms(content, key))
    assert set(lexical.blind_all(lexical.terms("school play"), key)) <= terms
    bare = content.model_copy(update={"context_text": None})
    assert not set(lexical.blind_all(lexical.terms("school play"), key)) & set(
        blinded_terms(bare, key)
    )


# --- forgetting ---------------------------------------------------------------------------


def _shadow_bytes(service: CloudService) -> bytes:
    out = b""
    for table in ("record_fts_data", "record_fts_idx", "record_fts_content", "record_fts_docsize"):
        for row in rows(service, f"SELECT * FROM {table}"):
            for value in row:
                out += value if isinstance(value, bytes) else str(value).encode()
    return out


def _file_bytes(service: CloudService) -> bytes:
    path = Path(service.config.store_url.removeprefix("sqlite:///"))
    return b"".join(
        Path(f"{path}{suffix}").read_bytes()
        for suffix in ("", "-wal", "-journal")
        if Path(f"{path}{suffix}").exists()
    )


def test_forget_leaves_no_trace_in_any_index(
    service: CloudService, ada: tuple[Device, dict[str, str]], ops: Ops
) -> None:
    phone, told = ada
    space, duluth = phone.space_id, told[DULUTH]
    # something derived from it goes with it (the derivation closure)
    applied(
        push(
            service,
            phone,
            ops.infer(
                "rec_0000000009",
                text="Knows winters on Lake Superior.",
                source_episode_ids=["ep_0000000001"],
                derived_from=[duluth],
            ),
        )
    )
    assert ids(recall(service, phone, "Where did I grow up?"))[0] == duluth
    assert index_rows(service, space, duluth) == (1, 1)
    assert index_rows(service, space, "rec_0000000009") == (1, 1)
    assert duluth in service.search._cache[space].ids
    key = service.vault.search_key(space)
    content = RecordContent(text=DULUTH, source_episode_ids=["ep_0000000001"])
    plain = sorted(set(lexical.terms(DULUTH) + relation_terms(content)))
    assert plain == ["@episode:ep_0000000001", "@person:duluth", "duluth", "grow"]
    blinded = list(blinded_terms(content, key))
    tails = [term[-10:].encode() for term in blinded]
    sqlite = service.store.dialect == "sqlite"
    if sqlite:  # the check below can see them: they are there before the forget
        shadow = _shadow_bytes(service)
        assert all(tail in shadow for tail in tails)

    applied(push(service, phone, ops.forget(duluth)))

    for query in ("Where did I grow up?", "childhood home town", "Duluth", DULUTH, "grow"):
        answer = recall(service, phone, query)
        assert duluth not in ids(answer) and "rec_0000000009" not in ids(answer), query
        assert "Duluth" not in answer.block and "Superior" not in answer.block
    for record in (duluth, "rec_0000000009"):
        assert index_rows(service, space, record) == (0, 0)
    with service.store.session(space) as s:
        assert s.lexical_matches(space, blinded, 50) == {}
        for term in blinded:
            assert s.records_with_term(space, term, 50) == []
    assert duluth not in service.search._cache[space].ids  # pruned after the push
    assert service.index_catch_up(space) == 0  # and never indexed again
    if sqlite:
        shadow = _shadow_bytes(service)
        assert not [tail for tail in tails if tail in shadow]
        assert not [tail for tail in tails if tail in _file_bytes(service)]
    else:
        found = rows(
            service,
            "SELECT record_id FROM record_search WHERE terms @@ to_tsquery('simple', :q)",
            q=ts_any_of(blinded),
        )
        assert found == []
    assert not [b for b in service.store.audit_blobs() if "duluth" in str(b).lower()]


def test_a_corrected_record_forgotten_takes_every_versions_terms_along(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    record = tell(service, ops, phone, 1, "My favorite color is turquoise.")
    assert ids(recall(service, phone, "turquoise")) == [record]  # indexed at version 1
    sentence = "No. My favorite color is vermilion."
    applied(
        push(
            service,
            phone,
            ops.episode("ep_0000000002", sentence, "c2"),
            ops.correct(record, "My favorite color is vermilion.", ["ep_0000000002"], "c2"),
        )
    )
    assert ids(recall(service, phone, "vermilion")) == [record]  # re-indexed at version 2
    key = service.vault.search_key(phone.space_id)
    tails = [lexical.blind(t, key)[-10:].encode() for t in lexical.terms("turquoise vermilion")]
    applied(push(service, phone, ops.forget(record)))
    assert index_rows(service, phone.space_id, record) == (0, 0)
    assert recall(service, phone, "turquoise vermilion color").lines == []
    if service.store.dialect == "sqlite":
        assert not [t for t in tails if t in _shadow_bytes(service)]
        assert not [t for t in tails if t in _file_bytes(service)]


def test_vectors_are_sealed_with_the_version_key(
    service: CloudService, ada: tuple[Device, dict[str, str]], ops: Ops
) -> None:
    phone, told = ada
    space, duluth = phone.space_id, told[DULUTH]
    service.index_catch_up(space)
    ((model_id, sealed, key_id),) = rows(
        service,
        "SELECT v.model_id, v.sealed, rv.key_id FROM record_vectors v JOIN record_versions rv "
        "ON rv.space_id = v.space_id AND rv.record_id = v.record_id AND rv.version = v.version "
        "WHERE v.space_id = :sp AND v.record_id = :r",
        sp=space,
        r=duluth,
    )
    assert model_id == service.search.embedder().model_id
    with service.store.session(space) as s:
        dek = service.vault.data_keys(s, space, [key_id])[key_id]
    packed = service.vault.open_derived(dek, space, VECTOR_KIND, duluth, 1, bytes(sealed))
    stored = vectors.unpack(packed, len(packed) - 4)
    fresh = service.search.embedder().embed([DULUTH])[0]
    assert float(stored @ fresh) > 0.99
    with pytest.raises(Exception, match="does not open"):  # bound to kind, id and version
        service.vault.open_derived(dek, space, "record", duluth, 1, bytes(sealed))
    applied(push(service, phone, ops.forget(duluth)))
    with service.store.session(space) as s:
        assert service.vault.data_keys(s, space, [key_id]) == {}
    assert service.key_store.existing([key_id]) == set()


def test_a_new_model_reindexes_and_old_vectors_are_never_searched(
    ada: tuple[Device, dict[str, str]], service: CloudService
) -> None:
    phone, told = ada
    space = phone.space_id
    assert service.index_catch_up(space) == len(told)
    real = service.search.embedder()

    class Other:
        model_id = "other-model@000000000000"

        def embed(self, texts: list[str]) -> Any:
            return real.embed(texts)

    other: Any = Other()
    service.search._embedder = lambda: other
    with service.store.session(space) as s:
        assert s.vector_listing(space, other.model_id) == []
        assert len(s.stale_for_search(space, other.model_id)) == len(told)
    assert service.search.vector_hits(space, "Where did I grow up?") == {}  # none of its model
    assert ids(recall(service, phone, "Where did I grow up?"))[0] == told[DULUTH]
    models = {r[0] for r in rows(service, "SELECT model_id FROM record_vectors")}
    assert models == {other.model_id}
    assert isinstance(real, Embedder)


# --- walls ----------------------------------------------------------------------------------


def test_spaces_are_walls(service: CloudService, ops: Ops) -> None:
    (a,) = new_user(service, "ada", "phone")
    (b,) = new_user(service, "bob", "phone")
    mine = tell(service, ops, a, 1, DULUTH)
    theirs = tell(service, ops, b, 2, DULUTH)
    tell(service, ops, b, 3, "I drink my coffee iced.")
    for query in ("Where did I grow up?", "Duluth", "coffee", DULUTH):
        assert set(ids(recall(service, a, query))) <= {mine}, query
        assert theirs not in ids(recall(service, a, query, limit=50))
    assert ids(recall(service, b, "Where did I grow up?")) == [theirs]
    with service.store.session(a.space_id) as s:
        assert set(service.search.lexical_hits(s, a.space_id, DULUTH)) == {mine}
    assert set(service.search.vector_hits(a.space_id, DULUTH)) == {mine}
    assert service.vault.search_key(a.space_id) != service.vault.search_key(b.space_id)
    # the same record id in another space names another record
    (c,) = new_user(service, "cyd", "phone")
    lagos = tell(service, ops, c, 1, "I was born in Lagos.")
    assert lagos == mine
    assert [line.text for line in recall(service, c, "Where was I born?").lines] == [
        "I was born in Lagos."
    ]
    assert recall(service, c, "Duluth").lines == []
    assert all("Lagos" not in line.text for line in recall(service, a, "Lagos born").lines)


def test_the_search_key_is_its_own_wrapped_key_and_survives_a_restart(
    config: CloudConfig, service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    space = phone.space_id
    key = service.vault.search_key(space)
    assert len(key) == 32 and key != service.key_store.index_key(space)
    wrapped = service.key_store._db.execute(
        "SELECT wrapped FROM search_keys WHERE space_id = ?", (space,)
    ).fetchone()[0]
    assert key not in wrapped
    record = tell(service, ops, phone, 1, DULUTH)
    assert ids(recall(service, phone, "Duluth")) == [record]
    service.close()
    again = CloudService(config)
    try:
        assert again.vault.search_key(space) == key
        assert ids(recall(again, phone, "Duluth")) == [record]
    finally:
        again.close()


def test_recall_needs_an_enrolled_device(service: CloudService) -> None:
    (a,) = new_user(service, "ada", "phone")
    (b,) = new_user(service, "bob", "phone")
    from cloud.errors import Unauthorized

    with pytest.raises(Unauthorized):
        service.recall(a.space_id, b.device_id, RecallRequest(query="anything"))
    assert json.loads(RecallRequest(query="x").model_dump_json())["limit"] == 5
    assert recall(service, a, "anything").lines == []  # an empty space answers nothing


def test_related_records_share_a_person_or_a_source_episode(
    service: CloudService, ops: Ops
) -> None:
    (phone,) = new_user(service, "ada", "phone")
    oslo = tell(service, ops, phone, 1, "My friend Maya lives in Oslo.")
    cello = tell(service, ops, phone, 2, "Maya plays the cello.")
    tell(service, ops, phone, 3, "I drink my coffee iced.")
    both = "I like tea. Maya visits in June."
    applied(push(service, phone, ops.episode("ep_0000000004", both)))
    tea = "rec_0000000004"
    applied(push(service, phone, ops.remember(tea, "I like tea.", ["ep_0000000004"])))
    june = "rec_0000000005"
    applied(push(service, phone, ops.remember(june, "Maya visits in June.", ["ep_0000000004"])))
    space = phone.space_id
    service.index_catch_up(space)
    contents = {
        oslo: RecordContent(
            text="My friend Maya lives in Oslo.", source_episode_ids=["ep_0000000001"]
        ),
        tea: RecordContent(text="I like tea.", source_episode_ids=["ep_0000000004"]),
    }
    with service.store.session(space) as s:
        related = service.search.related(s, space, contents)
        key = service.vault.search_key(space)
        one_by_one = {
            term: s.records_with_term(space, lexical.blind(term, key), 20)
            for c in contents.values()
            for term in relation_terms(c)
        }
    assert sorted(related[oslo]) == sorted([(cello, "person"), (june, "person")])
    assert related[tea] == [(june, "episode")]
    for c in contents.values():
        for term in relation_terms(c):
            assert set(one_by_one[term]) <= {oslo, cello, tea, june}
    assert one_by_one["@person:maya"] == sorted([oslo, cello, june])
