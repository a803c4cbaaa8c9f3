"""The wire pieces of the end of an account: the deletion proof's own challenge, the
``req_`` id, and the ``Memsync-Closing`` header's format (both sides read it alike)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from protocol import strongauth
from protocol.ids import is_id, make_id
from protocol.messages import DeleteAccountRequest, closing_header, parse_closing_header

SPACE = "sp_aaaaaaaaaaaaaaaa"
REQUEST = "req_aaaaaaaaaaaa"


def test_a_deletion_proof_deletes_one_space_for_one_request_and_forgets_nothing() -> None:
    key = strongauth.account_signing_key("a long account passphrase", SPACE)
    verify_key = bytes(key.verify_key)
    proof = strongauth.prove_delete_account(key, SPACE, REQUEST)
    assert strongauth.verify_delete_account(verify_key, proof, SPACE, REQUEST)
    assert not strongauth.verify_delete_account(verify_key, proof, "sp_bbbbbbbbbbbbbbbb", REQUEST)
    assert not strongauth.verify_delete_account(verify_key, proof, SPACE, "req_bbbbbbbbbbbb")
    assert not strongauth.verify(verify_key, proof, SPACE, REQUEST, None)  # not a forget proof
    forget = strongauth.prove(key, SPACE, REQUEST, None)
    assert not strongauth.verify_delete_account(verify_key, forget, SPACE, REQUEST)
    assert not strongauth.verify_delete_account(b"short", proof, SPACE, REQUEST)


def test_request_ids_have_their_own_prefix() -> None:
    made = make_id("req", bytes(range(15)))
    assert is_id("req", made) and not is_id("op", made)
    DeleteAccountRequest(request_id=made, proof=b"x")
    with pytest.raises(ValidationError, match="request_id"):
        DeleteAccountRequest(request_id="op_aaaaaaaaaaaa", proof=b"x")


moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)


@given(closes_at=moments, export_until=moments)
def test_the_closing_header_reads_back_what_was_written(
    closes_at: datetime, export_until: datetime
) -> None:
    header = closing_header(closes_at, export_until)
    assert header.startswith("closes_at=") and "; export_until=" in header
    assert parse_closing_header(header) == (closes_at, export_until)


@pytest.mark.parametrize(
    "value",
    ["", "closes_at=2027-03-01T00:00:00Z", "closes_at=soon; export_until=later",
     "closes_at=2027-03-01T00:00:00; export_until=2027-04-01T00:00:00"],
)  # fmt: skip
def test_anything_else_is_not_a_closing_header(value: str) -> None:
    assert parse_closing_header(value) is None
