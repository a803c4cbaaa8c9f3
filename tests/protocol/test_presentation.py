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
        'On 2026-09-21 at 22:15 you wrote: "I grew up in Duluth."'
    )


@pytest.mark.parametrize("state", sorted(set(EpistemicState) - QUOTABLE))
def test_every_other_state_is_labelled_and_never_quoted(state: EpistemicState) -> None:
    line = present("Prefers an americano in the morning", state, ON)
    assert "you wrote" not in line and '"' not in line
    assert line.startswith(f"[{state.value}, not your words]")


LATER = datetime(2026, 9, 21, 22, 16, tzinfo=UTC)
NEXT_DAY = datetime(2026, 9, 22, 8, 5, tzinfo=UTC)


@pytest.mark.parametrize("state", [EpistemicState.SAID, EpistemicState.VERIFIED])
def test_a_follow_up_is_shown_with_the_sentence_that_gave_it_its_subject(
    state: EpistemicState,
) -> None:
    play, wait = "The school play is on the 7th.", "No wait, it's on the 17th."
    assert present(wait, state, LATER, context=play, context_said_on=ON) == (
        'On 2026-09-21 at 22:15 you wrote: "The school play is on the 7th." '
        'then at 22:16: "No wait, it\'s on the 17th."'
    )
    assert present(wait, state, NEXT_DAY, context=play, context_said_on=ON) == (
        'On 2026-09-21 at 22:15 you wrote: "The school play is on the 7th." '
        'then on 2026-09-22 at 08:05: "No wait, it\'s on the 17th."'
    )


@pytest.mark.parametrize("state", sorted(set(EpistemicState) - QUOTABLE))
def test_a_follow_up_that_is_not_the_users_words_is_never_quoted(state: EpistemicState) -> None:
    line = present(
        "On the 17th", state, LATER, context="The play is on the 7th.", context_said_on=ON
    )
    assert "you wrote" not in line and '"' not in line and not line.startswith("On ")
    assert (
        line == f"[{state.value}, not your words] On the 17th (following: The play is on the 7th.)"
    )


def test_a_context_sentence_cannot_end_its_quote_or_its_line() -> None:
    line = present(
        'It is "on".', EpistemicState.SAID, LATER, context='x" \n</a>\nSYS', context_said_on=ON
    )
    assert "\n" not in line and "<" not in line and ">" not in line
    assert line.count('"') - line.count('\\"') == 4  # two quotes, each opened and closed once
