"""On the hand-written evaluation set, hybrid retrieval beats lexical alone and vector
alone (issue 4). A quality floor, not a timing: it is deterministic on any machine."""

from __future__ import annotations

from pathlib import Path

from bench.retrieval import build_eval_device, evaluate, load_eval


def test_hybrid_beats_lexical_and_vector_alone(tmp_path: Path) -> None:
    data = load_eval()
    agent, ids = build_eval_device(tmp_path, data)
    try:
        result = evaluate(agent, ids, data)
    finally:
        agent.close()
    hybrid, lexical, vector = result["hybrid"], result["lexical"], result["vector"]
    for metric in ("recall@1", "recall@3", "mrr"):
        assert hybrid[metric] > lexical[metric], (metric, result)
        assert hybrid[metric] > vector[metric], (metric, result)
    assert result["queries"] >= 200 and hybrid["recall@3"] >= 0.85
