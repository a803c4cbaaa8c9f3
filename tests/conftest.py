"""Fixtures shared by every part's tests.

PostgreSQL: 127.0.0.1:5432, user postgres (trust). Each test that asks for one gets a
fresh database named with this run's random prefix; all are dropped at the end of the
session. If the server is unreachable those tests skip, except under ``CI=true``,
where they fail: a skipped PostgreSQL test must not pass CI.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

pytest_plugins = ["simulator.pytest_plugin"]

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


@pytest.fixture(scope="session")
def pg_admin() -> Iterator[tuple[psycopg.Connection[Any], str, list[str]]]:
    try:
        conn = psycopg.connect(PG_ADMIN, autocommit=True)
    except psycopg.OperationalError as exc:
        message = f"PostgreSQL at 127.0.0.1:5432 is unreachable: {exc}"
        if os.environ.get("CI") == "true":
            pytest.fail(message + " (CI=true: a skipped PostgreSQL test fails the build)")
        pytest.skip(message)
    prefix = f"memsync_test_{secrets.token_hex(4)}"
    created: list[str] = []
    try:
        yield conn, prefix, created
    finally:
        for name in created:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.close()


@pytest.fixture
def postgres_database(
    pg_admin: tuple[psycopg.Connection[Any], str, list[str]],
) -> Callable[[], str]:
    """A factory: each call creates a fresh, empty database and returns its URL."""
    conn, prefix, created = pg_admin

    def new_database() -> str:
        name = f"{prefix}_{len(created)}"
        conn.execute(f'CREATE DATABASE "{name}"')
        created.append(name)
        return f"postgresql://postgres@127.0.0.1:5432/{name}"

    return new_database


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Say plainly how many PostgreSQL tests ran, so a run that skipped them shows it."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome in counts:
        for report in terminalreporter.stats.get(outcome, []):
            if "postgres" in getattr(report, "keywords", {}):
                counts[outcome] += 1
    terminalreporter.write_line(
        "PostgreSQL tests against 127.0.0.1:5432 - "
        f"passed: {counts['passed']}, failed: {counts['failed']}, skipped: {counts['skipped']}"
    )
