"""The floor under the cloud's sensitivity union on the HELD-OUT half of the hand-labelled
data (``bench/sensitivity_data/test.jsonl``; figures in docs/sensitivity.md).

The union is what a record's sensitivity is (the consolidator's own chain with the
device's class as its hint); it must catch nearly every sensitive sentence while most
of what it flags is sensitive. The floors sit a little under the measured figures
(recall 0.969, precision 0.715), so they fail on a real regression, not on one
sentence. Only figures are computed here; no sentence of the held-out half is shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.sensitivity import CHECKERS, HALVES, Checkers, load_half, score_half

ROOT = Path(__file__).resolve().parent.parent.parent
HELD_OUT = ROOT / "bench" / "sensitivity_data" / "test.jsonl"
UNION_RECALL_FLOOR = 0.95
UNION_PRECISION_FLOOR = 0.68
CANDIDATE_RECALL_FLOOR = 0.95
CANDIDATE_PRECISION_FLOOR = 0.80


@pytest.fixture(scope="module")
def held_out() -> dict[str, Any]:
    assert HALVES["test"] == HELD_OUT
    return score_half(Checkers.load(), load_half(HELD_OUT))


def test_the_union_catches_nearly_every_sensitive_sentence_of_the_held_out_half(
    held_out: dict[str, Any],
) -> None:
    union = held_out["union"]
    assert union["sensitive"] >= 200  # the whole half, not a smoke slice
    assert union["sensitive_recall"] >= UNION_RECALL_FLOOR, union
    assert union["sensitive_precision"] >= UNION_PRECISION_FLOOR, union
    on_candidates = held_out["union_on_candidates"]
    assert on_candidates["sensitive_recall"] >= CANDIDATE_RECALL_FLOOR, on_candidates
    assert on_candidates["sensitive_precision"] >= CANDIDATE_PRECISION_FLOOR, on_candidates


def test_the_union_misses_no_more_than_any_one_checker(held_out: dict[str, Any]) -> None:
    """Sensitive when any checker says so: the union never misses what one of them caught."""
    union = held_out["union"]
    for name in CHECKERS[:-1]:
        assert union["missed"] <= held_out[name]["missed"], name
    # and the cloud adds to the device: the device alone misses more
    assert union["missed"] < held_out["device_sent"]["missed"]
