"""How a record is shown: every line labelled with its epistemic state.

Invariant: only *said* and *verified* records are quoted as the user's words, dated
and verbatim; anything else is labelled as what it is and never as a quote.
"""

from __future__ import annotations

from datetime import datetime

from protocol.model import EpistemicState

QUOTABLE = frozenset({EpistemicState.SAID, EpistemicState.VERIFIED})


def present(text: str, state: EpistemicState, said_on: datetime) -> str:
    """One presentation line for a record."""
    if state in QUOTABLE:
        return f'On {said_on.date().isoformat()} you wrote: "{text}"'
    return f"[{state.value}, not your words] {text}"
