"""The hand-written retrieval evaluation set (tests/data/retrieval_eval.json) stays valid.

The set measures recall@1, recall@3 and MRR for lexical-only, vector-only and hybrid
recall, so it must keep the cases each method alone gets wrong: paraphrases with no
shared content word, other word forms, questions against statements, near-identical
records told apart by a name or number, corrected records and area distractors.
These tests check the file's shape and the authoring rules; the quality of the
sentences themselves is a matter for review.
"""

from __future__ import annotations

import json
from pathlib import Path

PATH = Path(__file__).resolve().parents[1] / "data" / "retrieval_eval.json"
DATA = json.loads(PATH.read_text(encoding="utf-8"))
RECORDS: list[dict] = DATA["records"]
QUERIES: list[dict] = DATA["queries"]
BY_KEY = {r["key"]: r for r in RECORDS}

CONTENT_TYPES = {
    "preference",
    "routine",
    "goal",
    "constraint",
    "relationship",
    "personal_fact",
    "opinion",
    "event",
}
TASK_AREAS = {
    "work",
    "health",
    "finance",
    "relationships",
    "home",
    "travel",
    "shopping",
    "learning",
    "leisure",
}
LIFE_AREAS = TASK_AREAS | {"general"}
KINDS = {
    "paraphrase",
    "word_form",
    "question_vs_statement",
    "name_or_number",
    "correction",
    "distractor_area",
    "mixed",
}
MEASURED_KINDS = KINDS - {"mixed"}
FIRST_PERSON = {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"}
OPINION_CUES = {"think", "feel", "view", "opinion", "believe", "stance"}
STOPWORDS = set(
    """a an the i me my mine myself we us our ours you your it its is are was were be been am
    do does did have has had to of in on at for with and or but not no so if from by as about
    what where when who whom whose which why how that this these those there here any some
    can could should would will may might must s t m d ve ll re don didn doesn isn aren
    into than then too very just up out""".split()
)


def words(text: str) -> list[str]:
    """Lower-cased runs of letters and digits; apostrophes and hyphens split words."""
    return "".join(c.lower() if c.isalnum() else " " for c in text).split()


def content_words(text: str) -> set[str]:
    return {w for w in words(text) if w not in STOPWORDS}


def current_text(record: dict) -> str:
    """A corrected record's current text is its correction."""
    return record["corrected_to"] or record["text"]


def sentence_problems(text: object) -> list[str]:
    if not isinstance(text, str):
        return ["not a string"]
    problems = []
    if text != text.strip() or not text:
        problems.append("empty or surrounded by whitespace")
    if "\n" in text or "\r" in text:
        problems.append("holds a newline")
    if len(text) > 200:
        problems.append("longer than 200 characters")
    if not text.endswith((".", "!")):
        problems.append("does not end with . or !")
    if '"' in text:
        problems.append("holds a double quote")
    if "?" in text:
        problems.append("holds a question mark")
    inner = text[:-1]
    if any(inner[i] in ".!" and inner[i + 1].isspace() for i in range(len(inner) - 1)):
        problems.append("holds more than one sentence")
    if not FIRST_PERSON & set(words(text)):
        problems.append("is not in the first person")
    return problems


def test_top_level_shape() -> None:
    assert set(DATA) == {"schema", "description", "records", "queries"}
    assert DATA["schema"] == "memsync-retrieval-eval/1"
    assert isinstance(DATA["description"], str) and DATA["description"].strip()
    assert len(RECORDS) >= 320
    assert len(QUERIES) >= 230


def test_record_fields_and_keys() -> None:
    keys = [r["key"] for r in RECORDS]
    assert len(keys) == len(set(keys))
    for r in RECORDS:
        assert set(r) == {"key", "text", "content_type", "life_areas", "corrected_to"}, r
        key = r["key"]
        assert len(key) == 5 and key[0] == "r" and key[1:].isdigit(), key


def test_record_sentences_follow_the_rules() -> None:
    bad = {}
    for r in RECORDS:
        for field in ("text", "corrected_to"):
            if field == "corrected_to" and r[field] is None:
                continue
            problems = sentence_problems(r[field])
            if problems:
                bad[f"{r['key']}.{field}: {r[field]!r}"] = problems
    assert not bad, bad


def test_texts_are_unique() -> None:
    texts = [r["text"] for r in RECORDS]
    texts += [r["corrected_to"] for r in RECORDS if r["corrected_to"] is not None]
    lowered = [t.lower() for t in texts]
    assert len(lowered) == len(set(lowered))
    assert all(r["corrected_to"] != r["text"] for r in RECORDS)


def test_content_types_are_valid_and_all_used() -> None:
    used = {r["content_type"] for r in RECORDS}
    assert used <= CONTENT_TYPES
    assert used == CONTENT_TYPES


def test_life_areas_are_valid_and_spread() -> None:
    counts = dict.fromkeys(LIFE_AREAS, 0)
    for r in RECORDS:
        areas = r["life_areas"]
        assert isinstance(areas, list) and areas, r
        assert len(areas) == len(set(areas)), r
        assert set(areas) <= LIFE_AREAS, r
        for area in areas:
            counts[area] += 1
    assert all(n >= 10 for n in counts.values()), counts


def test_query_fields_ids_and_relevant_keys() -> None:
    ids = [q["id"] for q in QUERIES]
    assert len(ids) == len(set(ids))
    texts = [q["query"].lower() for q in QUERIES]
    assert len(texts) == len(set(texts))
    for q in QUERIES:
        assert set(q) == {"id", "query", "relevant", "area", "kind"}, q
        qid = q["id"]
        assert len(qid) == 5 and qid[0] == "q" and qid[1:].isdigit(), qid
        text = q["query"]
        assert isinstance(text, str) and text.strip() == text and text.endswith("?"), q
        assert "\n" not in text and '"' not in text, q
        rel = q["relevant"]
        assert isinstance(rel, list) and 1 <= len(rel) <= 2, q
        assert len(rel) == len(set(rel)), q
        assert all(k in BY_KEY for k in rel), q
        assert q["kind"] in KINDS, q
        assert q["area"] is None or q["area"] in TASK_AREAS, q


def test_area_queries_point_into_their_area() -> None:
    for q in QUERIES:
        if q["area"] is None:
            continue
        for key in q["relevant"]:
            areas = BY_KEY[key]["life_areas"]
            assert q["area"] in areas or "general" in areas, q


def test_kind_counts() -> None:
    counts = dict.fromkeys(KINDS, 0)
    for q in QUERIES:
        counts[q["kind"]] += 1
    assert all(counts[kind] >= 25 for kind in MEASURED_KINDS), counts
    share = counts["name_or_number"] / len(QUERIES)
    assert 0.20 <= share <= 0.25, share


def test_paraphrases_share_no_content_word() -> None:
    clean = 0
    for q in QUERIES:
        if q["kind"] != "paraphrase":
            continue
        query_words = content_words(q["query"])
        if all(not query_words & content_words(current_text(BY_KEY[k])) for k in q["relevant"]):
            clean += 1
    assert clean >= 25, clean


def test_correction_queries_ask_about_corrected_records() -> None:
    corrected = [r for r in RECORDS if r["corrected_to"] is not None]
    assert len(corrected) >= 25
    for q in QUERIES:
        if q["kind"] == "correction":
            assert all(BY_KEY[k]["corrected_to"] is not None for k in q["relevant"]), q


def test_distractor_area_queries_have_an_out_of_area_lookalike() -> None:
    """The relevant record is in the query's area; some record outside it (and not
    general) shares a word stem with the query, so only the area filter separates them."""

    def stems(text: str) -> set[str]:
        return {w[:5] for w in content_words(text)}

    for q in QUERIES:
        if q["kind"] != "distractor_area":
            continue
        area = q["area"]
        assert area is not None, q
        assert all(area in BY_KEY[k]["life_areas"] for k in q["relevant"]), q
        outside = [
            r for r in RECORDS if area not in r["life_areas"] and "general" not in r["life_areas"]
        ]
        query_stems = stems(q["query"])
        assert any(query_stems & stems(current_text(r)) for r in outside), q


def test_about_thirty_percent_pure_distractors_on_shared_areas() -> None:
    relevant = {k for q in QUERIES for k in q["relevant"]}
    pure = [r for r in RECORDS if r["key"] not in relevant]
    share = len(pure) / len(RECORDS)
    assert 0.25 <= share <= 0.35, share
    relevant_areas = {a for k in relevant for a in BY_KEY[k]["life_areas"]}
    pure_areas = {a for r in pure for a in r["life_areas"]}
    assert pure_areas <= relevant_areas
    assert pure_areas >= TASK_AREAS


def test_opinion_queries_ask_for_an_opinion() -> None:
    """A separate filter drops opinions from factual questions, so a query whose answer
    is an opinion must ask what the user thinks or feels."""
    for q in QUERIES:
        if any(BY_KEY[k]["content_type"] == "opinion" for k in q["relevant"]):
            assert OPINION_CUES & set(words(q["query"])), q
