"""Bulk actions on the waiting items: each selected record goes through the same agent
call as its single button, one at a time, best effort.

Invariants: every selected id is answered (done, or not done with a reason naming it);
one that cannot be done (not waiting here, words that need the two-step confirm, a
refusal from the agent) does not stop or undo the others, which are each an ordinary
local operation of their own; the sentence names the records by their words, never in
quotes (only the user's own words are ever quoted, and only as "you said").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from device.errors import DeviceError
from device.views import RecordView
from protocol.errors import ProtocolError

SELECT = "select-"  # the checkbox of record R is the form field ``select-R``
MAX_SELECTED = 1000
SNIPPET = 60


def selected(fields: Mapping[str, Any]) -> list[str]:
    """The record ids ticked in a form (``select-<id>`` = on), in form order."""
    ids = [k[len(SELECT) :] for k, v in fields.items() if k.startswith(SELECT) and v == "on"]
    return ids[:MAX_SELECTED]


def snippet(text: str | None) -> str:
    words = " ".join((text or "").split())
    return words if len(words) <= SNIPPET else words[: SNIPPET - 1] + "\u2026"


@dataclass(slots=True)
class Outcome:
    done: list[str] = field(default_factory=list)  # the words of each record done
    not_done: list[str] = field(default_factory=list)  # "<id>: <why>"


def run_each(
    ids: Sequence[str],
    waiting: Mapping[str, RecordView],
    act: Callable[[str], Any],
    *,
    two_step: bool,
) -> Outcome:
    """``act`` on each id that is waiting; ``two_step``: leave out a record whose
    confirmation needs its warning page (a source's or an import's words)."""
    outcome = Outcome()
    for record_id in ids:
        shown_id = record_id[:80]
        view = waiting.get(record_id)
        if view is None:
            outcome.not_done.append(f"{shown_id}: it is not waiting for confirmation here")
            continue
        if two_step and view.confirm_warning is not None:
            outcome.not_done.append(
                f"{shown_id} ({snippet(view.text)}): these are not your words; open it to "
                "read where it comes from, then confirm it there"
            )
            continue
        try:
            act(record_id)
        except (DeviceError, ProtocolError, ValueError) as exc:
            outcome.not_done.append(f"{shown_id} ({snippet(view.text)}): {exc}")
            continue
        outcome.done.append(snippet(view.text) or shown_id)
    return outcome


def sentence(outcome: Outcome, done_word: str, not_done_word: str, asked: int) -> str:
    """What the flash says: how many were done, each by its words, and each one not
    done with its reason."""
    if asked == 0:
        return "Nothing was selected: tick the items first."
    parts = [f"{done_word} {len(outcome.done)} of {asked}."]
    if outcome.done:
        parts.append(f"{done_word}: " + " \u00b7 ".join(outcome.done) + ".")
    if outcome.not_done:
        parts.append(f"{not_done_word}: " + "; ".join(outcome.not_done) + ".")
    return " ".join(parts)
