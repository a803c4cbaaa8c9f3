"""Opening the record store's database, or saying in one line why it cannot be opened.

Invariants:
- ``first_connect`` connects once before any migration; a database that is unreachable,
  missing or refuses the login raises ``StoreUnreachable`` naming the URL with its
  password masked and the driver's reason cut to its first line, never a traceback's
  worth of text, and nothing is created or changed.
- The reason never carries the password (the driver's message names host, port,
  database and user only; any ``user:password@`` in it is masked again).
"""

from __future__ import annotations

import re

from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError, OperationalError

from cloud.errors import StoreUnreachable

_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")
_MAX_REASON = 300


def reason_of(exc: BaseException) -> str:
    """The driver's reason, one line: the part after the last "failed:" of its first
    line (psycopg names the server there first), without "FATAL:"."""
    orig = getattr(exc, "orig", None) or exc
    lines = [line.strip() for line in str(orig).splitlines() if line.strip()]
    first = lines[0] if lines else type(orig).__name__
    _, _, tail = first.rpartition("failed:")
    reason = (tail or first).strip().removeprefix("FATAL:").strip()
    if reason.lower() == "connection refused":
        reason = "connection refused (is the server running and accepting TCP/IP connections?)"
    reason = _PASSWORD.sub(r"\1***@", reason)
    return reason[:_MAX_REASON]


def first_connect(engine: Engine, shown_url: str) -> None:
    """Connect once, or raise ``StoreUnreachable``."""
    try:
        with engine.connect():
            pass
    except (OperationalError, DBAPIError) as exc:
        raise StoreUnreachable(shown_url, reason_of(exc)) from None
