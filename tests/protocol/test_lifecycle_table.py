"""The record lifecycle table (ARCHITECTURE invariant 12, issue 17 item 4).

(a) The table, walked as a graph over every sequence of ops, has no path from a
candidate to active but the user's word (confirm, a correction in their words, a rule
they wrote) or an independent corroboration of external content. (b) A Hypothesis state
machine over the reference ledger: random ops by user and assistant on records of every
source kind, sensitivity and layer never activate an unconfirmed candidate, and
don't use / use again restore the state. (c) The concrete bug: dont_use then use_again
took any candidate to active. And ``decide`` answers exactly what the table says, for
every key; the memory reference shows the table the code holds.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from protocol import lifecycle, rules
from protocol.ledger import Ledger, step
from protocol.lifecycle import ROWS, TABLE, Basis, Move, Op, Refusal, basis_of, consistent
from protocol.model import (
    EpistemicState,
    Evidence,
    Initiator,
    Layer,
    LifecycleState,
    Observation,
    RecordContent,
    Sensitivity,
    SourceKind,
    TimeKind,
    UsageRestriction,
)
from protocol.operations import (
    AddEpisode,
    AnyOperation,
    Confirm,
    Consolidate,
    Correct,
    Corroborate,
    DontUse,
    ForgetPermanently,
    Infer,
    PassTime,
    Reaffirm,
    Receipt,
    ReceiptStatus,
    RefusalCode,
    Remember,
    RestrictUsage,
    ReviseRule,
    UseAgain,
)
from protocol.rules import (
    Accept,
    AddVersion,
    EpisodeFacts,
    Facts,
    ForgetRecords,
    RecordFacts,
    Refuse,
    SetLifecycle,
    SetUsage,
    decide,
)

USER, ASSISTANT = Initiator.USER, Initiator.ASSISTANT
CANDIDATE, ACTIVE = LifecycleState.CANDIDATE, LifecycleState.ACTIVE
NOT_IN_USE, FORGOTTEN = LifecycleState.NOT_IN_USE, LifecycleState.FORGOTTEN
T0 = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)
REC = "rec_lifecycle000001"
DOC = Path(__file__).resolve().parents[2] / "docs" / "memory-reference.md"

Node = tuple[LifecycleState, Basis]
Edge = tuple[Op, Initiator]


# --- (a) the table as a graph ---------------------------------------------------------------


def confirms(op: Op, initiator: Initiator, basis: Basis) -> bool:
    """The only ways a candidate may go live: the user's word, or a second independent
    source for external content (``rules`` checks the source is independent)."""
    users_word = initiator is USER and op in (Op.CONFIRM, Op.CORRECT, Op.REVISE_RULE)
    return users_word or (op is Op.CORROBORATE and basis is Basis.EXTERNAL)


def moves(
    table: Mapping[tuple[LifecycleState, Op, Initiator, Basis], lifecycle.Outcome],
) -> dict[Node, list[tuple[Edge, Node]]]:
    graph: dict[Node, list[tuple[Edge, Node]]] = {}
    for (state, op, initiator, basis), outcome in table.items():
        if isinstance(outcome, Move):
            graph.setdefault((state, basis), []).append(
                ((op, initiator), lifecycle.after(state, basis, outcome))
            )
    return graph


def unconfirmed_path_to_active(
    table: Mapping[tuple[LifecycleState, Op, Initiator, Basis], lifecycle.Outcome],
) -> list[Edge] | None:
    """A sequence of ops, none of them a confirmation, that takes a candidate to active
    (breadth first over every sequence, so the shortest), or None."""
    graph = moves(table)
    starts = [(CANDIDATE, b) for b in Basis if consistent(CANDIDATE, b)]
    seen: set[Node] = set(starts)
    queue: deque[tuple[Node, list[Edge]]] = deque((s, []) for s in starts)
    while queue:
        node, path = queue.popleft()
        for (op, initiator), to in graph.get(node, []):
            if confirms(op, initiator, node[1]):
                continue
            if to[0] is ACTIVE:
                return [*path, (op, initiator)]
            if to not in seen:
                seen.add(to)
                queue.append((to, [*path, (op, initiator)]))
    return None


def test_every_key_has_exactly_one_answer_and_every_row_decides_some() -> None:
    keys = [
        key
        for key in _all_keys()
        if (key[0] is FORGOTTEN) == (key[3] is Basis.GONE)  # forgotten: content gone
    ]
    assert sorted(TABLE, key=str) == sorted(keys, key=str)
    used = {id(_first_row(key)) for key in TABLE}
    unused = [row for row in ROWS if id(row) not in used]
    assert unused == [], f"rows no key reaches: {unused}"


def test_no_path_from_a_candidate_to_active_but_a_confirmation() -> None:
    assert unconfirmed_path_to_active(TABLE) is None


def test_the_walk_finds_the_old_bug() -> None:
    """The walk would have failed before: use_again took any record to active."""
    buggy = dict(TABLE)
    for basis in (Basis.EXTERNAL, Basis.UNCONFIRMED):
        buggy[(NOT_IN_USE, Op.USE_AGAIN, USER, basis)] = Move(ACTIVE)
    assert unconfirmed_path_to_active(buggy) == [(Op.DONT_USE, USER), (Op.USE_AGAIN, USER)]


def test_the_assistant_never_moves_a_record_to_active_on_its_own_word() -> None:
    for (state, op, initiator, basis), outcome in TABLE.items():
        if initiator is not ASSISTANT or not isinstance(outcome, Move):
            continue
        if outcome.to is ACTIVE and state is not ACTIVE:
            # only independent evidence it records, and only for an external candidate
            assert (state, op, basis) == (CANDIDATE, Op.CORROBORATE, Basis.EXTERNAL)
        else:
            assert outcome.to in (state, NOT_IN_USE, FORGOTTEN) and not outcome.settles


def test_only_the_user_confirms_corrects_revises_and_uses_again() -> None:
    for op, refusal in [
        (Op.CONFIRM, lifecycle.ONLY_USER_CONFIRMS),
        (Op.CORRECT, lifecycle.ONLY_USER_CORRECTS),
        (Op.REVISE_RULE, lifecycle.ONLY_USER_REVISES),
        (Op.USE_AGAIN, lifecycle.ONLY_USER_USES_AGAIN),
    ]:
        for (state, key_op, initiator, _basis), outcome in TABLE.items():
            if key_op is op and initiator is ASSISTANT and state is not FORGOTTEN:
                assert outcome == refusal


def test_every_state_reachable_from_a_consistent_one_is_consistent() -> None:
    graph = moves(TABLE)
    for (state, basis), edges in graph.items():
        if not consistent(state, basis):
            continue
        for edge, to in edges:
            assert consistent(*to), f"{(state, basis)} --{edge}--> {to}"


@pytest.mark.parametrize(
    "node", [(s, b) for s in (CANDIDATE, ACTIVE) for b in Basis if consistent(s, b)]
)
def test_dont_use_then_use_again_restores_the_state(node: Node) -> None:
    state, basis = node
    out = TABLE[(state, Op.DONT_USE, USER, basis)]
    assert isinstance(out, Move) and out.to is NOT_IN_USE
    back = TABLE[(NOT_IN_USE, Op.USE_AGAIN, USER, basis)]
    assert isinstance(back, Move) and back.to is state


def test_the_table_checks_external_kinds_as_the_rules_do() -> None:
    assert lifecycle.EXTERNAL_KINDS == rules.EXTERNAL_KINDS


# --- decide answers what the table says, for every key --------------------------------------


def _content(basis: Basis, op: Op) -> RecordContent:
    fields: dict[str, Any] = {
        "text": "I grew up in Duluth.",
        "source_episode_ids": ["ep_own00000001"],
        "time_kind": TimeKind.PERMANENT,
    }
    if op is Op.REAFFIRM:
        fields.update(time_kind=TimeKind.FOR_NOW, expected_end=T0)
    if op is Op.PASS_TIME:
        fields.update(
            time_kind=TimeKind.ONE_OFF,
            valid_from=T0 - timedelta(days=3),
            valid_until=T0 - timedelta(days=2),
        )
    if basis is Basis.USER:
        state = EpistemicState.VERIFIED if op is Op.REVISE_RULE else EpistemicState.SAID
        fields.update(epistemic_state=state, conversation_id="c1")
    elif basis is Basis.BACKGROUND:
        fields.update(
            epistemic_state=EpistemicState.INFERRED, source_kind=SourceKind.USER_BEHAVIOUR
        )
    elif basis is Basis.EXTERNAL:
        fields.update(
            epistemic_state=EpistemicState.OBSERVED,
            source_kind=SourceKind.EXTERNAL_CONTENT,
            evidence=Evidence(
                observations=[
                    Observation(
                        source_id="email:m1", source_kind=SourceKind.EXTERNAL_CONTENT, at=T0
                    )
                ]
            ),
        )
    else:  # unconfirmed: a sensitive reading of a page, or a proposed rule
        fields.update(
            epistemic_state=EpistemicState.INFERRED,
            source_kind=SourceKind.EXTERNAL_CONTENT,
            sensitivity=Sensitivity.HEALTH,
        )
    if op is Op.REVISE_RULE and basis in (Basis.USER, Basis.UNCONFIRMED):
        fields.update(
            layer=Layer.BEHAVIOUR_RULE,
            text="Keep answers short.",
            source_kind=SourceKind.USER_BEHAVIOUR,
            sensitivity=Sensitivity.NORMAL,
        )
    content = RecordContent(**fields)
    assert basis_of(content) is basis
    return content


_EPISODES = {
    "ep_own00000001": EpisodeFacts("ep_own00000001", "c1", "I grew up in Duluth.", T0),
    "ep_new00000001": EpisodeFacts("ep_new00000001", "c1", "I grew up in Bergen.", T0),
    "ep_web00000001": EpisodeFacts(
        "ep_web00000001", "inbox", "x", T0, SourceKind.EXTERNAL_CONTENT, "web_page:w2"
    ),
}


def _op(op: Op, initiator: Initiator) -> AnyOperation:
    base: dict[str, Any] = {"op_id": "op_lifecycle000001", "made_at": T0, "initiated_by": initiator}
    said = {"conversation_id": "c1", "source_episode_ids": ["ep_new00000001"]}
    built: dict[Op, Callable[[], AnyOperation]] = {
        Op.CONFIRM: lambda: Confirm(**base, record_id=REC),
        Op.CORROBORATE: lambda: Corroborate(**base, record_id=REC, episode_id="ep_web00000001"),
        Op.DONT_USE: lambda: DontUse(**base, record_id=REC),
        Op.USE_AGAIN: lambda: UseAgain(**base, record_id=REC),
        Op.CORRECT: lambda: Correct(**base, record_id=REC, text="I grew up in Bergen.", **said),
        Op.REVISE_RULE: lambda: ReviseRule(**base, record_id=REC, text="Keep answers brief."),
        Op.REAFFIRM: lambda: Reaffirm(**base, record_id=REC, still_true=True),
        Op.PASS_TIME: lambda: PassTime(**base, record_id=REC),
        Op.RESTRICT: lambda: RestrictUsage(
            **base, record_id=REC, restriction=UsageRestriction(area=None, project="thesis")
        ),
        Op.FORGET: lambda: ForgetPermanently(**base, record_id=REC),
    }
    return built[op]()


def _state_after(decision: Accept, before: LifecycleState) -> tuple[LifecycleState, Basis | None]:
    for effect in decision.effects:
        if isinstance(effect, AddVersion):
            return effect.lifecycle_state, basis_of(effect.content)
        if isinstance(effect, SetLifecycle):
            return effect.lifecycle_state, None
        if isinstance(effect, SetUsage):
            return before, None
        if isinstance(effect, ForgetRecords):
            return FORGOTTEN, Basis.GONE
    raise AssertionError(f"no lifecycle effect in {decision}")


# A move the table allows that the op's content check refuses: only a behaviour rule is
# revised as one, and no rule rests on these bases.
_CONTENT_REFUSED = {(Op.REVISE_RULE, Basis.BACKGROUND), (Op.REVISE_RULE, Basis.EXTERNAL)}


@pytest.mark.parametrize("key", sorted(TABLE, key=str), ids=lambda k: "-".join(map(str, k)))
def test_decide_answers_what_the_table_says(
    key: tuple[LifecycleState, Op, Initiator, Basis],
) -> None:
    state, op, initiator, basis = key
    content = None if basis is Basis.GONE else _content(basis, op)
    version = 0 if content is None else 1
    facts = Facts(
        record=RecordFacts(REC, state, version, content),
        episodes=_EPISODES,
        projects={"thesis": True},
    )
    decision = decide(_op(op, initiator), facts)
    expected = TABLE[key]
    if isinstance(expected, Refusal):
        source = content.source_kind.value if content is not None else ""
        assert decision == Refuse(expected.code, expected.reason(REC, state, source))
        return
    if (op, basis) in _CONTENT_REFUSED:
        assert isinstance(decision, Refuse) and decision.code is RefusalCode.WRONG_STATE
        assert "not a behaviour rule" in decision.reason
        return
    assert isinstance(decision, Accept), decision
    after, new_basis = _state_after(decision, state)
    assert after is expected.to
    if new_basis is not None and after is not FORGOTTEN:
        assert new_basis is (Basis.USER if expected.settles else basis)


# --- (c) the concrete bug ---------------------------------------------------------------


class Space:
    """A reference ledger, fresh ids, and a clock a minute per op."""

    def __init__(self) -> None:
        self.ledger = Ledger()
        self._n = count(1)

    def base(self, by: Initiator = USER) -> dict[str, Any]:
        n = next(self._n)
        return {"op_id": f"op_{n:012d}", "made_at": T0 + timedelta(minutes=n), "initiated_by": by}

    def run(self, op: AnyOperation) -> Receipt:
        _, receipt = step(self.ledger, op, 0, op.made_at)
        return receipt

    def episode(self, text: str, kind: SourceKind, source: str | None, conv: str = "c1") -> str:
        episode_id = f"ep_{next(self._n):012d}"
        base = self.base()
        receipt = self.run(
            AddEpisode(
                **base,
                episode_id=episode_id,
                conversation_id=conv,
                text=text,
                typed_at=base["made_at"],
                source_kind=kind,
                source_id=source,
            )
        )
        assert receipt.status is ReceiptStatus.APPLIED, receipt
        return episode_id

    def state(self, record_id: str) -> LifecycleState:
        return self.ledger.records[record_id].lifecycle


def _external_candidate(space: Space) -> str:
    ep = space.episode("The shop opens at 9.", SourceKind.EXTERNAL_CONTENT, "web_page:shop")
    body = RecordContent(
        text="The shop opens at 9.",
        epistemic_state=EpistemicState.OBSERVED,
        source_episode_ids=[ep],
        source_kind=SourceKind.EXTERNAL_CONTENT,
    )
    receipt = space.run(Consolidate(**space.base(ASSISTANT), record_id=REC, content=body))
    assert receipt.status is ReceiptStatus.APPLIED, receipt
    return REC


def _sensitive_background_candidate(
    space: Space, how: type[Infer] | type[Consolidate] = Infer
) -> str:
    """A sensitive class the assistant derived: a candidate until the user confirms
    (``how``: ``Consolidate`` makes it the consolidator's own, which it may refresh)."""
    ep = space.episode("My knee hurts again.", SourceKind.USER_STATEMENT, None)
    body = RecordContent(
        text="Has a knee problem.",
        epistemic_state=EpistemicState.INFERRED,
        source_episode_ids=[ep],
        source_kind=SourceKind.USER_BEHAVIOUR,
        sensitivity=Sensitivity.HEALTH,
    )
    receipt = space.run(how(**space.base(ASSISTANT), record_id=REC, content=body))
    assert receipt.status is ReceiptStatus.APPLIED, receipt
    return REC


def _proposed_rule(space: Space) -> str:
    ep = space.episode("short answers, mornings", SourceKind.USER_BEHAVIOUR, "app")
    body = RecordContent(
        text="Keep answers short in the morning.",
        epistemic_state=EpistemicState.INFERRED,
        layer=Layer.BEHAVIOUR_RULE,
        source_episode_ids=[ep],
        source_kind=SourceKind.USER_BEHAVIOUR,
    )
    receipt = space.run(Consolidate(**space.base(ASSISTANT), record_id=REC, content=body))
    assert receipt.status is ReceiptStatus.APPLIED, receipt
    return REC


@pytest.mark.parametrize(
    "make", [_external_candidate, _sensitive_background_candidate, _proposed_rule]
)
def test_dont_use_then_use_again_leaves_a_candidate_a_candidate(
    make: Callable[[Space], str],
) -> None:
    space = Space()
    record = make(space)
    assert space.state(record) is CANDIDATE
    assert space.run(DontUse(**space.base(), record_id=record)).status is ReceiptStatus.APPLIED
    assert space.state(record) is NOT_IN_USE
    again = space.run(UseAgain(**space.base(), record_id=record))
    assert again.status is ReceiptStatus.APPLIED
    assert space.state(record) is CANDIDATE  # was: active, without the user's confirmation
    by_assistant = space.run(Confirm(**space.base(ASSISTANT), record_id=record))
    assert by_assistant.code is RefusalCode.NOT_ALLOWED and record in (by_assistant.reason or "")
    assert space.run(Confirm(**space.base(), record_id=record)).status is ReceiptStatus.APPLIED
    assert space.state(record) is ACTIVE
    space.run(DontUse(**space.base(), record_id=record))
    space.run(UseAgain(**space.base(), record_id=record))
    assert space.state(record) is ACTIVE  # confirmed: it comes back active


def test_the_assistant_cannot_use_again_or_correct() -> None:
    space = Space()
    record = _sensitive_background_candidate(space)
    space.run(DontUse(**space.base(ASSISTANT), record_id=record))  # narrowing is allowed
    assert space.state(record) is NOT_IN_USE
    again = space.run(UseAgain(**space.base(ASSISTANT), record_id=record))
    assert again.code is RefusalCode.NOT_ALLOWED and record in (again.reason or "")
    ep = space.episode("My knee is fine now.", SourceKind.USER_STATEMENT, None)
    fix = space.run(
        Correct(
            **space.base(ASSISTANT),
            record_id=record,
            text="My knee is fine now.",
            conversation_id="c1",
            source_episode_ids=[ep],
        )
    )
    assert fix.code is RefusalCode.NOT_ALLOWED and "only the user corrects" in (fix.reason or "")
    assert space.state(record) is NOT_IN_USE


def test_a_second_source_does_not_confirm_a_sensitive_external_candidate() -> None:
    space = Space()
    ep = space.episode("Patients like you have diabetes.", SourceKind.EXTERNAL_CONTENT, "web:a")
    body = RecordContent(
        text="Has diabetes.",
        epistemic_state=EpistemicState.INFERRED,
        source_episode_ids=[ep],
        source_kind=SourceKind.EXTERNAL_CONTENT,
        sensitivity=Sensitivity.HEALTH,
    )
    assert space.run(Infer(**space.base(ASSISTANT), record_id=REC, content=body)).status is (
        ReceiptStatus.APPLIED
    )
    other = space.episode("Has diabetes.", SourceKind.EXTERNAL_CONTENT, "email:b")
    receipt = space.run(Corroborate(**space.base(ASSISTANT), record_id=REC, episode_id=other))
    assert receipt.code is RefusalCode.NOT_ALLOWED
    assert REC in (receipt.reason or "") and "waits for the user's confirmation" in (
        receipt.reason or ""
    )
    assert space.state(REC) is CANDIDATE


def test_a_refresh_that_drops_what_a_candidate_waits_for_is_not_a_way_around() -> None:
    space = Space()
    record = _sensitive_background_candidate(space, Consolidate)  # one it may refresh
    assert space.state(record) is CANDIDATE
    held = space.ledger.records[record].content
    assert held is not None
    normal = held.model_copy(update={"sensitivity": Sensitivity.NORMAL})
    refresh = space.run(Consolidate(**space.base(ASSISTANT), record_id=record, content=normal))
    assert refresh.status is ReceiptStatus.APPLIED and space.state(record) is CANDIDATE
    space.run(DontUse(**space.base(), record_id=record))
    space.run(UseAgain(**space.base(), record_id=record))
    assert space.state(record) is CANDIDATE


# --- (b) random op sequences over the reference ledger ------------------------------------


_KINDS = list(SourceKind)
_CREATES = st.fixed_dictionaries(
    {
        "how": st.sampled_from(["infer", "consolidate", "remember"]),
        "source_kind": st.sampled_from(_KINDS),
        "sensitivity": st.sampled_from([Sensitivity.NORMAL, Sensitivity.HEALTH]),
        "layer": st.sampled_from(list(Layer)),
        "said": st.booleans(),
        "by": st.sampled_from([USER, ASSISTANT]),
    }
)
_RECORD_OPS = [
    "confirm",
    "corroborate",
    "dont_use",
    "use_again",
    "correct",
    "revise_rule",
    "reaffirm",
    "pass_time",
    "restrict",
    "refresh",
    "forget",
]
_SETTLING = {"confirm", "corroborate", "correct", "revise_rule"}


class LifecycleMachine(RuleBasedStateMachine):
    """Random record ops by user and assistant, on records of every source kind,
    sensitivity and layer. Tracks which records the user's word or independent evidence
    settled; an active record is always one of them or was created live."""

    records = Bundle("records")

    def __init__(self) -> None:
        super().__init__()
        self.space = Space()
        episode = self.space.episode
        self.episodes = {
            SourceKind.USER_STATEMENT: episode(
                "I grew up in Duluth. My knee hurts.", SourceKind.USER_STATEMENT, None
            ),
            SourceKind.USER_BEHAVIOUR: episode("walks daily", SourceKind.USER_BEHAVIOUR, "app"),
            SourceKind.CONNECTED_SOURCE: episode(
                "Dentist at 9.", SourceKind.CONNECTED_SOURCE, "calendar:me"
            ),
            SourceKind.EXTERNAL_CONTENT: episode(
                "The shop opens at 9.", SourceKind.EXTERNAL_CONTENT, "web_page:a", "inbox"
            ),
            SourceKind.IMPORT: episode("The shop opens at 9.", SourceKind.IMPORT, "dump", "imp"),
        }
        self.witnesses = [
            episode("The shop opens at 9.", SourceKind.EXTERNAL_CONTENT, "email:b", "inbox"),
            self.episodes[SourceKind.EXTERNAL_CONTENT],
            self.episodes[SourceKind.IMPORT],
        ]
        self.correction = episode("I grew up in Bergen.", SourceKind.USER_STATEMENT, None)
        self.settled: set[str] = set()  # created live, or settled by the user or evidence
        self.ids = count(1)

    def _content(self, spec: Mapping[str, Any]) -> RecordContent:
        kind: SourceKind = spec["source_kind"]
        said = spec["said"] and kind is SourceKind.USER_STATEMENT
        return RecordContent(
            text="I grew up in Duluth." if said else "Likes the shop at 9.",
            epistemic_state=EpistemicState.SAID if said else EpistemicState.INFERRED,
            conversation_id="c1" if said else None,
            source_episode_ids=[self.episodes[kind]],
            source_kind=kind,
            sensitivity=spec["sensitivity"],
            layer=spec["layer"],
        )

    @rule(target=records, spec=_CREATES)
    def create(self, spec: Mapping[str, Any]) -> str:
        record_id = f"rec_{next(self.ids):012d}"
        base = self.space.base(spec["by"])
        op: AnyOperation
        if spec["how"] == "remember":
            op = Remember(
                **base,
                record_id=record_id,
                text="My knee hurts.",
                conversation_id="c1",
                source_episode_ids=[self.episodes[SourceKind.USER_STATEMENT]],
                sensitivity=spec["sensitivity"],
            )
        elif spec["how"] == "infer":
            body = self._content({**spec, "said": False})
            op = Infer(**base, record_id=record_id, content=body)
        else:
            op = Consolidate(**base, record_id=record_id, content=self._content(spec))
        receipt = self.space.run(op)
        if receipt.status is ReceiptStatus.APPLIED and self.space.state(record_id) is ACTIVE:
            self.settled.add(record_id)
        return record_id

    def _op(self, what: str, record_id: str, by: Initiator, witness: int) -> AnyOperation | None:
        base = self.space.base(by)
        held = self.space.ledger.records.get(record_id)
        simple: dict[str, Callable[[], AnyOperation]] = {
            "confirm": lambda: Confirm(**base, record_id=record_id),
            "corroborate": lambda: Corroborate(
                **base, record_id=record_id, episode_id=self.witnesses[witness]
            ),
            "dont_use": lambda: DontUse(**base, record_id=record_id),
            "use_again": lambda: UseAgain(**base, record_id=record_id),
            "correct": lambda: Correct(
                **base,
                record_id=record_id,
                text="I grew up in Bergen.",
                conversation_id="c1",
                source_episode_ids=[self.correction],
            ),
            "revise_rule": lambda: ReviseRule(**base, record_id=record_id, text="Keep it short."),
            "reaffirm": lambda: Reaffirm(**base, record_id=record_id, still_true=False),
            "pass_time": lambda: PassTime(**base, record_id=record_id),
            "restrict": lambda: RestrictUsage(**base, record_id=record_id, restriction=None),
            "forget": lambda: ForgetPermanently(**base, record_id=record_id),
        }
        if what != "refresh":
            return simple[what]()
        # the consolidator refreshes what it derived with more evidence: what the record
        # rests on stays (a refresh that changes it is the known gap, pinned above)
        content = held.content if held is not None else None
        if content is None or content.epistemic_state is EpistemicState.VERIFIED:
            return None
        return Consolidate(**base, record_id=record_id, content=content)

    @rule(
        record_id=records,
        what=st.sampled_from(_RECORD_OPS),
        by=st.sampled_from([USER, ASSISTANT]),
        witness=st.integers(0, 2),
    )
    def act(self, record_id: str, what: str, by: Initiator, witness: int) -> None:
        if record_id not in self.space.ledger.records:
            return
        before = self.space.state(record_id)
        op = self._op(what, record_id, by, witness)
        if op is None:
            return
        receipt = self.space.run(op)
        after = self.space.state(record_id)
        if receipt.status is ReceiptStatus.APPLIED and what in _SETTLING:
            if what != "corroborate":
                assert by is USER, f"{what} by the assistant was applied"
            self.settled.add(record_id)
        if by is ASSISTANT and after is ACTIVE and before is not ACTIVE:
            assert what == "corroborate", f"the assistant's {what} activated {record_id}"

    @rule(record_id=records)
    def dont_use_then_use_again(self, record_id: str) -> None:
        if record_id not in self.space.ledger.records:
            return
        before = self.space.state(record_id)
        out = self.space.run(DontUse(**self.space.base(), record_id=record_id))
        if out.status is not ReceiptStatus.APPLIED:
            assert before in (NOT_IN_USE, FORGOTTEN)
            return
        back = self.space.run(UseAgain(**self.space.base(), record_id=record_id))
        assert back.status is ReceiptStatus.APPLIED
        assert self.space.state(record_id) is before

    @invariant()
    def no_unconfirmed_candidate_is_active(self) -> None:
        for record_id, held in self.space.ledger.records.items():
            if held.lifecycle is ACTIVE:
                assert record_id in self.settled, f"{record_id} went active unconfirmed"

    @invariant()
    def the_state_agrees_with_what_the_content_rests_on(self) -> None:
        for record_id, held in self.space.ledger.records.items():
            assert consistent(held.lifecycle, basis_of(held.content)), record_id


LifecycleMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_random_ops_never_activate_an_unconfirmed_candidate = LifecycleMachine.TestCase


# --- the memory reference shows this table ------------------------------------------------


def test_the_memory_reference_shows_the_codes_table() -> None:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(
        r"<!-- lifecycle-table:start -->\n(.*?)<!-- lifecycle-table:end -->", text, re.S
    )
    assert found is not None, "docs/memory-reference.md has no lifecycle table markers"
    assert found.group(1) == lifecycle.markdown(), (
        "docs/memory-reference.md's lifecycle table differs from protocol.lifecycle.ROWS; "
        "paste protocol.lifecycle.markdown() between the markers"
    )


# --- helpers ------------------------------------------------------------------------------


def _all_keys() -> Iterable[tuple[LifecycleState, Op, Initiator, Basis]]:
    for state in LifecycleState:
        for op in Op:
            for initiator in Initiator:
                for basis in Basis:
                    yield state, op, initiator, basis


def _first_row(key: tuple[LifecycleState, Op, Initiator, Basis]) -> lifecycle.Row:
    for row in ROWS:
        if all(p is lifecycle.ANY or p == v for p, v in zip(row[:4], key, strict=True)):
            return row
    raise AssertionError(f"no row for {key}")
