"""The eight retrieval steps, each a pure function from one stage to the next.

Invariants:
- The order is fixed: task_area -> state_filter -> policy_gate -> opinion_filter ->
  search -> rank -> smallest_subset -> present. Each step accepts only the exact
  stage the previous step returns, and a stage can only be made by its step
  (``StepOrderError`` otherwise), so no step can be skipped or reordered.
- Search scores only records that passed steps 1-4: an index hit is looked up in the
  filtered stage by id, so a stale index can never bring back a record that is not in
  use, invalid, forgotten, out of area, without consent or an opinion in a factual answer.
- A record superseded by an active newer record is never a hit of its own; it can
  only come back beside its successor, labelled outdated (with the newer one current).
  A search hit on it brings the current statement of its chain (its successors walked
  to the one not superseded, each of which passed steps 1-4; nothing else is ever
  brought back), ranked at least as high as the hit, and the smallest subset never
  cuts that current statement: the hit's score is the current statement's floor.
- Records in conflict are returned together, both flagged.
- Ranking only lowers records whose time has passed (stale "for now", past events,
  ``protocol.timeline.priority``); a permanent fact does not age, and nothing is dropped.
- A hit needs absolute evidence (``protocol.retrieval.fusion``): when no record reaches
  the fitted floor, the answer is empty. The smallest subset keeps every hit scoring
  within the fitted share of the best one, so a multi-record answer stays whole.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from protocol import timeline
from protocol.confidence import compute
from protocol.errors import StepOrderError
from protocol.model import ContentType, EpistemicState, LifeArea, LifecycleState, Sensitivity
from protocol.retrieval.fusion import relevances
from protocol.retrieval.question import is_factual_question
from protocol.retrieval.task import Candidate, Relation, SearchHits, Task

RELATION_WEIGHT: Mapping[Relation, float] = {
    Relation.SUPERSEDES: 0.9,
    Relation.CONFLICT: 0.9,
    Relation.PERSON: 0.5,
    Relation.EPISODE: 0.5,
    Relation.PROJECT: 0.3,
}

_SEAL = object()


@dataclass(frozen=True, slots=True)
class _Stage:
    task: Task
    records: tuple[Candidate, ...]
    seal: object = field(repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.seal is not _SEAL:
            raise StepOrderError(type(self).__name__, "its own step", self)

    def by_id(self) -> dict[str, Candidate]:
        return {c.record_id: c for c in self.records}


@dataclass(frozen=True, slots=True)
class InTaskArea(_Stage):
    """Step 1: records of the task's life area and project, plus "general"."""


@dataclass(frozen=True, slots=True)
class StateFiltered(_Stage):
    """Step 2: usable records; ``outdated`` ones may only come back beside a successor."""

    outdated: tuple[Candidate, ...] = ()


@dataclass(frozen=True, slots=True)
class PolicyCleared(StateFiltered):
    """Step 3: sensitive classes only with consent."""


@dataclass(frozen=True, slots=True)
class OpinionFiltered(StateFiltered):
    """Step 4: for a factual question, the user's opinions are gone."""

    factual: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Scored:
    candidate: Candidate
    relevance: float
    lexical: float = 0.0
    vector: float = 0.0
    via: tuple[str, Relation] | None = None  # pulled in by a related hit
    score: float = 0.0  # after ranking
    outdated: bool = False
    pulled_in_by: str | None = None  # a companion (conflict, superseded) of a selected one
    # outdated records of this one's chain that were hits, with their relevance: this is
    # their chain's current statement, and ranks at least as high as they would
    found_by: tuple[tuple[str, float], ...] = ()

    @property
    def record_id(self) -> str:
        return self.candidate.record_id


@dataclass(frozen=True, slots=True)
class Searched(OpinionFiltered):
    """Step 5: every eligible record any index or relation found, with its relevance."""

    scored: tuple[Scored, ...] = ()


@dataclass(frozen=True, slots=True)
class Ranked(Searched):
    """Step 6: ordered by relevance, priority, confidence and time kind."""


