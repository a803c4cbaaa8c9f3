"""Issue 20's evaluation set (bench/retrieval_data) is what it claims to be: at least 400
statements by at least six people over at least six months, at least 400 queries of
every kind in both halves, corrections and every time kind present; and the loader
refuses a broken file, naming the offending id and the reason."""

from __future__ import annotations

from collections import Counter
from datetime import date, timedelta

import pytest

from bench import quality_data
from bench.quality_data import HALVES, KINDS, TIME_KINDS


def test_the_set_is_large_varied_and_spread_over_months() -> None:
    people = quality_data.load()
    statements = [s for p in people for s in p.statements]
    queries = [q for p in people for q in p.queries]
    assert len(people) >= 6 and len(statements) >= 400 and len(queries) >= 400
    first = min(s.said_at for s in statements)
    last = max(s.said_at for s in statements)
    assert last - first >= timedelta(days=180)
    assert len({s.text for s in statements}) == len(statements)  # no sentence twice
    assert {s.time_kind for s in statements} == set(TIME_KINDS)
    assert sum(s.corrects is not None for s in statements) >= 2 * len(people)
    for p in people:
        assert all(p.asked_at > s.said_at for s in p.statements), p.name
        assert {s.id for s in p.statements} >= {i for q in p.queries for i in q.relevant}


def test_the_halves_are_by_person_and_each_holds_every_kind() -> None:
    people = quality_data.load()
    halves = quality_data.split(people)
    assert set(halves) == set(HALVES)
    names = [{p.name for p in halves[h]} for h in HALVES]
    assert not names[0] & names[1] and names[0] | names[1] == {p.name for p in people}
    for h in HALVES:
        kinds = Counter(q.kind for p in halves[h] for q in p.queries)
        assert set(kinds) == set(KINDS), h
        assert min(kinds.values()) >= 20, (h, kinds)
        multi = [q for p in halves[h] for q in p.queries if q.kind == "multi"]
        assert sum(len(q.relevant) > 1 for q in multi) >= 20, h


def _raw(**changes: object) -> dict[str, object]:
    raw: dict[str, object] = {
        "person": "x",
        "asked_on": date(2026, 8, 1),
        "statements": [
            ["x1", date(2026, 1, 1), "permanent", "I live in Lisbon."],
            ["x2", date(2026, 2, 1), "fix:x1", "Actually I moved to Porto."],
        ],
        "queries": [["para", "Where is home?", ["x2"]], ["none", "My dog?", []]],
    }
    raw.update(changes)
    return raw


def test_a_well_formed_file_loads_with_the_correction_on_the_same_record() -> None:
    person = quality_data.parse("x", _raw())
    assert person.statements[1].corrects == "x1"
    assert person.statements[1].time_kind == "permanent"
    assert [q.id for q in person.queries] == ["x-q01", "x-q02"]


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"queries": [["para", "Where do I live?", ["x1"]]]}, "x1.*corrected later"),
        ({"queries": [["para", "Where?", ["x9"]]]}, "x9.*not a statement"),
        ({"queries": [["none", "Where?", ["x2"]]]}, "no-answer"),
        ({"queries": [["odd", "Where?", ["x2"]]]}, "unknown query kind"),
        ({"asked_on": date(2026, 1, 15)}, "asked before"),
        (
            {"statements": [["x1", date(2026, 1, 1), "fix:x0", "I live in Lisbon."]]},
            "x1.*corrects x0",
        ),
        (
            {"statements": [["x1", date(2026, 1, 1), "forever", "I live in Lisbon."]]},
            "x1.*unknown time kind",
        ),
    ],
)
def test_a_broken_file_is_refused_naming_the_id_and_reason(
    changes: dict[str, object], reason: str
) -> None:
    with pytest.raises(ValueError, match=reason):
        quality_data.parse("x", _raw(**changes))
