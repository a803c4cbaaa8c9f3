"""Confidence is computed and versioned; test vectors pin the current formula (conf-v2;
conf-v1's vectors stay committed as the record of what it computed)."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from protocol.confidence import FORMULA_VERSION, THRESHOLD, ConfidenceClass, compute, score
from protocol.model import (
    EpistemicState,
    Evidence,
    LifecycleState,
    Observation,
    Producer,
    Provenance,
    RecordContent,
    SourceKind,
    Verification,
    VerifiedBy,
)

NOW = datetime(2026, 9, 21, tzinfo=UTC)
VECTORS = (
    Path(__file__).resolve().parent.parent / "golden" / "confidence" / f"{FORMULA_VERSION}.json"
)


def _content(
    state: EpistemicState,
    kind: SourceKind,
    observations: list[tuple[str, int, bool]],
    conflicts: int = 0,
) -> RecordContent:
    return RecordContent(
        text="Prefers an americano in the morning",
        epistemic_state=state,
        source_kind=kind,
        source_episode_ids=["ep_0000000001"],
        evidence=Evidence(
            observations=[
                Observation(source_id=s, source_kind=kind, at=NOW - timedelta(days=d), supports=ok)
                for s, d, ok in observations
            ],
            conflicting_records=[f"rec_{i:010d}" for i in range(conflicts)],
        ),
    )


CASES: dict[str, tuple[RecordContent, LifecycleState]] = {
    "said": (_content(EpistemicState.SAID, SourceKind.USER_STATEMENT, []), LifecycleState.ACTIVE),
    "verified": (
        _content(EpistemicState.VERIFIED, SourceKind.CONNECTED_SOURCE, []),
        LifecycleState.ACTIVE,
    ),
    "verified_your_words": (
        _content(EpistemicState.VERIFIED, SourceKind.USER_STATEMENT, []).model_copy(
            update={
                "said_at": NOW,
                "provenance": Provenance(producer=Producer.USER, at=NOW),
                "verification": Verification(by=VerifiedBy.USER, at=NOW),
            }
        ),
        LifecycleState.ACTIVE,
    ),
    "corroborated_by_sources": (
        _content(
            EpistemicState.VERIFIED,
            SourceKind.EXTERNAL_CONTENT,
            [("web_page:https://a.example", 2, True), ("email:x@b.example", 1, True)],
        ).model_copy(
            update={
                "verification": Verification(
                    by=VerifiedBy.SOURCES, at=NOW, sources=["a.example", "b.example"]
                )
            }
        ),
        LifecycleState.ACTIVE,
    ),
    "observed_14_of_17_recent": (
        _content(
            EpistemicState.OBSERVED,
            SourceKind.USER_BEHAVIOUR,
            [(f"order-{i}", i, i < 14) for i in range(17)],
        ),
        LifecycleState.ACTIVE,
    ),
    "inferred_one_source_many_times": (
        _content(
            EpistemicState.INFERRED,
            SourceKind.USER_BEHAVIOUR,
            [("cafe", d, True) for d in range(20)],
        ),
        LifecycleState.ACTIVE,
    ),
    "inferred_old_evidence": (
        _content(
            EpistemicState.INFERRED,
            SourceKind.USER_BEHAVIOUR,
            [(f"s{i}", 400 + i, True) for i in range(6)],
        ),
        LifecycleState.ACTIVE,
    ),
    "inferred_with_conflicts": (
        _content(
            EpistemicState.INFERRED,
            SourceKind.USER_BEHAVIOUR,
            [(f"s{i}", i, True) for i in range(6)],
            conflicts=2,
        ),
        LifecycleState.ACTIVE,
    ),
    "hypothesis": (
        _content(
            EpistemicState.HYPOTHESIS,
            SourceKind.USER_BEHAVIOUR,
            [(f"s{i}", i, True) for i in range(9)],
        ),
        LifecycleState.ACTIVE,
    ),
    "external_candidate": (
        _content(EpistemicState.OBSERVED, SourceKind.EXTERNAL_CONTENT, [("page", 1, True)]),
        LifecycleState.CANDIDATE,
    ),
    "import_candidate": (
        _content(EpistemicState.OBSERVED, SourceKind.IMPORT, [("package", 1, True)]),
        LifecycleState.CANDIDATE,
    ),
    "connected_source_strong": (
        _content(
            EpistemicState.OBSERVED,
            SourceKind.CONNECTED_SOURCE,
            [(f"cal-{i}", i, True) for i in range(12)],
        ),
        LifecycleState.ACTIVE,
    ),
}


def _computed() -> dict[str, dict[str, Any]]:
    out = {}
    for name, (content, lifecycle) in CASES.items():
        result = compute(content, lifecycle, NOW)
        out[name] = {
            "score": result.score,
            "shown": result.shown.value,
            "formula": result.formula_version,
        }
    return out


def test_vectors_pin_the_formula() -> None:
    if os.environ.get("MEMSYNC_WRITE_GOLDEN") == "1":
        VECTORS.write_text(json.dumps(_computed(), indent=2, sort_keys=True) + "\n")
    assert _computed() == json.loads(VECTORS.read_text()), (
        f"formula {FORMULA_VERSION} changed: a new formula needs a new version and new vectors"
    )


def test_the_classes_the_user_sees() -> None:
    shown = {name: row["shown"] for name, row in _computed().items()}
    assert shown["said"] == ConfidenceClass.YOU_TOLD_ME
    # a connected source's words the user confirmed are not what the user told
    assert shown["verified"] == ConfidenceClass.CONFIRMED_BY_YOU
    assert shown["verified_your_words"] == ConfidenceClass.YOU_TOLD_ME
    assert shown["corroborated_by_sources"] == ConfidenceClass.CORROBORATED
    assert shown["observed_14_of_17_recent"] == ConfidenceClass.I_THINK_SO
    assert shown["hypothesis"] == ConfidenceClass.NOT_SURE
    assert shown["external_candidate"] == ConfidenceClass.SOURCE_NOT_VERIFIED
    assert shown["import_candidate"] == ConfidenceClass.IMPORTED_NOT_VERIFIED
    assert shown["inferred_one_source_many_times"] == ConfidenceClass.NOT_SURE


def test_two_observations_from_one_source_count_as_one() -> None:
    once = _content(EpistemicState.INFERRED, SourceKind.USER_BEHAVIOUR, [("cafe", 1, True)])
    many = _content(EpistemicState.INFERRED, SourceKind.USER_BEHAVIOUR, [("cafe", 1, True)] * 30)
    assert score(once, NOW) == score(many, NOW)
    assert many.evidence.count == 1


@pytest.mark.parametrize("days", [0, 30, 365, 3650])
def test_more_distinct_sources_and_fewer_conflicts_never_lower_the_score(days: int) -> None:
    def s(n: int, conflicts: int) -> float:
        obs = [(f"s{i}", days, True) for i in range(n)]
        return score(
            _content(EpistemicState.INFERRED, SourceKind.USER_BEHAVIOUR, obs, conflicts), NOW
        )

    assert s(1, 0) <= s(2, 0) <= s(5, 0) <= s(20, 0) <= 1.0
    assert s(5, 3) <= s(5, 1) <= s(5, 0)


def test_threshold_is_where_the_class_changes() -> None:
    assert 0 < THRESHOLD < 1
    row = _computed()["observed_14_of_17_recent"]
    assert row["score"] >= THRESHOLD and row["formula"] == FORMULA_VERSION