@dataclass(frozen=True, slots=True)
class Selected(Ranked):
    """Step 7: the fewest records the task needs, with the companions they require."""


S = TypeVar("S", bound=_Stage)


def _expect(step: str, stage: object, kind: type[S], expected: str) -> S:
    if type(stage) is not kind:
        raise StepOrderError(step, expected, stage)
    assert isinstance(stage, kind)
    return stage


def _make(kind: type[S], task: Task, records: Iterable[Candidate], **extra: Any) -> S:
    return kind(task, tuple(records), _SEAL, **extra)


# -- 1. task area ------------------------------------------------------------------


def in_task_area(c: Candidate, task: Task) -> bool:
    if c.content is None or not c.project_open:
        return False  # unreadable, or in a closed (archived) project
    if task.area is None and task.project is None:
        return True
    areas = c.content.life_areas
    return (
        LifeArea.GENERAL in areas
        or (task.area is not None and task.area in areas)
        or (task.project is not None and c.content.project == task.project)
    )


def task_area(task: Task, candidates: Iterable[Candidate]) -> InTaskArea:
    """Step 1. "Answer without personalization" ends retrieval here, with nothing."""
    if not isinstance(task, Task):
        raise StepOrderError("task_area", "Task", task)
    if not task.personalized or task.limit <= 0:
        return _make(InTaskArea, task, ())
    return _make(InTaskArea, task, (c for c in candidates if in_task_area(c, task)))


# -- 2. state filter ---------------------------------------------------------------


def usable(c: Candidate, task: Task) -> bool:
    content = c.content
    if (
        content is None
        or c.lifecycle is not LifecycleState.ACTIVE
        or c.refused
        or content.epistemic_state is EpistemicState.INVALID
    ):
        return False
    if c.usage_area is not None and task.area is not c.usage_area:
        return False
    return not (c.usage_project is not None and task.project != c.usage_project)


def state_filter(stage: InTaskArea) -> StateFiltered:
    """Step 2: candidate, not-in-use, forgotten and invalid out; "only use for X" applied."""
    s: InTaskArea = _expect("state_filter", stage, InTaskArea, "task_area")
    ok = [c for c in s.records if usable(c, s.task)]
    return _make(
        StateFiltered,
        s.task,
        (c for c in ok if c.superseded_by is None),
        outdated=tuple(c for c in ok if c.superseded_by is not None),
    )


# -- 3. policy gate ----------------------------------------------------------------


def cleared(c: Candidate, task: Task) -> bool:
    assert c.content is not None
    s = c.content.sensitivity
    return s is Sensitivity.NORMAL or s in task.consents


def policy_gate(stage: StateFiltered) -> PolicyCleared:
    """Step 3: a sensitive record without the user's consent for its class cannot pass."""
    s: StateFiltered = _expect("policy_gate", stage, StateFiltered, "state_filter")
    return _make(
        PolicyCleared,
        s.task,
        (c for c in s.records if cleared(c, s.task)),
        outdated=tuple(c for c in s.outdated if cleared(c, s.task)),
    )


# -- 4. opinion filter -------------------------------------------------------------


def opinion_filter(stage: PolicyCleared) -> OpinionFiltered:
    """Step 4: for a factual question the user's opinions are left out."""
    s: PolicyCleared = _expect("opinion_filter", stage, PolicyCleared, "policy_gate")
    factual = s.task.factual if s.task.factual is not None else is_factual_question(s.task.query)

    def keep(c: Candidate) -> bool:
        assert c.content is not None
        return not (factual and c.content.content_type is ContentType.OPINION)

    return _make(
        OpinionFiltered,
        s.task,
        filter(keep, s.records),
        outdated=tuple(filter(keep, s.outdated)),
        factual=factual,
    )


# -- 5. search ---------------------------------------------------------------------


def lexical_only(lexical: float) -> float:
    """Relevance when no vectors could be asked (a model being rebuilt, evaluation):
    the bm25 score squashed into (0, 1), absolute, never normalised by the query."""
    return lexical / (1.0 + lexical) if lexical > 0 else 0.0


