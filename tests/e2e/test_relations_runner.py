"""``bench.relations.run`` plays a script on a real cloud and never crashes on a step.

Two scripts written here (not from either half), both an explicit correction: in the
first, a step naming a record the device does not hold is a step error of its script,
the ask is still played and judged, and the next script still plays. Only the runner's
mechanics are asserted, not how well the memory answers (that is the bench's figure).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import relations

pytestmark = pytest.mark.e2e


def _script(sid: str, extra: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": sid,
        "kind": "explicit_correct",
        "person": "Runner Check",
        "steps": [
            {"at": "2026-03-01T09:00:00Z", "device": "phone", "conversation": "c1",
             "say": "I drink my tea black. Is it sunny?"},
            {"at": "2026-03-01T09:01:00Z", "device": "phone", "conversation": "c1",
             "remember": "I drink my tea black."},
            {"at": "2026-03-01T09:02:00Z", "device": "phone", "sync": True},
            {"at": "2026-03-02T09:00:00Z", "device": "laptop", "sync": True},
            {"at": "2026-03-02T09:01:00Z", "device": "laptop", "conversation": "c2",
             "say": "That's wrong. I drink my tea with lemon."},
            {"at": "2026-03-02T09:02:00Z", "device": "laptop", "conversation": "c2",
             "correct": {"target": "I drink my tea black.", "text": "I drink my tea with lemon."}},
            *extra,
        ],
        "ask": [
            {"at": "2026-03-03T09:00:00Z", "device": "phone", "query": "How do I drink my tea?",
             "current": ["lemon"], "not_current": ["tea black"], "absent": [], "conflict": False}
        ],
    }  # fmt: skip


def test_a_correction_passes_and_a_failing_step_is_a_result(tmp_path: Path) -> None:
    missing = {"at": "2026-03-02T09:03:00Z", "device": "laptop", "dont_use": "I own a yacht."}
    first, second = relations.run(
        [_script("tune-901", [missing]), _script("tune-902", [])], tmp_path
    )
    assert not first.passed and len(first.step_errors) == 1
    assert "LookupError" in first.step_errors[0] and "yacht" in first.step_errors[0]
    assert first.asks and first.asks[0].returned  # the ask was still played and judged
    assert not second.step_errors
    (ask,) = second.asks
    assert any("lemon" in hit.text and not hit.outdated for hit in ask.returned)
    assert ask.passed == (not ask.reasons) and second.passed == ask.passed
    assert set(ask.anchors) == set(relations.ANCHORS)
    summary = relations.summarise([first, second])["tune"]
    assert summary["overall"]["scripts"] == 2 and summary["overall"]["step_errors"] == 1
    assert summary["overall"]["passed"] == int(second.passed)
