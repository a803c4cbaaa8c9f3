from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from cloud.config import CloudConfig
from simulator.cloud_runner import RunningCloud
from simulator.fleet import Fleet
from tests.e2e.browser import (
    HeldBack,
    Inspector,
    browser_problem,
    held_back_account,
    launch_chromium,
    under_ci,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page


@pytest.fixture
def cloud(tmp_path: Path) -> Iterator[RunningCloud]:
    """The real FastAPI app under uvicorn on an ephemeral loopback port, SQLite store."""
    with RunningCloud.sqlite(tmp_path / "cloud") as running:
        yield running


# -- the browser tests (docs/inspector-testing.md) -------------------------------------
# Debian's chromium at /usr/bin/chromium driven by Playwright's sync API; no browser is
# ever downloaded. Missing either one skips a browser test on a developer's machine and
# fails it under CI=true (`make test` installs both), and under CI=true a browser test
# skipped for any other reason fails too.


@pytest.fixture(scope="session")
def chromium() -> Iterator[Browser]:
    """One headless Debian chromium for the session (``browser.launch_chromium``)."""
    problem = browser_problem()
    if problem is not None:
        if under_ci():
            pytest.fail(f"CI=true: {problem}", pytrace=False)
        pytest.skip(problem)
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    try:
        browser = launch_chromium(playwright)
        try:
            yield browser
        finally:
            browser.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(chromium: Browser) -> Iterator[Page]:
    """A page in a context of its own (no cookie carried over), closed after the test."""
    context = chromium.new_context()
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()  # type: ignore[attr-defined]
    if (
        report.skipped
        and under_ci()
        and item.get_closest_marker("browser") is not None
        and not hasattr(report, "wasxfail")
    ):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = f"CI=true: a skipped browser test is a failure ({reason})"


@pytest.fixture
def held_back(cloud: RunningCloud, tmp_path: Path) -> Iterator[HeldBack]:
    """A phone holding a held-back account's memory and a laptop, both synced."""
    fleet = Fleet(cloud, tmp_path / "devices")
    try:
        yield held_back_account(fleet)
    finally:
        fleet.close()


@pytest.fixture
def inspector(held_back: HeldBack) -> Iterator[Inspector]:
    """The phone's inspector served on loopback (``device.ui.server.serve_ui``)."""
    from device.ui.server import serve_ui

    with serve_ui(held_back.phone.agent) as running:
        yield running


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_cloud(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunningCloud]:
    """The real app under uvicorn on loopback, on each record store (SQLite, and a
    PostgreSQL database of its own)."""
    if request.param == "sqlite":
        running = RunningCloud.sqlite(tmp_path / "cloud")
    else:
        new_database: Callable[[], str] = request.getfixturevalue("postgres_database")
        config = CloudConfig(store_url=new_database(), key_store_path=tmp_path / "keys.db")
        running = RunningCloud(config)
    with running:
        yield running
