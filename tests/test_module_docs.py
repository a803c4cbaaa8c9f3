"""Every module of ``device/``, ``cloud/``, ``protocol/``, ``simulator/`` and ``memsync/``
has its line in its room's doc (issue 24 item 6): ``docs/device.md``, ``docs/cloud.md``,
``docs/simulator.md`` and, for ``protocol/`` and ``memsync/``, ``docs/architecture.md``.
A module is named in backticks by its path inside the
package (``ui/app.py``) or with the package in front (``cloud/store/sql.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOMS = {
    "device": "docs/device.md",
    "cloud": "docs/cloud.md",
    "protocol": "docs/architecture.md",
    "simulator": "docs/simulator.md",
    "memsync": "docs/architecture.md",
}


def _modules(package: str) -> list[str]:
    return sorted(
        path.relative_to(ROOT / package).as_posix()
        for path in (ROOT / package).rglob("*.py")
        if path.name != "__init__.py"
    )


@pytest.mark.parametrize(("package", "doc"), sorted(ROOMS.items()))
def test_every_module_has_its_line(package: str, doc: str) -> None:
    text = (ROOT / doc).read_text(encoding="utf-8")
    missing = [
        module
        for module in _modules(package)
        if f"`{module}`" not in text and f"`{package}/{module}`" not in text
    ]
    assert missing == [], f"{doc} does not name these modules of {package}/: {missing}"


def test_the_architecture_walks_both_paths_through_files_that_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert "## Path 1: a push applied in the cloud" in text
    assert "## Path 2: a forget arriving at a device" in text
    named = {
        word.strip("`")
        for word in text.split()
        if word.startswith("`") and word.rstrip("`,.;:)").endswith(".py")
    }
    for name in named:
        path = name.rstrip("`,.;:)")
        if "/" in path and path.split("/")[0] in {"device", "cloud", "protocol", "simulator"}:
            assert (ROOT / path).is_file(), f"docs/architecture.md names {path}, which is not there"
