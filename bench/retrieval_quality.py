"""Issue 20's retrieval quality: memsync's public recall beside plain cosine and BM25.

Each person of bench/retrieval_data is loaded into a real device (``DeviceAgent``) with
an injected clock: every statement is said and remembered (or, for ``fix:``, corrected)
at its date; every query is asked at ``asked_on`` through ``DeviceAgent.recall``. In the
same run, over the same current sentences, two anchors rank every record: a plain cosine
top-k with the same ONNX embedder, and a plain BM25 (k1 1.2, b 0.75) over the device's
stemmed terms. Reported per half (tuning, test) and per query kind: recall@3 and MRR over
answerable queries, "all relevant in the first five" for multi-record ones, and for
no-answer queries the rate of empty answers (the anchors never return empty).

Invariants: ids and clocks are injected, so a run is deterministic; a line counts as
relevant only if it is a relevant record, with its CURRENT words, not marked outdated
(an old value presented as current is wrong); an empty answer scores zero; nothing is
cached on disk between runs.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from bench import quality_data
from bench.quality_data import KIND_NAMES, KINDS, Person, Query
from device.agent import DeviceAgent
from device.embedder import default_embedder
from protocol.model import TimeKind
from protocol.retrieval import lexical

PASSPHRASE = "quality bench passphrase"
KDF_ITERATIONS = 64  # the bench measures ranking, not the passphrase stretching
SYSTEMS = ("memsync", "cosine", "bm25")
LIMIT = 5  # what the device returns by default; the anchors show their top five too

Line = tuple[str, str]  # (record id, words shown as current)


@dataclass
class Loaded:
    """A person's device, and how the data's statement ids map to its records."""

    person: Person
    agent: DeviceAgent
    clock: list[datetime]
    record_of: dict[str, str] = field(default_factory=dict)  # statement id -> record id
    current: dict[str, str] = field(default_factory=dict)  # record id -> current words

    def relevant(self, q: Query) -> set[Line]:
        return {(self.record_of[s], self.current[self.record_of[s]]) for s in q.relevant}

    def ask(self, text: str) -> list[Line]:
        self.clock[0] = self.person.asked_at
        hits = self.agent.recall(text, LIMIT)
        return [(h.record_id, h.text) for h in hits if not h.outdated]


def load_person(folder: Path, person: Person) -> Loaded:
    clock = [person.statements[0].said_at]
    rng = random.Random(person.name)  # injected: the same ids, so the same ties, every run
    agent = DeviceAgent.create(
        folder,
        PASSPHRASE,
        device_name=f"quality-{person.name}",
        clock=lambda: clock[0],
        random_bytes=rng.randbytes,
        kdf_iterations=KDF_ITERATIONS,
    )
    loaded = Loaded(person=person, agent=agent, clock=clock)
    for st in person.statements:
        clock[0] = st.said_at
        conversation = f"{person.name}-{st.id}"
        agent.say(st.text, conversation)
        if st.corrects is None:
            record_id = agent.remember(
                st.text, conversation, time_kind=TimeKind(st.time_kind)
            ).record_id
            assert record_id is not None
        else:
            record_id = loaded.record_of[st.corrects]
            agent.correct(record_id, st.text, conversation)
        loaded.record_of[st.id] = record_id
        loaded.current[record_id] = st.text
    return loaded


# --- the anchors ----------------------------------------------------------------------


def cosine_ranker(loaded: Loaded) -> Callable[[str], list[Line]]:
    """Plain cosine top-k with the device's own ONNX embedder; never empty."""
    embedder = default_embedder()
    lines = sorted(loaded.current.items())
    matrix = embedder.embed([text for _, text in lines])

    def rank(query: str) -> list[Line]:
        q = embedder.embed([query])[0]
        scores = matrix @ q
        order = sorted(range(len(lines)), key=lambda i: (-float(scores[i]), lines[i][1]))
        return [lines[i] for i in order[:LIMIT]]

    return rank


