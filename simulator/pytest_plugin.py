"""pytest fixtures for testers: a real cloud, a sealed fleet, and the invariants.

Load it with ``pytest -p simulator.pytest_plugin`` (or ``pytest_plugins =
["simulator.pytest_plugin"]`` in a root conftest; an installed ``memsync`` registers it
through the ``pytest11`` entry point).

Invariants: every test gets its own cloud process (uvicorn on an ephemeral loopback
port) and its own users, created through the server under names unique to the test;
the store is SQLite in the test's ``tmp_path`` unless the test asks for PostgreSQL
(``memsync_store``). When the test ends the fleet is closed and the walls are checked:
a test that changed any space but its own fails at teardown, naming the space and table.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from simulator.cloud_runner import RunningCloud
from simulator.driver import Driver
from simulator.report import Check
from simulator.sealed import SealedFleet
from simulator.stores import SQLITE, cloud_for


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memsync")
    group.addoption(
        "--memsync-store",
        default=SQLITE,
        help="store of the memsync_cloud fixture: 'sqlite' (default, a file in tmp_path) "
        "or a postgresql:// URL of an existing database",
    )


@pytest.fixture
def memsync_store(request: pytest.FixtureRequest) -> str:
    """'sqlite' or a PostgreSQL URL: an indirect parameter, else ``--memsync-store``.

    Override this fixture to pick the store yourself (e.g. a fresh database per test).
    """
    param = getattr(request, "param", None)
    if param is not None:
        return str(param)
    return str(request.config.getoption("--memsync-store"))


@pytest.fixture
def memsync_cloud(memsync_store: str, tmp_path: Path) -> Iterator[RunningCloud]:
    """A started cloud: the real FastAPI app under uvicorn on 127.0.0.1."""
    with cloud_for(memsync_store, tmp_path / "memsync-cloud") as cloud:
        yield cloud


@pytest.fixture
def memsync_fleet(memsync_cloud: RunningCloud, tmp_path: Path) -> Iterator[SealedFleet]:
    """A fleet of real device agents in sealed spaces; walls checked at teardown."""
    fleet = SealedFleet(memsync_cloud, tmp_path / "memsync-devices")
    try:
        yield fleet
    finally:
        fleet.close()
    walls = fleet.walls()
    assert walls.passed, f"{walls.name}: {walls.detail}"


class Invariants(Driver):
    """A ``Driver`` (remember, correct, forget, sync, crash_during_sync, races) whose
    trace the invariant checks read; ``assert_all()`` fails listing every FAIL."""

    def assert_all(self) -> list[Check]:
        checks = self.checks()
        failed = [c for c in checks if not c.passed]
        assert not failed, "\n".join(f"FAIL {c.name}: {c.detail}" for c in failed)
        return checks


@pytest.fixture
def memsync_invariants(memsync_fleet: SealedFleet) -> Invariants:
    """Act through this fixture so the run is recorded; then ``assert_all()``."""
    return Invariants(memsync_fleet)
