"""Issue 23: what the cloud tells a person names no route (words, not an API)."""

from __future__ import annotations

from datetime import UTC, datetime

from cloud.errors import AccountEnded


def test_the_account_ended_message_names_no_route() -> None:
    message = str(AccountEnded("sp_" + "a" * 26, datetime(2027, 1, 1, tzinfo=UTC), "deleted"))
    assert "/v1/" not in message and "POST" not in message
    assert "must wipe its copy of the memory" in message
