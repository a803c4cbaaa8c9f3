"""The PouchDB side-by-side bench (issue 21) runs end to end on a tiny workload.

Invariants checked: both sides of every job moved what they should (the bench raises
otherwise), every figure is a positive number, the ratios are the figures' quotients,
and with no node on PATH the bench is skipped with a note instead of failing.
The real run needs node and npm (and, the first time, the npm registry); without
them the end-to-end test is skipped with the bench's own note.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bench import pouchdb

TINY = pouchdb.Sizes(push_ops=20, records=12, reps=2, changes=2)


def test_without_node_the_bench_is_skipped_with_a_note(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr("shutil.which", lambda name: None)
    result = pouchdb.measure(tmp_path, smoke=True, sizes=TINY)
    assert result["skipped"].startswith("skipped: node or npm is not on PATH")
    assert "skipped" in str(pouchdb.render(result).columns[1]._cells)


def test_side_by_side_on_a_tiny_workload(tmp_path: Path) -> None:
    modules = pouchdb.ensure_peer()
    if isinstance(modules, str):
        pytest.skip(modules)
    result = pouchdb.measure(tmp_path, smoke=True, sizes=TINY)
    assert result["node"].startswith("v")
    for job in ("push", "initial_sync", "one_change_sync"):
        assert all(v > 0 and math.isfinite(v) for v in result[job].values()), job
    push, one = result["push"], result["one_change_sync"]
    assert result["ratios"]["push"] == pytest.approx(
        push["memsync_ops_per_s"] / push["pouchdb_docs_per_s"]
    )
    assert result["ratios"]["one_change_sync"] == pytest.approx(
        one["pouchdb_ms"] / one["memsync_ms"]
    )
    assert len(result["runs"]["one_change_sync"]) == TINY.reps * TINY.changes
    assert len(result["peer_runs"]["push"]) == TINY.reps
    ops = result["push"]["ops"]
    assert ops >= TINY.push_ops
    assert all(run["docs_written"] == ops for run in result["peer_runs"]["push"])
    assert all(run["ops"] == ops for run in result["runs"]["push"])
