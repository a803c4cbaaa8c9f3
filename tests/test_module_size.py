"""No module over 600 lines (issue 24): every non-test Python module of the import
packages stays within the house's bound, so each can be read whole as one concern.
A module that grows past it is split along a real seam, never squeezed."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("cloud", "device", "protocol", "simulator", "memsync")
MAX_LINES = 600


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def too_long(root: Path, bound: int = MAX_LINES) -> list[str]:
    """Each module of ``PACKAGES`` under ``root`` longer than ``bound``, with its length."""
    return [
        f"{path.relative_to(root).as_posix()} has {lines} lines"
        for package in PACKAGES
        for path in sorted((root / package).rglob("*.py"))
        if (lines := _lines(path)) > bound
    ]


def test_no_module_is_over_600_lines() -> None:
    assert all((ROOT / package).is_dir() for package in PACKAGES)
    found = too_long(ROOT)
    assert found == [], f"over {MAX_LINES} lines (split along a seam): {found}"


def test_a_long_module_is_named_with_its_length(tmp_path: Path) -> None:
    (tmp_path / "device" / "ui").mkdir(parents=True)
    for package in PACKAGES:
        (tmp_path / package).mkdir(exist_ok=True)
    (tmp_path / "device" / "ui" / "long.py").write_text("x = 1\n" * 601, encoding="utf-8")
    (tmp_path / "cloud" / "short.py").write_text("x = 1\n" * 600, encoding="utf-8")
    assert too_long(tmp_path) == ["device/ui/long.py has 601 lines"]