def bm25_ranker(loaded: Loaded, k1: float = 1.2, b: float = 0.75) -> Callable[[str], list[Line]]:
    """Plain Okapi BM25 over the device's stemmed terms (``protocol.retrieval.lexical``);
    like a user scanning a list, it shows its top five whether they match or not."""
    lines = sorted(loaded.current.items())
    docs = [Counter(lexical.terms(text)) for _, text in lines]
    avg = statistics.fmean(sum(d.values()) for d in docs)
    df = Counter(t for d in docs for t in d)
    n = len(docs)

    def score(d: Counter[str], terms: Iterable[str]) -> float:
        size = sum(d.values())
        total = 0.0
        for t in set(terms):
            if t in d:
                idf = math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                total += idf * d[t] * (k1 + 1) / (d[t] + k1 * (1 - b + b * size / avg))
        return total

    def rank(query: str) -> list[Line]:
        terms = lexical.terms(query)
        scores = [score(d, terms) for d in docs]
        order = sorted(range(n), key=lambda i: (-scores[i], lines[i][1]))
        return [lines[i] for i in order[:LIMIT]]

    return rank


# --- scoring --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    kind: str
    first: int | None  # 0-based position of the first relevant line, None: none shown
    all_in_five: bool
    empty: bool


def outcome(q: Query, shown: Sequence[Line], relevant: set[Line]) -> Outcome:
    first = next((i for i, line in enumerate(shown) if line in relevant), None)
    return Outcome(
        kind=q.kind,
        first=first,
        all_in_five=bool(relevant) and relevant <= set(shown[:5]),
        empty=not shown,
    )


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    answerable = [o for o in outcomes if o.kind != "none"]
    none = [o for o in outcomes if o.kind == "none"]
    multi = [o for o in outcomes if o.kind == "multi"]

    def block(os: Sequence[Outcome]) -> dict[str, float]:
        if not os:
            return {"n": 0, "recall@3": 0.0, "mrr": 0.0}
        return {
            "n": len(os),
            "recall@3": sum(o.first is not None and o.first < 3 for o in os) / len(os),
            "mrr": sum(0.0 if o.first is None else 1 / (o.first + 1) for o in os) / len(os),
        }

    return {
        "overall": block(answerable),
        "kinds": {k: block([o for o in answerable if o.kind == k]) for k in KINDS if k != "none"},
        "all_in_five": sum(o.all_in_five for o in multi) / len(multi) if multi else 0.0,
        "empty_on_no_answer": sum(o.empty for o in none) / len(none) if none else 0.0,
        "empty_on_answerable": sum(o.empty for o in answerable) / len(answerable)
        if answerable
        else 0.0,
        "no_answer_queries": len(none),
    }


def run_person(folder: Path, person: Person) -> dict[str, list[Outcome]]:
    loaded = load_person(folder, person)
    try:
        rankers: dict[str, Callable[[str], list[Line]]] = {
            "memsync": loaded.ask,
            "cosine": cosine_ranker(loaded),
            "bm25": bm25_ranker(loaded),
        }
        return {
            name: [outcome(q, rank(q.text), loaded.relevant(q)) for q in person.queries]
            for name, rank in rankers.items()
        }
    finally:
        loaded.agent.close()


def run(
    folder: Path, *, smoke: bool = False, halves: Sequence[str] = quality_data.HALVES
) -> dict[str, Any]:
    """Every person through the three systems; each half summarised (``smoke``: one
    person of each half, to check the machinery runs; ``halves``: only those, e.g. the
    tuning half while tuning)."""
    people = quality_data.load()
    out: dict[str, Any] = {"people": {}, "halves": {}}
    for half, members in quality_data.split(people).items():
        if half not in halves:
            continue
        chosen = members[:1] if smoke else members
        per_system: dict[str, list[Outcome]] = {s: [] for s in SYSTEMS}
        for person in chosen:
            result = run_person(folder / person.name, person)
            for s in SYSTEMS:
                per_system[s].extend(result[s])
        out["people"][half] = [p.name for p in chosen]
        out["halves"][half] = {s: summarise(per_system[s]) for s in SYSTEMS}
        out["halves"][half]["statements"] = sum(len(p.statements) for p in chosen)
        out["halves"][half]["queries"] = sum(len(p.queries) for p in chosen)
    return out


