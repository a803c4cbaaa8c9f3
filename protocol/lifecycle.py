"""The record lifecycle as a table (ARCHITECTURE invariant 12).

Rule 1 (after h11's ``_state.py``): everything that decides which lifecycle transition
an operation on a record may make lives here, as data. The handlers in
``protocol.rules`` look the transition up in ``TABLE`` and keep only the checks of the
op's *content* (the verbatim check of a correction, the independence of a
corroborating source, a rule that would be authority).

Rule 2: the table does not know who stores the record. Device, cloud and the reference
ledger read the same rows through ``rules.decide``.

The key is ``(state, op, initiator, basis)``:

- ``state``: the record's ``LifecycleState``.
- ``op``: the record operation (``Op``).
- ``initiator``: who started it (``Initiator``).
- ``basis``: what the record's current content rests on, as far as its lifecycle cares
  (``Basis``, derived by ``basis_of`` from the content: no store column). It refines the
  source kind: a candidate waits because its content came from external content or an
  import (``EXTERNAL``), or because the assistant wrote a sensitive class or a
  behaviour rule (``UNCONFIRMED``); it stops waiting once the user said or confirmed it,
  or an independent source verified it (``USER``). Source kind alone cannot say this:
  a verified email claim no longer waits, and a sensitive reading of the user's own
  behaviour does.

The value is a ``Move`` (the new state, and whether the op settles the record: its
content then rests on the user's word or on verified evidence, basis ``USER``) or a
``Refusal`` (a ``RefusalCode`` and a reason template naming the record).

What "use again" restores (no store column): a record that is not in use goes back to
``candidate`` when its basis still waits (``EXTERNAL`` or ``UNCONFIRMED``: its content
is external content or an import not verified, or a sensitive class or behaviour rule
the user has not said or confirmed), else to ``active``. This is exact because of the
contract ``consistent`` states and the tests check: a record that is not in use and not
forgotten is a candidate exactly when its basis waits.

Who may do what: only the user confirms, corrects, revises a rule or puts a record back
in use. The assistant never moves a record to ``active``; it may record a corroboration
(the independent evidence, checked by ``rules``, is what activates an external
candidate), take a record out of use (narrowing, undone only by the user), pass time,
reaffirm, restrict and forget (none of which raises a record). The consolidator's
refresh of a record it derived (``rules._consolidate``) keeps a record that is not
active as it is and drops an active one to ``candidate`` when its new content waits; it
is not in this table yet (see ``docs/memory-reference.md``, "The lifecycle table").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from itertools import product
from typing import Final

from protocol.model import (
    EpistemicState,
    Initiator,
    Layer,
    LifecycleState,
    RecordContent,
    Sensitivity,
    SourceKind,
)
from protocol.operations import RefusalCode

CANDIDATE = LifecycleState.CANDIDATE
ACTIVE = LifecycleState.ACTIVE
NOT_IN_USE = LifecycleState.NOT_IN_USE
FORGOTTEN = LifecycleState.FORGOTTEN
USER, ASSISTANT = Initiator.USER, Initiator.ASSISTANT


class Op(StrEnum):
    """The record operations whose outcome changes or depends on the lifecycle state."""

    CONFIRM = "confirm"
    CORROBORATE = "corroborate"
    DONT_USE = "dont_use"
    USE_AGAIN = "use_again"
    CORRECT = "correct"
    REVISE_RULE = "revise_rule"
    REAFFIRM = "reaffirm"
    PASS_TIME = "pass_time"
    RESTRICT = "restrict_usage"
    FORGET = "forget_permanently"


class Basis(StrEnum):
    """What a record's current content rests on, as far as its lifecycle cares."""

    USER = "user"  # said in conversation, confirmed by the user, or verified
    BACKGROUND = "background"  # the assistant's normal-class reading: live without asking
    EXTERNAL = "external"  # external content or an import, not verified
    UNCONFIRMED = "unconfirmed"  # a sensitive class or behaviour rule the user has not confirmed
    GONE = "gone"  # permanently forgotten: the content is gone


WAITING: Final = frozenset({Basis.EXTERNAL, Basis.UNCONFIRMED})
EXTERNAL_KINDS: Final = (SourceKind.EXTERNAL_CONTENT, SourceKind.IMPORT)


