"""The push profile (issue 21) runs end to end on a tiny workload.

Invariants checked: the profiled push applied every op (the bench raises otherwise),
every figure is a positive finite number, the statements were counted per op (fewer
than 5: the push is applied set-at-a-time) and the raw replay ran them all (a statement
the driver refused would fail the run), and the table renders. Nothing here asserts a
timing.
"""

from __future__ import annotations

import math
from pathlib import Path

from bench import push_profile

TINY = push_profile.Sizes(pairs=4, reps=1)


def test_the_profile_on_a_tiny_workload(tmp_path: Path) -> None:
    result = push_profile.measure(tmp_path, smoke=True, sizes=TINY)
    assert result["ops"] >= 2 * TINY.pairs  # a say and a remember each queue an op at least
    for name in (
        "cloud_cpu_us_per_op",
        "statements_per_op",
        "rows_per_op",
        "raw_replay_us_per_op",
        "floor_us_per_op",
    ):
        assert result[name] > 0 and math.isfinite(result[name]), name
    # set-at-a-time (a count, not a timing): one op per statement round was ~13
    # statements per op; batched, a say + remember push runs under 5
    assert result["statements_per_op"] < 5 < result["rows_per_op"]
    assert push_profile.render(result).row_count == 5
