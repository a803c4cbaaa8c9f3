"""docs/device.md's quick start "Watching changes and sync status" runs as written.

The snippet is read from the doc itself (the second ``python`` block of the section: the
first lists the API), executed in a fresh namespace, and what it printed and built is
checked: a change to the doc changes what is run."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "device.md"
SECTION = "## Watching changes and sync status"


def quick_start() -> str:
    text = DOC.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    blocks: list[str] = re.findall(r"```python\n(.*?)```", text[start:end], re.DOTALL)
    assert len(blocks) == 2, "the section holds the API list and the quick start"
    return blocks[1]


def test_the_quick_start_runs_as_documented(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, object] = {"__name__": "quick_start"}
    exec(compile(quick_start(), str(DOC), "exec"), namespace)  # our own doc's snippet
    out = capsys.readouterr().out
    answers = namespace["answers"]
    assert [[hit.text for hit in answer] for answer in answers] == [  # type: ignore[attr-defined]
        [], ["I live in Porto."], [], ["I live in Lisbon now."],
    ]  # fmt: skip
    porto, lisbon = namespace["porto"], namespace["lisbon"]
    assert f"new record {lisbon}" in out
    assert f"{porto} v1 added (active), here" in out
    assert f"{porto} v1 permanently forgotten, here" in out
    assert "[[], ['I live in Porto.'], [], ['I live in Lisbon now.']]" in out
    assert "not_enrolled" in out and "synced: None" in out
    [forgotten_line] = [line for line in out.splitlines() if "permanently forgotten" in line]
    assert "Porto" not in forgotten_line  # an event has no words to print
