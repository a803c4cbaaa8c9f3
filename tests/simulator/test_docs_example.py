"""The example test in docs/simulator.md runs, as a tester would run it, and passes; a
test that touches a space not its own errors at teardown. So the doc cannot rot."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from simulator.processes import SOURCE_ROOT

pytestmark = pytest.mark.e2e

DOC = SOURCE_ROOT / "docs" / "simulator.md"
MARK = "# test_memory_sync.py"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)

INTRUDER = """
def test_touches_a_space_not_its_own(memsync_fleet):
    memsync_fleet.add_user("ada")
    memsync_fleet.cloud.operator.add_user("somebody-else")  # not through the fleet
"""


def example() -> str:
    blocks = [b for b in BLOCK.findall(DOC.read_text()) if b.startswith(MARK)]
    assert len(blocks) == 1, f"{DOC} must hold exactly one block starting {MARK!r}"
    return blocks[0]


def _pytest(folder: Path, source: str) -> subprocess.CompletedProcess[str]:
    test_file = folder / "test_memory_sync.py"
    test_file.write_text(source)
    env = {**os.environ, "PYTHONPATH": str(SOURCE_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "simulator.pytest_plugin", "-p",
         "no:cacheprovider", "-q", str(test_file)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )  # fmt: skip


def test_the_documented_example_is_a_whole_test() -> None:
    source = example()
    compile(source, str(DOC), "exec")
    assert "def test_" in source and "run.assert_all()" in source


def test_the_documented_example_runs_and_passes(tmp_path: Path) -> None:
    done = _pytest(tmp_path, example())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_a_test_that_touches_another_space_errors_at_teardown(tmp_path: Path) -> None:
    done = _pytest(tmp_path, INTRUDER)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 passed, 1 error" in done.stdout
    assert "walls: every other space unchanged" in done.stdout
    assert "appeared during the run" in done.stdout