def current_of(
    c: Candidate, eligible: Mapping[str, Candidate], outdated: Mapping[str, Candidate]
) -> Candidate | None:
    """The current statement of an outdated record's chain: its successors walked to the
    one no newer record replaces. None when a link of the chain did not pass steps 1-4
    (not in use, another area, sensitive without consent, ...): then nothing of the
    chain stands in for it, and nothing is re-activated."""
    seen = {c.record_id}
    successor = c.superseded_by
    while successor is not None and successor not in seen:
        if successor in eligible:
            return eligible[successor]
        step = outdated.get(successor)
        if step is None:
            return None
        seen.add(successor)
        successor = step.superseded_by
    return None


def search(stage: OpinionFiltered, hits: SearchHits) -> Searched:
    """Step 5: hybrid lexical, vector and relationship search over the filtered records.
    A hit on an outdated record is not a hit of its own: it finds its chain's current
    statement (``current_of``), at the hit's relevance if that is higher."""
    s: OpinionFiltered = _expect("search", stage, OpinionFiltered, "opinion_filter")
    eligible = s.by_id()
    outdated = {c.record_id: c for c in s.outdated}
    passed = eligible.keys() | outdated.keys()  # the floor reads only what passed steps 1-4
    fused = relevances(
        s.task.ranking,
        {k: v for k, v in hits.lexical.items() if k in passed},
        {k: v for k, v in hits.vector.items() if k in passed},
    )
    scored: dict[str, Scored] = {}
    found_by: dict[str, list[tuple[str, float]]] = {}
    for record_id in sorted(set(hits.lexical) | set(hits.vector)):
        c = eligible.get(record_id)
        old = outdated.get(record_id) if c is None else None
        if c is None and old is None:
            continue  # the index knows it; the authoritative state says no
        lex = hits.lexical.get(record_id, 0.0)
        vec = hits.vector.get(record_id, 0.0)
        if hits.vector_searched:
            if record_id not in fused:
                continue  # below the fitted floor: a common word or a distant neighbour
            score = fused[record_id][0]
        else:
            score = lexical_only(lex)  # no vectors to ask
            if score <= 0.0:
                continue
        if old is not None:
            current = current_of(old, eligible, outdated)
            if current is not None:
                found_by.setdefault(current.record_id, []).append((record_id, score))
            continue
        assert c is not None
        scored[record_id] = Scored(candidate=c, relevance=score, lexical=lex, vector=vec)
    for hit in sorted(scored.values(), key=lambda h: (-h.relevance, h.record_id)):
        if hit.via is not None:
            continue
        for other_id, kind in hits.related.get(hit.record_id, ()):
            c = eligible.get(other_id)
            if c is None:
                continue
            pulled = hit.relevance * RELATION_WEIGHT[kind]
            known = scored.get(other_id)
            if known is None or (known.via is not None and known.relevance < pulled):
                scored[other_id] = Scored(candidate=c, relevance=pulled, via=(hit.record_id, kind))
    for current_id, olds in sorted(found_by.items()):
        best_id, best = max(olds, key=lambda o: (o[1], o[0]))
        known = scored.get(current_id)
        if known is None:
            known = Scored(
                candidate=eligible[current_id],
                relevance=best,
                via=(best_id, Relation.SUPERSEDES),
            )
        scored[current_id] = replace(
            known, relevance=max(known.relevance, best), found_by=tuple(sorted(olds))
        )
    return _make(
        Searched,
        s.task,
        s.records,
        outdated=s.outdated,
        factual=s.factual,
        scored=tuple(scored.values()),
    )


# -- 6. ranking --------------------------------------------------------------------


def weight(c: Candidate, task: Task) -> float:
    """Priority (time kind: only records whose time has passed lose it) times confidence;
    in (0, 1], never zero. A record's time counts from when its current words were said
    (a correction restates a "for now" record; it is not stale for its old words' age)."""
    assert c.content is not None and c.learned_at is not None
    content = c.content
    since = max(c.learned_at, c.said_on) if c.said_on is not None else c.learned_at
    if content.expected_end is not None and content.expected_end < since:
        # words said after the end they inherited (a correction keeps its record's
        # fields): "for now" counts again from when they were said
        content = content.model_copy(update={"expected_end": None})
    priority = timeline.priority(content, since, task.now)
    confidence = compute(c.content, c.lifecycle, task.now).score
    return priority * (0.75 + 0.25 * confidence)


