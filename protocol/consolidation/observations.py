"""Behaviour observations merged into evidence: what was observed, and what it suggests.

Invariants:
- A behaviour event is logged as an episode whose text is ``event_text(subject,
  value)`` = ``"<subject>: <value>"``; ``parse_event`` is its exact inverse (it returns
  None for any text ``event_text`` cannot produce). Apply it only to episodes logged as
  behaviour (source kind ``user_behaviour``): a typed "Note: buy milk" parses too.
- ``summarise`` is a pure function of its events: one summary per subject (subjects
  compared case-folded, whitespace collapsed), over the last ``window`` events by time
  (ties by episode id). An episode counts once however often it is handed in, because
  each observation's source is the event's episode (``Evidence`` counts sources).
- The reading is computed, never guessed: "inferred" needs at least ``INFER_MIN_TOTAL``
  events of which at least ``INFER_MIN_RATIO`` chose the top value; "hypothesis" needs
  ``HYPOTHESIS_MIN_TOTAL`` events and a ratio in [``HYPOTHESIS_MIN_RATIO``,
  ``INFER_MIN_RATIO``) or two close values; otherwise it is only observed. The confidence
  comes from ``protocol.confidence.compute`` over the record the reading would be.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum

from protocol.confidence import Confidence, compute
from protocol.consolidation.areas import life_areas
from protocol.consolidation.sensitivity import sensitivity_of
from protocol.ids import is_id
from protocol.model import (
    MAX_TEXT_CHARS,
    Alternative,
    ContentType,
    EpistemicState,
    Evidence,
    Layer,
    LifecycleState,
    Observation,
    RecordContent,
    SourceKind,
)

SEPARATOR = ": "
LINE_BREAKS = frozenset("\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029")
MAX_EPISODES = 64  # RecordContent.source_episode_ids holds at most this many
MAX_WINDOW = 10_000  # Evidence holds at most this many observations

INFER_MIN_TOTAL = 5
INFER_MIN_RATIO = 0.75
HYPOTHESIS_MIN_TOTAL = 3
HYPOTHESIS_MIN_RATIO = 0.5
CLOSE_RATIO = 0.8  # the runner-up has at least this share of the top value's count


class Reading(StrEnum):
    INFERRED = "inferred"
    HYPOTHESIS = "hypothesis"
    OBSERVED_ONLY = "observed_only"


@dataclass(frozen=True, slots=True)
class BehaviourEvent:
    subject: str
    value: str


@dataclass(frozen=True, slots=True)
class ObservedEvent:
    episode_id: str
    subject: str
    value: str
    at: datetime
    source_id: str

    def __post_init__(self) -> None:
        if not is_id("ep", self.episode_id):
            raise ValueError(f"{self.episode_id!r} is not an episode id (ep_<token>)")
        if self.at.tzinfo is None or self.at.utcoffset() is None:
            raise ValueError(f"event {self.episode_id}: its time must be timezone-aware")


@dataclass(frozen=True, slots=True)
class Summary:
    subject: str  # normalised: case-folded, single spaces
    top_value: str  # as it was last written
    count: int  # how many of the window's events chose the top value
    total: int  # events in the window
    ratio: float  # count / total
    episode_ids: tuple[str, ...]  # the most recent <= 64, in time order
    observed_text: str
    evidence: Evidence
    reading: Reading
    inferred_text: str | None  # the inferred or hypothesis statement (None: observed only)
    alternatives: tuple[Alternative, ...]
    confidence: Confidence | None  # for the inferred or hypothesis reading
    runner_up: str | None = None

    def content(self) -> RecordContent:
        """The record this summary's reading would be: the observation itself when it is
        only observed, else the inference or hypothesis with its evidence."""
        if self.reading is Reading.OBSERVED_ONLY or self.inferred_text is None:
            return _content(self, self.observed_text, EpistemicState.OBSERVED, Layer.EVENT)
        state = (
            EpistemicState.INFERRED
            if self.reading is Reading.INFERRED
            else EpistemicState.HYPOTHESIS
        )
        return _content(self, self.inferred_text, state, Layer.CONSOLIDATED_FACT)


def _check_part(part: str, what: str) -> None:
    if not part.strip():
        raise ValueError(f"a behaviour event's {what} cannot be empty")
    if SEPARATOR in part:
        raise ValueError(
            f"a behaviour event's {what} cannot contain {SEPARATOR!r} (it separates subject "
            f"from value): {part!r}"
        )
    if any(c in LINE_BREAKS for c in part):
        raise ValueError(f"a behaviour event's {what} must be one line: {part!r}")


def event_text(subject: str, value: str) -> str:
    """The episode text of a behaviour event: ``"<subject>: <value>"``."""
    _check_part(subject, "subject")
    _check_part(value, "value")
    text = subject + SEPARATOR + value
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"a behaviour event's text is longer than {MAX_TEXT_CHARS} characters")
    return text


def parse_event(text: str) -> BehaviourEvent | None:
    """The event ``text`` encodes, or None if ``event_text`` could not have written it."""
    subject, sep, value = text.partition(SEPARATOR)
    if not sep:
        return None
    try:
        event_text(subject, value)
    except ValueError:
        return None
    return BehaviourEvent(subject, value)


def normalise(words: str) -> str:
    return " ".join(words.casefold().split())


def plural(noun: str) -> str:
    """A simple English plural of a noun phrase's last word."""
    head, _, last = noun.rpartition(" ")
    if not last:
        return noun
    if last.endswith(("s", "x", "z", "ch", "sh")):
        last += "es"
    elif last.endswith("y") and len(last) > 1 and last[-2] not in "aeiou":
        last = last[:-1] + "ies"
    else:
        last += "s"
    return f"{head} {last}" if head else last


