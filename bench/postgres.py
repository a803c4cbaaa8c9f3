"""A throwaway PostgreSQL database for one benchmark run.

Invariants: the database has a random name, is created empty on 127.0.0.1:5432 (user
postgres, trust auth, as in ``tests/conftest.py``) and is dropped (``WITH (FORCE)``)
when the context ends, whatever happened inside. ``available()`` says whether the
server answers, so a bench can report a missing server instead of failing.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

PG_ADMIN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres connect_timeout=3"


def available() -> bool:
    try:
        psycopg.connect(PG_ADMIN, autocommit=True).close()
    except psycopg.OperationalError:
        return False
    return True


@contextmanager
def fresh_database(purpose: str) -> Iterator[str]:
    """Yield the URL of a new, empty database; drop it afterwards."""
    name = f"memsync_bench_{purpose}_{secrets.token_hex(4)}"
    admin = psycopg.connect(PG_ADMIN, autocommit=True)
    try:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield f"postgresql://postgres@127.0.0.1:5432/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.close()