def basis_of(content: RecordContent | None) -> Basis:
    """The basis of a record whose current content is ``content`` (None: forgotten).

    - ``USER``: verified (the user confirmed it or wrote the rule, or a second
      independent source corroborated it), or said in conversation (``remember``,
      ``correct``: said and not written by the background consolidation).
    - ``UNCONFIRMED``: otherwise, a sensitive class or a behaviour rule.
    - ``EXTERNAL``: otherwise, from external content or an import.
    - ``BACKGROUND``: everything else (a normal-class fact the assistant derived).
    """
    if content is None:
        return Basis.GONE
    state = content.epistemic_state
    said_in_conversation = state is EpistemicState.SAID and not content.background
    if state is EpistemicState.VERIFIED or said_in_conversation:
        return Basis.USER
    if content.sensitivity is not Sensitivity.NORMAL or content.layer is Layer.BEHAVIOUR_RULE:
        return Basis.UNCONFIRMED
    if content.source_kind in EXTERNAL_KINDS:
        return Basis.EXTERNAL
    return Basis.BACKGROUND


def consistent(state: LifecycleState, basis: Basis) -> bool:
    """The contract every record keeps: forgotten exactly when its content is gone, a
    candidate exactly when (not in use aside) its basis waits for the user."""
    if (state is FORGOTTEN) != (basis is Basis.GONE):
        return False
    if state is CANDIDATE:
        return basis in WAITING
    if state is ACTIVE:
        return basis not in WAITING
    return True


# --- outcomes ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Move:
    """The op is allowed: the record's state becomes ``to``. With ``settles``, the op's
    new version rests on the user's word or verified evidence (basis ``USER``)."""

    to: LifecycleState
    settles: bool = False


@dataclass(frozen=True, slots=True)
class Refusal:
    """The op is refused with ``code``; ``template`` names ``{record}`` and may name its
    ``{state}`` and ``{source}`` (the content's source kind)."""

    name: str
    code: RefusalCode
    template: str

    def reason(self, record_id: str, state: LifecycleState, source: str = "") -> str:
        return self.template.format(record=record_id, state=state.value, source=source)


Outcome = Move | Refusal

IS_FORGOTTEN = Refusal(
    "forgotten",
    RefusalCode.FORGOTTEN,
    "record {record} was permanently forgotten; it cannot be changed or brought back",
)
ONLY_USER_CONFIRMS = Refusal(
    "only_user_confirms",
    RefusalCode.NOT_ALLOWED,
    "record {record}: only the user can confirm a record",
)
CONFIRM_ONLY_CANDIDATE = Refusal(
    "confirm_only_candidate",
    RefusalCode.WRONG_STATE,
    "record {record} is {state}; only a candidate is confirmed",
)
CORROBORATE_ONLY_EXTERNAL = Refusal(
    "corroborate_only_external",
    RefusalCode.WRONG_STATE,
    "record {record} is {state} from {source}; only a candidate from external content is "
    "corroborated",
)
CORROBORATION_IS_NOT_CONFIRMATION = Refusal(
    "corroboration_is_not_confirmation",
    RefusalCode.NOT_ALLOWED,
    "record {record} is a sensitive class or a behaviour rule from {source}; it waits for "
    "the user's confirmation, which a second source does not replace",
)
ALREADY_NOT_IN_USE = Refusal(
    "already_not_in_use", RefusalCode.WRONG_STATE, "record {record} is already not in use"
)
USE_AGAIN_ONLY_NOT_IN_USE = Refusal(
    "use_again_only_not_in_use",
    RefusalCode.WRONG_STATE,
    "record {record} is {state}, not 'not in use'",
)
ONLY_USER_USES_AGAIN = Refusal(
    "only_user_uses_again",
    RefusalCode.NOT_ALLOWED,
    "record {record}: only the user puts a record back in use, never the assistant",
)
ONLY_USER_CORRECTS = Refusal(
    "only_user_corrects",
    RefusalCode.NOT_ALLOWED,
    "record {record}: a correction is in the user's own words; only the user corrects",
)
ONLY_USER_REVISES = Refusal(
    "only_user_revises", RefusalCode.NOT_ALLOWED, "record {record}: only the user revises a rule"
)
REFUSALS: Final = (
    IS_FORGOTTEN,
    ONLY_USER_CONFIRMS,
    CONFIRM_ONLY_CANDIDATE,
    CORROBORATE_ONLY_EXTERNAL,
    CORROBORATION_IS_NOT_CONFIRMATION,
    ALREADY_NOT_IN_USE,
    USE_AGAIN_ONLY_NOT_IN_USE,
    ONLY_USER_USES_AGAIN,
    ONLY_USER_CORRECTS,
    ONLY_USER_REVISES,
)