def _dedupe(events: Sequence[ObservedEvent]) -> list[ObservedEvent]:
    """One event per episode (the first by time, then value), in time order."""
    ordered = sorted(events, key=lambda e: (e.at, e.episode_id, e.value, e.source_id))
    seen: set[str] = set()
    unique: list[ObservedEvent] = []
    for event in ordered:
        if event.episode_id not in seen:
            seen.add(event.episode_id)
            unique.append(event)
    return unique


def summarise(
    events: Sequence[ObservedEvent], *, window: int = 20, now: datetime | None = None
) -> list[Summary]:
    """One summary per subject over its last ``window`` events, sorted by subject.

    ``now`` is when the confidence is asked for; by default the subject's last event.
    """
    if not 1 <= window <= MAX_WINDOW:
        raise ValueError(f"the window holds 1 to {MAX_WINDOW} events, not {window}")
    by_subject: dict[str, list[ObservedEvent]] = {}
    for event in _dedupe(events):
        key = normalise(event.subject)
        if key and normalise(event.value):
            by_subject.setdefault(key, []).append(event)
    return [
        _summary(subject, group[-window:], now) for subject, group in sorted(by_subject.items())
    ]


def _summary(subject: str, recent: list[ObservedEvent], now: datetime | None) -> Summary:
    counts = Counter(normalise(e.value) for e in recent)
    last_seen = {normalise(e.value): i for i, e in enumerate(recent)}
    spelling = {normalise(e.value): " ".join(e.value.split()) for e in recent}
    # Most often first; a tie goes to the value chosen most recently.
    ranked = sorted(counts, key=lambda v: (-counts[v], -last_seen[v], v))
    top = ranked[0]
    count, total = counts[top], len(recent)
    ratio = count / total
    runner = ranked[1] if len(ranked) > 1 else None
    close = runner is not None and count >= 2 and counts[runner] >= CLOSE_RATIO * count
    if total >= INFER_MIN_TOTAL and ratio >= INFER_MIN_RATIO:
        reading = Reading.INFERRED
    elif total >= HYPOTHESIS_MIN_TOTAL and (
        HYPOTHESIS_MIN_RATIO <= ratio < INFER_MIN_RATIO or close
    ):
        reading = Reading.HYPOTHESIS
    else:
        reading = Reading.OBSERVED_ONLY

    value = spelling[top]
    verb = "was" if count == 1 else "were"
    if total == 1:
        observed = f"The last {subject} was {value}."
    else:
        observed = f"{count} of the last {total} {plural(subject)} {verb} {value}."
    inferred: str | None = None
    alternatives: list[Alternative] = []
    if reading is Reading.INFERRED:
        inferred = f"Usually chooses {value} for {subject}."
    elif reading is Reading.HYPOTHESIS:
        inferred = f"May prefer {value} for {subject}."
        for other in ranked[1:3]:
            alternatives.append(
                Alternative(
                    text=_clip(
                        f"Chooses {spelling[other]} for {subject} as well "
                        f"({counts[other]} of the last {total})."
                    ),
                    content_type=ContentType.PREFERENCE,
                )
            )
        alternatives.append(
            Alternative(
                text=_clip(
                    f"The {subject} may vary by day or by occasion, with no one preferred choice."
                ),
                content_type=ContentType.ROUTINE,
            )
        )
    evidence = Evidence(
        observations=[
            Observation(
                source_id=e.episode_id,
                source_kind=SourceKind.USER_BEHAVIOUR,
                at=e.at,
                supports=normalise(e.value) == top,
            )
            for e in recent
        ]
    )
    summary = Summary(
        subject=subject,
        top_value=value,
        count=count,
        total=total,
        ratio=ratio,
        episode_ids=tuple(e.episode_id for e in recent[-MAX_EPISODES:]),
        observed_text=_clip(observed),
        evidence=evidence,
        reading=reading,
        inferred_text=_clip(inferred) if inferred else None,
        alternatives=tuple(alternatives),
        confidence=None,
        runner_up=spelling[runner] if runner is not None else None,
    )
    if reading is Reading.OBSERVED_ONLY:
        return summary
    asked_at = now or recent[-1].at
    confidence = compute(summary.content(), LifecycleState.CANDIDATE, asked_at)
    return replace(summary, confidence=confidence)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_TEXT_CHARS else text[: MAX_TEXT_CHARS - 1] + "\u2026"


def _content(summary: Summary, text: str, state: EpistemicState, layer: Layer) -> RecordContent:
    about = f"{summary.subject}: {summary.top_value}"
    return RecordContent(
        text=text,
        content_type=ContentType.PREFERENCE,
        epistemic_state=state,
        layer=layer,
        source_episode_ids=list(summary.episode_ids),
        source_kind=SourceKind.USER_BEHAVIOUR,
        evidence=summary.evidence,
        alternatives=list(summary.alternatives),
        life_areas=life_areas(about, ContentType.PREFERENCE),
        sensitivity=sensitivity_of(about, None),
        subject=summary.subject[:200],
    )
