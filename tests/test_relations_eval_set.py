"""The tuning half of issue 17's tell-then-ask set follows the format, and the judge and
anchors of ``bench.relations`` read hits the way ``docs/relations-eval.md`` says.

Only the tuning half's contents are checked here; the held-out half is checked for its
shape alone (messages name a script's id and a step's position, never its sentences).
"""

from __future__ import annotations

from collections import Counter

from bench import relations
from bench.relations import Returned, anchor_passes, bm25, judge


def test_tuning_half_follows_the_format() -> None:
    scripts = relations.load(relations.TUNE_FILE)
    assert len(scripts) >= 110
    assert [s["id"] for s in scripts] == [f"tune-{i:03d}" for i in range(1, len(scripts) + 1)]
    bad = {s["id"]: p for s in scripts if (p := relations.problems(s))}
    assert not bad
    kinds = Counter(s["kind"] for s in scripts)
    assert set(kinds) == set(relations.KINDS)
    assert all(8 <= n <= 12 for n in kinds.values()), kinds
    assert len({s["person"] for s in scripts}) >= 6
    months = {step["at"][:7] for s in scripts for step in s["steps"]}
    assert {f"2026-{m:02d}" for m in range(1, 12)} <= months


def test_held_out_half_if_present_has_only_the_right_shape() -> None:
    if not relations.TEST_FILE.exists():
        return
    scripts = relations.load(relations.TEST_FILE)
    tune_ids = {s["id"] for s in relations.load(relations.TUNE_FILE)}
    assert all(relations.half_of(s) == "test" for s in scripts)
    assert not tune_ids & {s["id"] for s in scripts}
    bad = [s["id"] for s in scripts if relations.problems(s)]
    assert not bad, f"held-out scripts not in the format: {bad}"


def _hit(text: str, **flags: bool) -> Returned:
    return Returned(
        text,
        outdated=flags.get("outdated", False),
        current=flags.get("current", False),
        conflict=flags.get("conflict", False),
    )


def test_judge_reads_the_flags() -> None:
    ask = {"current": ["Oslo"], "not_current": ["live in Rome"], "absent": ["Lima"]}
    assert (
        judge(ask, [_hit("I moved to Oslo.", current=True), _hit("I live in Rome.", outdated=True)])
        == []
    )
    assert judge(ask, [_hit("I moved to Oslo."), _hit("I live in Rome.")])  # stale, unlabelled
    assert judge(ask, [_hit("I live in Rome.", outdated=True)])  # the current value missing
    assert judge(ask, [_hit("I moved to Oslo."), _hit("I was in Lima.", outdated=True)])
    conflict = {"current": ["38", "40"], "conflict": True}
    assert judge(conflict, [_hit("Size 38."), _hit("Size 40.")])  # not flagged
    assert judge(conflict, [_hit("Size 38.", conflict=True), _hit("Size 40.", conflict=True)]) == []


def test_judge_matches_the_kept_context_sentence() -> None:
    hit = Returned("No wait, it's on the 17th.", False, True, False, "My flight is on the 14th.")
    assert judge({"current": ["flight"]}, [hit]) == []


def test_anchors_rank_and_judge() -> None:
    ask = {"current": ["Oslo"], "not_current": ["live in Rome"], "absent": []}
    assert anchor_passes(ask, ["I moved to Oslo.", "I live in Rome.", "Hi."])
    assert not anchor_passes(ask, ["I live in Rome.", "I moved to Oslo.", "Hi."])
    assert not anchor_passes(ask, ["Hi.", "Hello.", "Hey.", "I moved to Oslo."])
    assert not anchor_passes({"absent": ["8841"]}, ["My PIN is 8841.", "Hi."])
    scores = bm25(["I live in Rome.", "The cat sleeps."], "Where do I live?")
    assert scores[0] > scores[1] == 0.0