# --- the table ---------------------------------------------------------------------------


class _Any(StrEnum):
    ANY = "*"


ANY: Final = _Any.ANY
STAYS: Final = "stays"  # a Move to the state the record is in
LIVE = (CANDIDATE, ACTIVE, NOT_IN_USE)

StateKey = LifecycleState | _Any
InitiatorKey = Initiator | _Any
BasisKey = Basis | _Any
Target = LifecycleState | str
Row = tuple[StateKey, Op, InitiatorKey, BasisKey, Refusal | tuple[Target, bool]]


def _rows_for_live(op: Op, initiator: InitiatorKey, target: Target, settles: bool) -> list[Row]:
    return [(state, op, initiator, ANY, (target, settles)) for state in LIVE]


# Rows in order; the first row matching a key decides it (``*`` matches anything). A
# target is a state, or ``stays`` (the state the record is in); ``True`` settles.
ROWS: Final[tuple[Row, ...]] = (
    # confirm: only the user's confirmation takes a candidate to active
    (ANY, Op.CONFIRM, ASSISTANT, ANY, ONLY_USER_CONFIRMS),
    (FORGOTTEN, Op.CONFIRM, ANY, ANY, IS_FORGOTTEN),
    (CANDIDATE, Op.CONFIRM, USER, ANY, (ACTIVE, True)),
    (ANY, Op.CONFIRM, USER, ANY, CONFIRM_ONLY_CANDIDATE),
    # corroborate: a second, independent source activates external content, nothing else
    (FORGOTTEN, Op.CORROBORATE, ANY, ANY, IS_FORGOTTEN),
    (CANDIDATE, Op.CORROBORATE, ANY, Basis.EXTERNAL, (ACTIVE, True)),
    (CANDIDATE, Op.CORROBORATE, ANY, Basis.UNCONFIRMED, CORROBORATION_IS_NOT_CONFIRMATION),
    (ANY, Op.CORROBORATE, ANY, ANY, CORROBORATE_ONLY_EXTERNAL),
    # don't use: out of use, by anyone; the record keeps what it rests on
    (FORGOTTEN, Op.DONT_USE, ANY, ANY, IS_FORGOTTEN),
    (NOT_IN_USE, Op.DONT_USE, ANY, ANY, ALREADY_NOT_IN_USE),
    (CANDIDATE, Op.DONT_USE, ANY, ANY, (NOT_IN_USE, False)),
    (ACTIVE, Op.DONT_USE, ANY, ANY, (NOT_IN_USE, False)),
    # use again: only the user, and back to what the record was: waiting stays waiting
    (FORGOTTEN, Op.USE_AGAIN, ANY, ANY, IS_FORGOTTEN),
    (ANY, Op.USE_AGAIN, ASSISTANT, ANY, ONLY_USER_USES_AGAIN),
    (NOT_IN_USE, Op.USE_AGAIN, USER, Basis.EXTERNAL, (CANDIDATE, False)),
    (NOT_IN_USE, Op.USE_AGAIN, USER, Basis.UNCONFIRMED, (CANDIDATE, False)),
    (NOT_IN_USE, Op.USE_AGAIN, USER, Basis.USER, (ACTIVE, False)),
    (NOT_IN_USE, Op.USE_AGAIN, USER, Basis.BACKGROUND, (ACTIVE, False)),
    (ANY, Op.USE_AGAIN, USER, ANY, USE_AGAIN_ONLY_NOT_IN_USE),
    # correct: the user's own words (checked verbatim) replace it; a record out of use
    # stays out of use
    (FORGOTTEN, Op.CORRECT, ANY, ANY, IS_FORGOTTEN),
    (ANY, Op.CORRECT, ASSISTANT, ANY, ONLY_USER_CORRECTS),
    (CANDIDATE, Op.CORRECT, USER, ANY, (ACTIVE, True)),
    (ACTIVE, Op.CORRECT, USER, ANY, (ACTIVE, True)),
    (NOT_IN_USE, Op.CORRECT, USER, ANY, (NOT_IN_USE, True)),
    # revise a rule: the user writes the rule's words, which accepts it
    (ANY, Op.REVISE_RULE, ASSISTANT, ANY, ONLY_USER_REVISES),
    (FORGOTTEN, Op.REVISE_RULE, ANY, ANY, IS_FORGOTTEN),
    (CANDIDATE, Op.REVISE_RULE, USER, ANY, (ACTIVE, True)),
    (ACTIVE, Op.REVISE_RULE, USER, ANY, (ACTIVE, True)),
    (NOT_IN_USE, Op.REVISE_RULE, USER, ANY, (NOT_IN_USE, True)),
    # reaffirm, pass time, restrict: a new version or a usage change; the state stays
    (FORGOTTEN, Op.REAFFIRM, ANY, ANY, IS_FORGOTTEN),
    *_rows_for_live(Op.REAFFIRM, ANY, STAYS, False),
    (FORGOTTEN, Op.PASS_TIME, ANY, ANY, IS_FORGOTTEN),
    *_rows_for_live(Op.PASS_TIME, ANY, STAYS, False),
    (FORGOTTEN, Op.RESTRICT, ANY, ANY, IS_FORGOTTEN),
    *_rows_for_live(Op.RESTRICT, ANY, STAYS, False),
    # forget permanently: from anywhere but forgotten, for good
    (FORGOTTEN, Op.FORGET, ANY, ANY, IS_FORGOTTEN),
    *_rows_for_live(Op.FORGET, ANY, FORGOTTEN, False),
)