def rank(stage: Searched) -> Ranked:
    """Step 6: relevance x priority x confidence; decayed or expired records drop, never vanish."""
    s: Searched = _expect("rank", stage, Searched, "search")
    outdated = {c.record_id: c for c in s.outdated}

    def score(h: Scored) -> float:
        own = h.relevance * weight(h.candidate, s.task)
        found = (  # an outdated hit's current statement ranks at least as high as the hit
            relevance * weight(outdated[old], s.task)
            for old, relevance in h.found_by
            if outdated[old].learned_at is not None
        )
        return max([own, *found])

    ranked = [
        Scored(
            candidate=h.candidate,
            relevance=h.relevance,
            lexical=h.lexical,
            vector=h.vector,
            via=h.via,
            score=score(h),
            found_by=h.found_by,
        )
        for h in s.scored
        if h.candidate.learned_at is not None
    ]
    ranked.sort(key=lambda h: (-h.score, h.record_id))
    return _make(
        Ranked, s.task, s.records, outdated=s.outdated, factual=s.factual, scored=tuple(ranked)
    )


# -- 7. smallest subset ------------------------------------------------------------


def _said(c: Candidate) -> float:
    assert c.content is not None
    moment = c.said_on or c.content.said_at or c.learned_at
    return 0.0 if moment is None else moment.timestamp()


def chain_companions(hit: Scored, outdated: Mapping[str, Candidate]) -> list[Candidate]:
    """The outdated records a selected record brings along, newest first: the ones it
    superseded, and every outdated hit of its chain with the links between that hit and
    it (never a record that did not pass steps 1-4)."""
    out = {o: outdated[o] for o in hit.candidate.supersedes if o in outdated}
    for old, _ in hit.found_by:
        step: Candidate | None = outdated.get(old)
        while step is not None and step.record_id not in out:
            out[step.record_id] = step
            successor = step.superseded_by
            step = None if successor is None else outdated.get(successor)
    return sorted(out.values(), key=lambda c: (-_said(c), c.record_id))


def smallest_subset(stage: Ranked) -> Selected:
    """Step 7: the best records within the fitted ``close`` share of the top score (every
    record scoring close to the answer, so a multi-record answer stays whole), up to the
    task's limit;
    each brings the records in conflict with it and the outdated records of its chain
    (``chain_companions``). A chain's current statement is never cut when an outdated
    record of the chain was the hit: it carries the hit's score (``rank``)."""
    s: Ranked = _expect("smallest_subset", stage, Ranked, "rank")
    if not s.scored:
        return _make(Selected, s.task, s.records, outdated=s.outdated, factual=s.factual)
    cut = s.scored[0].score * s.task.ranking.close
    chosen = [h for h in s.scored if h.score >= cut][: s.task.limit]
    eligible = s.by_id()
    outdated = {c.record_id: c for c in s.outdated}
    out: list[Scored] = []
    seen: set[str] = set()
    for hit in chosen:
        if hit.record_id in seen:
            continue
        seen.add(hit.record_id)
        out.append(hit)
        for other in sorted(hit.candidate.conflicts_with):
            c = eligible.get(other)
            if c is not None and other not in seen:
                seen.add(other)
                out.append(Scored(candidate=c, relevance=0.0, pulled_in_by=hit.record_id))
        for c in chain_companions(hit, outdated):
            if c.record_id not in seen:
                seen.add(c.record_id)
                out.append(
                    Scored(candidate=c, relevance=0.0, outdated=True, pulled_in_by=hit.record_id)
                )
    return _make(
        Selected, s.task, s.records, outdated=s.outdated, factual=s.factual, scored=tuple(out)
    )
