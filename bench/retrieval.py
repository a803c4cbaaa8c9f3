"""Retrieval quality and speed, measured (``make bench``; ``--smoke`` shrinks it).

Quality: the hand-written evaluation set in tests/data/retrieval_eval.json is loaded
into a real device (say + remember each sentence, then the corrections), and every
query runs through the pipeline three ways: lexical only, vector only, hybrid.
recall@k and MRR are read from the ranked list (step 6); the smallest subset (step 7)
is reported as its own recall and average size. Speed: retrieval latency p50/p95 on
stores of growing size of varied sentences (``bench.sentences``), beside a floor measured
in the same run, alternating (embed the query, scan the int8 matrix, one FTS5 query);
nothing here asserts a timing.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from bench import sentences
from device import retrieval, search
from device.agent import DeviceAgent
from device.embedder import default_embedder
from protocol.embedding import DIM
from protocol.model import ContentType, LifeArea
from protocol.retrieval import pipeline
from protocol.retrieval.steps import smallest_subset

EVAL_SET = Path(__file__).resolve().parent.parent / "tests" / "data" / "retrieval_eval.json"
PASSPHRASE = "bench passphrase"
MODES = {"lexical": (True, False), "vector": (False, True), "hybrid": (True, True)}


def load_eval() -> dict[str, Any]:
    return dict(json.loads(EVAL_SET.read_text()))


def build_eval_device(folder: Path, data: dict[str, Any]) -> tuple[DeviceAgent, dict[str, str]]:
    """A device holding every record of the set; returns key -> record id."""
    agent = DeviceAgent.create(folder, PASSPHRASE, device_name="eval")
    ids: dict[str, str] = {}
    for i, r in enumerate(data["records"]):
        conversation = f"eval{i}"
        agent.say(r["text"], conversation)
        ids[r["key"]] = agent.remember(
            r["text"],
            conversation,
            content_type=ContentType(r["content_type"]),
            life_areas=[LifeArea(a) for a in r["life_areas"]],
        ).record_id
    for i, r in enumerate(data["records"]):
        if r.get("corrected_to"):
            conversation = f"fix{i}"
            agent.say(r["corrected_to"], conversation)
            agent.correct(ids[r["key"]], r["corrected_to"], conversation)
    return agent, ids


def evaluate(agent: DeviceAgent, ids: dict[str, str], data: dict[str, Any]) -> dict[str, Any]:
    db = agent._db  # the bench reads the device's own store, as the agent does
    now = agent._now_dt()
    out: dict[str, Any] = {}
    for mode, (lexical, vector) in MODES.items():
        r1 = r3 = rr = subset_hits = 0.0
        subset_sizes = []
        for q in data["queries"]:
            task = retrieval.task_for(
                q["query"],
                now,
                limit=10,
                area=LifeArea(q["area"]) if q.get("area") else None,
                factual=False,
            )
            candidates, hits = retrieval.gather(db, task, lexical=lexical, vector=vector)
            ranked = pipeline.ranked(task, candidates, hits)
            order = [h.record_id for h in ranked.scored]
            relevant = {ids[k] for k in q["relevant"]}
            first = next((i for i, rid in enumerate(order) if rid in relevant), None)
            r1 += first is not None and first < 1
            r3 += first is not None and first < 3
            rr += 0.0 if first is None else 1.0 / (first + 1)
            chosen = smallest_subset(ranked)
            subset = {h.record_id for h in chosen.scored}
            subset_hits += bool(subset & relevant)
            subset_sizes.append(len(subset))
        n = len(data["queries"])
        out[mode] = {
            "recall@1": r1 / n,
            "recall@3": r3 / n,
            "mrr": rr / n,
            "subset_recall": subset_hits / n,
            "subset_size": statistics.fmean(subset_sizes),
        }
    out["queries"] = len(data["queries"])
    out["records"] = len(data["records"])
    return out


def quality(folder: Path, smoke: bool) -> dict[str, Any]:
    data = load_eval()
    if smoke:
        queries = data["queries"][:20]
        keep = {k for q in queries for k in q["relevant"]}
        data = {"queries": queries, "records": [r for r in data["records"] if r["key"] in keep]}
    agent, ids = build_eval_device(folder, data)
    try:
        return evaluate(agent, ids, data)
    finally:
        agent.close()


# --- latency on big stores ----------------------------------------------------------


# the 50-word vocabulary other benches (bench/spaces.py) still fill stores with; the
# latency figures use the grammar of bench/sentences.py instead
WORDS = (
    "garden bike trip north coffee sister office dentist flight train book piano recipe "
    "marathon budget rent invoice doctor allergy vacation beach mountain cousin meeting "
    "project deadline salary gym yoga painting guitar bakery market lisbon oslo duluth "
    "kyoto lima tea soup pasta dog cat apartment car insurance tax class exam thesis"
).split()


def _sentence(rng: random.Random) -> str:
    return sentences.sentence(rng)


def random_unit_vectors(seed: int) -> Callable[[Any], Any]:
    """An ``embed`` stand-in: one random unit vector per text, from ``seed``."""
    rng = np.random.default_rng(seed)

    def embed(texts: Any) -> Any:
        v = rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    return embed


@contextmanager
def fast_vectors() -> Iterator[None]:
    """Populate big stores with random unit vectors under the real model id: filling
    100k records through the model would take most of the run, and latency depends on
    the store's size, not on what the vectors say. Queries use the real model."""
    embedder = default_embedder()
    real = embedder.embed
    object.__setattr__(embedder, "embed", random_unit_vectors(7))
    try:
        yield
    finally:
        object.__setattr__(embedder, "embed", real)