Key = tuple[LifecycleState, Op, Initiator, Basis]


def _matches(pattern: object, value: object) -> bool:
    return pattern is ANY or pattern == value


def _keys() -> list[Key]:
    """Every key the table answers: each live state with each basis a record can have,
    and the forgotten state with basis ``gone``."""
    return [
        (state, op, initiator, basis)
        for state, op, initiator, basis in product(LifecycleState, Op, Initiator, Basis)
        if (state is FORGOTTEN) == (basis is Basis.GONE)
    ]


def _build() -> dict[Key, Outcome]:
    table: dict[Key, Outcome] = {}
    for key in _keys():
        for row in ROWS:
            if all(_matches(p, v) for p, v in zip(row[:4], key, strict=True)):
                answer = row[4]
                if isinstance(answer, Refusal):
                    table[key] = answer
                else:
                    target, settles = answer
                    to = key[0] if target == STAYS else LifecycleState(target)
                    table[key] = Move(to, settles)
                break
        else:  # pragma: no cover - the tests check every key has a row
            raise AssertionError(f"the lifecycle table has no row for {key}")
    return table


TABLE: Final[dict[Key, Outcome]] = _build()


def transition(state: LifecycleState, op: Op, initiator: Initiator, basis: Basis) -> Outcome:
    """The table's answer for one key."""
    return TABLE[(state, op, initiator, basis)]


def after(state: LifecycleState, basis: Basis, move: Move) -> tuple[LifecycleState, Basis]:
    """Where a record in ``state`` with ``basis`` stands after ``move``."""
    if move.to is FORGOTTEN:
        return FORGOTTEN, Basis.GONE
    return move.to, Basis.USER if move.settles else basis


def markdown() -> str:
    """``ROWS`` as the Markdown table ``docs/memory-reference.md`` shows (a test keeps
    the two equal): one line per row, first match wins, ``*`` matches anything."""
    lines = [
        "| State | Operation | By | Basis | Outcome |",
        "|---|---|---|---|---|",
    ]
    for state, op, initiator, basis, outcome in ROWS:
        if isinstance(outcome, Refusal):
            shown = f"refused `{outcome.code.value}`: {outcome.template}"
        else:
            target, settles = outcome
            to = "stays" if target == STAYS else LifecycleState(target).value
            shown = f"→ {to}" + (", settles" if settles else "")
        lines.append(
            f"| {state.value} | {op.value} | {initiator.value} | {basis.value} | {shown} |"
        )
    return "\n".join(lines) + "\n"
