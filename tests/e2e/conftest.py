from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.cloud_runner import RunningCloud


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    """The real FastAPI app under uvicorn on an ephemeral loopback port, SQLite store."""
    with RunningCloud.sqlite(tmp_path / "cloud") as running:
        yield running
