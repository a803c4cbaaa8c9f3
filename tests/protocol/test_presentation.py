"""Inferences never come back as the user's words (invariant 2)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from protocol.model import EpistemicState
from protocol.presentation import QUOTABLE, present

ON = datetime(2026, 9, 21, 22, 15, tzinfo=UTC)


@pytest.mark.parametrize("state", [EpistemicState.SAID, EpistemicState.VERIFIED])
def test_said_and_verified_come_back_as_a_dated_verbatim_quote(state: EpistemicState) -> None:
    assert present("I grew up in Duluth.", state, ON) == (
        'On 2026-09-21 you wrote: "I grew up in Duluth."'
    )


@pytest.mark.parametrize("state", sorted(set(EpistemicState) - QUOTABLE))
def test_every_other_state_is_labelled_and_never_quoted(state: EpistemicState) -> None:
    line = present("Prefers an americano in the morning", state, ON)
    assert "you wrote" not in line and '"' not in line
    assert line.startswith(f"[{state.value}, not your words]")
