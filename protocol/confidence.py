"""Confidence is computed from evidence, never guessed, and shown as a class.

Invariants: ``compute`` is a pure function of the record and the time it is asked
at; its formula is versioned (``FORMULA_VERSION``) and every stored value carries the
version it was computed with; test vectors in ``tests/golden/confidence`` pin each
version. Two observations from the same source count as one. "You told me" is shown
only for the user's own words (said, or said and then verified); words the user
confirmed from elsewhere (a page, an import, a proposed rule) show "You confirmed it";
a record verified by independent sources alone shows that the user has not. Confidence never widens
authority: it is only ever used to make the assistant ask anyway.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from protocol.model import EpistemicState, LifecycleState, RecordContent, SourceKind
from protocol.provenance import is_users_words, verified_by_user

FORMULA_VERSION = "conf-v2"  # v2: the classes of verified records say who verified them
THRESHOLD = 0.6  # "I think so" at or above, "I'm not sure" below
HALF_LIFE_DAYS = 180.0
SATURATION = 3.0  # distinct sources at which count contributes 1 - 1/e
SOURCE_WEIGHT = {
    SourceKind.USER_STATEMENT: 1.0,
    SourceKind.USER_BEHAVIOUR: 1.0,
    SourceKind.CONNECTED_SOURCE: 0.8,
    SourceKind.EXTERNAL_CONTENT: 0.5,
    SourceKind.IMPORT: 0.5,
}


class ConfidenceClass(StrEnum):
    YOU_TOLD_ME = "You told me"
    I_THINK_SO = "I think so"
    NOT_SURE = "I'm not sure"
    SOURCE_NOT_VERIFIED = "I saw it in a source, not verified"
    IMPORTED_NOT_VERIFIED = "Imported, not verified"
    CORROBORATED = "Seen in independent sources, not confirmed by you"
    CONFIRMED_BY_YOU = "You confirmed it"


@dataclass(frozen=True, slots=True)
class Confidence:
    score: float
    shown: ConfidenceClass
    formula_version: str = FORMULA_VERSION


def score(content: RecordContent, now: datetime) -> float:
    """The v1 score in [0, 1] from count, ratio, recency, source kind and conflicts."""
    if content.epistemic_state in (EpistemicState.SAID, EpistemicState.VERIFIED):
        return 1.0
    if content.epistemic_state is EpistemicState.INVALID:
        return 0.0
    evidence = content.evidence
    count = evidence.count
    if count == 0:
        return 0.0
    base = evidence.ratio * (1.0 - math.exp(-count / SATURATION))
    last = evidence.last_observed or now
    age_days = max(0.0, (now - last).total_seconds() / 86_400)
    recency = float(0.5 ** (age_days / HALF_LIFE_DAYS))
    weight = SOURCE_WEIGHT[content.source_kind]
    penalty = 1.0 / (1.0 + len(evidence.conflicting_records))
    hypothesis = 0.5 if content.epistemic_state is EpistemicState.HYPOTHESIS else 1.0
    return float(round(base * (0.5 + 0.5 * recency) * weight * penalty * hypothesis, 6))


def compute(content: RecordContent, lifecycle: LifecycleState, now: datetime) -> Confidence:
    """The score and the class the user sees."""
    value = score(content, now)
    state = content.epistemic_state
    if state is EpistemicState.SAID:
        return Confidence(value, ConfidenceClass.YOU_TOLD_ME)
    if state is EpistemicState.VERIFIED:
        if not verified_by_user(content):
            return Confidence(value, ConfidenceClass.CORROBORATED)
        if is_users_words(content):
            return Confidence(value, ConfidenceClass.YOU_TOLD_ME)
        return Confidence(value, ConfidenceClass.CONFIRMED_BY_YOU)
    if lifecycle is LifecycleState.CANDIDATE:
        if content.source_kind is SourceKind.IMPORT:
            return Confidence(value, ConfidenceClass.IMPORTED_NOT_VERIFIED)
        if content.source_kind is SourceKind.EXTERNAL_CONTENT:
            return Confidence(value, ConfidenceClass.SOURCE_NOT_VERIFIED)
    if state is EpistemicState.HYPOTHESIS or value < THRESHOLD:
        return Confidence(value, ConfidenceClass.NOT_SURE)
    return Confidence(value, ConfidenceClass.I_THINK_SO)
