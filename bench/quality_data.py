"""The hand-written retrieval evaluation set of issue 20 (bench/retrieval_data/*.yaml).

Invariants:
- Each file is one imagined person: statements said at their dates (a device clock is
  set to each), queries asked on ``asked_on``, after every statement.
- A statement's kind is a time kind, or ``fix:<id>``: a correction of an earlier
  statement (the same record, new words). A query may name only statements that are
  current when it is asked: a statement later corrected is never relevant (its old
  value presented as current is a wrong answer). An empty list: nothing is relevant,
  the right answer is empty.
- The split is by person, fixed before any tuning (``half_of``): in alphabetical order,
  the 1st, 3rd, 5th, ... person is tuning, the others test. Loading fails, naming the
  offending id and the reason, on any broken rule above.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parent / "retrieval_data"
KINDS = ("para", "infl", "qvs", "name", "indi", "multi", "none")
KIND_NAMES = {
    "para": "paraphrase, no shared word",
    "infl": "inflection",
    "qvs": "question vs statement",
    "name": "names and numbers",
    "indi": "indirect question",
    "multi": "multi-record answer",
    "none": "no answer",
}
TIME_KINDS = ("permanent", "for_now", "past", "one_off")
HALVES = ("tuning", "test")


@dataclass(frozen=True, slots=True, kw_only=True)
class Statement:
    id: str
    said_at: datetime
    time_kind: str  # for a correction: the corrected record's kind
    text: str
    corrects: str | None  # the statement whose record this one corrects


@dataclass(frozen=True, slots=True, kw_only=True)
class Query:
    id: str
    kind: str
    text: str
    relevant: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Person:
    name: str
    asked_at: datetime
    statements: tuple[Statement, ...]
    queries: tuple[Query, ...]


def _moment(day: object, minutes: int) -> datetime:
    if not isinstance(day, date):
        raise ValueError(f"not a date: {str(day)[:40]!r}")
    return datetime(day.year, day.month, day.day, 9, tzinfo=UTC) + timedelta(minutes=minutes)


def _problem(where: str, what: str, reason: str) -> ValueError:
    return ValueError(f"{where}: {what[:60]!r}: {reason}")


def parse(name: str, raw: dict[str, object]) -> Person:
    """One person's file, checked (``ValueError`` naming the id and the reason)."""
    statements: list[Statement] = []
    by_id: dict[str, Statement] = {}
    corrected: set[str] = set()
    rows = raw["statements"]
    assert isinstance(rows, list)
    for i, (sid, day, kind, text) in enumerate(rows):
        when = _moment(day, i)
        if sid in by_id:
            raise _problem(name, sid, "duplicate statement id")
        if statements and when < statements[-1].said_at:
            raise _problem(name, sid, "said before the statement above it")
        corrects = None
        if kind.startswith("fix:"):
            corrects = kind[4:]
            target = by_id.get(corrects)
            if target is None:
                raise _problem(name, sid, f"corrects {corrects}, not an earlier statement")
            kind = target.time_kind
            corrected.add(corrects)
            while target.corrects is not None:  # a correction of a correction: one record
                target = by_id[target.corrects]
                corrected.add(target.id)
        elif kind not in TIME_KINDS:
            raise _problem(name, sid, f"unknown time kind {kind}")
        st = Statement(id=sid, said_at=when, time_kind=kind, text=text, corrects=corrects)
        statements.append(st)
        by_id[sid] = st
    asked = _moment(raw["asked_on"], 180)
    if asked <= statements[-1].said_at:
        raise _problem(name, str(raw["asked_on"]), "asked before the last statement")
    queries: list[Query] = []
    query_rows = raw["queries"]
    assert isinstance(query_rows, list)
    for i, (kind, text, relevant) in enumerate(query_rows):
        qid = f"{name}-q{i + 1:02d}"
        if kind not in KINDS:
            raise _problem(qid, kind, "unknown query kind")
        for sid in relevant:
            if sid not in by_id:
                raise _problem(qid, sid, "not a statement of this person")
            if sid in corrected:
                raise _problem(qid, sid, "corrected later: its old value is not current")
        if (kind == "none") != (not relevant):
            raise _problem(qid, text, "a no-answer query lists nothing, and only it")
        queries.append(Query(id=qid, kind=kind, text=text, relevant=tuple(relevant)))
    return Person(name=name, asked_at=asked, statements=tuple(statements), queries=tuple(queries))


def load(folder: Path = DATA) -> list[Person]:
    people = []
    for path in sorted(folder.glob("*.yaml")):
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        if raw.get("person") != path.stem:
            raise _problem(path.name, str(raw.get("person")), "person differs from file name")
        people.append(parse(path.stem, raw))
    return people


def half_of(name: str, people: list[Person]) -> str:
    """Fixed before tuning: alternate halves in alphabetical order of the person."""
    order = sorted(p.name for p in people)
    return HALVES[order.index(name) % 2]


def split(people: list[Person]) -> dict[str, list[Person]]:
    out: dict[str, list[Person]] = {h: [] for h in HALVES}
    for p in people:
        out[half_of(p.name, people)].append(p)
    return out