def best_anchor(half: dict[str, Any], metric: str, kind: str | None) -> float:
    def value(system: str) -> float:
        row = half[system]["overall"] if kind is None else half[system]["kinds"][kind]
        return float(row[metric])

    return max(value("cosine"), value("bm25"))


def bar_failures(half: dict[str, Any]) -> list[str]:
    """Where memsync does not beat the best anchor (recall@3 and MRR, overall and per kind).
    Where the best anchor is already perfect (1.0) nothing can beat it: there memsync
    must be perfect too."""
    failures = []
    for kind in (None, *(k for k in KINDS if k != "none")):
        for metric in ("recall@3", "mrr"):
            row = half["memsync"]["overall"] if kind is None else half["memsync"]["kinds"][kind]
            anchor = best_anchor(half, metric, kind)
            if not (row[metric] > anchor or row[metric] >= anchor >= 1.0):
                failures.append(f"{kind or 'overall'} {metric}: {row[metric]:.3f} <= {anchor:.3f}")
    return failures


def render(result: dict[str, Any]) -> list[Table]:
    """One table per half: each system's figures overall and per kind, side by side."""
    tables = []
    for half, h in result["halves"].items():
        table = Table(
            title=f"retrieval quality, issue 20, {half} half ({', '.join(result['people'][half])}: "
            f"{h['queries']} queries over {h['statements']} statements)"
        )
        table.add_column("queries")
        for s in SYSTEMS:
            table.add_column(f"{s} R@3", justify="right")
            table.add_column(f"{s} MRR", justify="right")
        rows = [("overall", "overall")] + [(k, k) for k in KINDS if k != "none"]
        for key, label in rows:
            cells = []
            for s in SYSTEMS:
                row = h[s]["overall"] if key == "overall" else h[s]["kinds"][key]
                cells += [f"{row['recall@3']:.3f}", f"{row['mrr']:.3f}"]
            n = h["memsync"]["overall" if key == "overall" else "kinds"]
            count = n["n"] if key == "overall" else n[key]["n"]
            table.add_row(f"{label} ({count})", *cells)
        table.add_row(
            "multi: all in first 5",
            *(c for s in SYSTEMS for c in (f"{h[s]['all_in_five']:.3f}", "")),
        )
        table.add_row(
            f"none ({h['memsync']['no_answer_queries']}): empty",
            *(c for s in SYSTEMS for c in (f"{h[s]['empty_on_no_answer']:.3f}", "")),
        )
        table.add_row(
            "answerable: empty",
            *(c for s in SYSTEMS for c in (f"{h[s]['empty_on_answerable']:.3f}", "")),
        )
        fails = bar_failures(h)
        legend = "; ".join(f"{k}: {v}" for k, v in KIND_NAMES.items())
        table.caption = (
            legend
            + ". "
            + (
                "bar met: memsync beats the best anchor overall and on every kind"
                if (not fails)
                else "bar NOT met: " + "; ".join(fails)
            )
        )
        tables.append(table)
    return tables


if __name__ == "__main__":  # a quick look: python -m bench.retrieval_quality
    import json
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        result = run(Path(tmp), halves=sys.argv[1:] or quality_data.HALVES)
    for half, systems in result["halves"].items():
        print(half, json.dumps({s: systems[s] for s in SYSTEMS}, indent=1))
        print("  bar fails:", bar_failures(systems))