def fill(agent: DeviceAgent, n: int, seed: int = 3, batch: int = 2000) -> None:
    """Add ``n`` varied sentences, each said and remembered as a record on a subject of
    its own (the bench measures reading a big store, not relating statements: a grammar's
    shared openings would make most records corrections or conflicts of each other)."""
    rng = random.Random(seed)
    types = [t for t in ContentType if t is not ContentType.OPINION]
    done = 0
    with fast_vectors():
        while done < n:
            with agent._db.atomic():  # one commit per batch (nested ops become savepoints)
                for i in range(done, min(n, done + batch)):
                    text = _sentence(rng)
                    agent.say(text, f"f{seed}-{i}")
                    agent.remember(
                        text,
                        f"f{seed}-{i}",
                        content_type=types[i % len(types)],
                        subject=f"bench {seed} {i}",
                    )
            done = min(n, done + batch)


QUESTIONS = (
    "Where does my sister live?",
    "What am I allergic to?",
    "Which food do I love on weekends?",
    "What is the code for the garage door?",
    "When did I fly to Kyoto?",
    "Who taught me pottery?",
    "How much do I pay for insurance each month?",
    "What did I lend to Marco?",
    "When is my grandmother's birthday?",
    "What does my cousin do for work?",
)


def _queries(rng: random.Random, n: int) -> list[str]:
    """Half questions a user would ask, half sentences of the store's own grammar."""
    return [QUESTIONS[i % len(QUESTIONS)] if i % 2 else _sentence(rng) for i in range(n)]


def floor_query(agent: DeviceAgent, query: str) -> None:
    """What no recall can do without: embed the query, scan the int8 matrix, and one
    bounded FTS5 query, on the same SQLCipher store."""
    db = agent._db
    q = search.embedder_for(db).embed([query])[0]
    search.vector_index(db).nearest(np.asarray(q), search.VECTOR_LIMIT)
    search.lexical_hits(db, query)


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(len(ordered) * p))]


def measure(agent: DeviceAgent, queries: list[str]) -> dict[str, float]:
    """Recall (A) and the floor (B) on each query, alternating A B, after one warm-up of
    each: wall-clock p50/p95 and CPU-time p50 of both, and their ratio."""
    agent.recall(queries[0])
    floor_query(agent, queries[0])
    wall: dict[str, list[float]] = {"recall": [], "floor": []}
    cpu: dict[str, list[float]] = {"recall": [], "floor": []}
    for query in queries:
        for name in ("recall", "floor"):
            start, start_cpu = time.perf_counter(), time.process_time()
            if name == "recall":
                agent.recall(query)
            else:
                floor_query(agent, query)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
    out = {
        "p50_ms": _pct(wall["recall"], 0.5),
        "p95_ms": _pct(wall["recall"], 0.95),
        "cpu_p50_ms": _pct(cpu["recall"], 0.5),
        "floor_p50_ms": _pct(wall["floor"], 0.5),
        "floor_p95_ms": _pct(wall["floor"], 0.95),
        "floor_cpu_p50_ms": _pct(cpu["floor"], 0.5),
    }
    out["p95_over_floor_p95"] = out["p95_ms"] / out["floor_p95_ms"]
    out["p50_over_floor_p50"] = out["p50_ms"] / out["floor_p50_ms"]
    return out


def latency(folder: Path, sizes: list[int], queries: int) -> dict[str, Any]:
    """p50/p95 of ``recall`` at each store size beside the floor measured in the same
    run (``measure``); the store grows from one size to the next."""
    out: dict[str, Any] = {}
    agent = DeviceAgent.create(folder, PASSPHRASE, device_name="latency")
    rng = random.Random(11)
    try:
        have = 0
        for size in sizes:
            fill(agent, size - have, seed=size)
            have = size
            search.forget_cache(agent._db)
            start = time.perf_counter()
            agent.recall("warm up the vector matrix")
            cold = time.perf_counter() - start
            out[str(size)] = {
                **measure(agent, _queries(rng, queries)),
                "cold_ms": 1000 * cold,
                "vocabulary": sentences.vocabulary(),
                "db_mb": sum(
                    p.stat().st_size
                    for p in (agent._db.path, agent._db.path.with_name("device.db-wal"))
                    if p.exists()
                )
                / 1e6,
            }
    finally:
        agent.close()
    return out
