"""The detector's label vocabulary and the decoding of its four heads into ``Detection``.

Invariants: pure. The order of each tuple below is the order of the model's output
columns; a model stores these tuples in its metadata and is refused if they differ
(``protocol.detection.model``). ``decode`` depends only on the arrays and thresholds it
is handed: row i of every array is text i. ``content_type``, ``sensitivity`` and
``time_kind`` are the heads' best guesses for every text; they mean something only
when ``candidate`` is true (the type and time heads were trained on candidates only).
A row marked ``chatter`` (``cues.is_short_chatter``: a few words, no first-person
subject) is never a candidate and never sensitive, whatever the heads say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from protocol.model import ContentType, Sensitivity, TimeKind

HEADS = ("candidate", "content_type", "sensitivity", "time_kind")

CONTENT_TYPES: tuple[ContentType, ...] = (
    ContentType.PREFERENCE,
    ContentType.ROUTINE,
    ContentType.GOAL,
    ContentType.CONSTRAINT,
    ContentType.RELATIONSHIP,
    ContentType.PERSONAL_FACT,
    ContentType.OPINION,
    ContentType.EVENT,
)
SENSITIVITIES: tuple[Sensitivity, ...] = (
    Sensitivity.NORMAL,
    Sensitivity.HEALTH,
    Sensitivity.SEX_LIFE,
    Sensitivity.ETHNIC_ORIGIN,
    Sensitivity.POLITICAL_OPINION,
    Sensitivity.RELIGIOUS_BELIEF,
    Sensitivity.TRADE_UNION,
    Sensitivity.GENETIC,
    Sensitivity.BIOMETRIC,
    Sensitivity.FINANCIAL_DETAIL,
)
TIME_KINDS: tuple[TimeKind, ...] = (
    TimeKind.PERMANENT,
    TimeKind.FOR_NOW,
    TimeKind.SEASONAL,
    TimeKind.ONE_OFF,
    TimeKind.PAST,
)

# A text is a candidate when the candidate head's probability is at least this.
CANDIDATE_THRESHOLD = 0.5
# A text is sensitive when the sensitivity head gives "normal" less than this; it then
# gets the likeliest sensitive class. Below 1 - 0.5 on purpose: missing a sensitive
# statement costs more than flagging a normal one. Fitted on the tune half of the
# hand-written sensitivity set (bench/sensitivity_data/tune.jsonl, never the test half):
# 0.7 kept recall at 0.986 with precision 0.876 there (0.6: 0.981 / 0.887).
NORMAL_FLOOR = 0.7


@dataclass(frozen=True, slots=True)
class Detection:
    """What the detector decided about one text."""

    candidate: bool
    score: float  # probability of "candidate", 0..1
    content_type: ContentType
    sensitivity: Sensitivity
    time_kind: TimeKind


def _rows(name: str, array: npt.NDArray[np.floating], n: int, width: int) -> None:
    if array.shape != (n, width):
        raise ValueError(f"{name} has shape {array.shape}, expected ({n}, {width})")


def decode(
    candidate: npt.NDArray[np.floating],
    content_type: npt.NDArray[np.floating],
    sensitivity: npt.NDArray[np.floating],
    time_kind: npt.NDArray[np.floating],
    *,
    threshold: float = CANDIDATE_THRESHOLD,
    normal_floor: float = NORMAL_FLOOR,
    chatter: npt.NDArray[np.bool_] | None = None,
) -> list[Detection]:
    """One ``Detection`` per row: ``candidate`` is ``(n,)``, the others ``(n, len(vocab))``.

    Each array holds probabilities (the model's outputs); ``chatter`` (``(n,)``, or
    ``None`` for none) marks the rows that are short chatter. Raises ``ValueError`` on a
    shape that does not fit the vocabulary.
    """
    scores = np.asarray(candidate, dtype=np.float64).reshape(-1)
    n = scores.shape[0]
    _rows("content_type", content_type, n, len(CONTENT_TYPES))
    _rows("sensitivity", sensitivity, n, len(SENSITIVITIES))
    _rows("time_kind", time_kind, n, len(TIME_KINDS))
    types = np.argmax(content_type, axis=1)
    times = np.argmax(time_kind, axis=1)
    quiet = np.zeros((n,), dtype=bool) if chatter is None else np.asarray(chatter, dtype=bool)
    if quiet.shape != (n,):
        raise ValueError(f"chatter has shape {quiet.shape}, expected ({n},)")
    sensitive = (sensitivity[:, 0] < normal_floor) & ~quiet
    best_sensitive = 1 + np.argmax(sensitivity[:, 1:], axis=1)
    classes = np.where(sensitive, best_sensitive, 0)
    marked = (scores >= threshold) & ~quiet
    return [
        Detection(
            candidate=bool(marked[i]),
            score=float(np.clip(scores[i], 0.0, 1.0)),
            content_type=CONTENT_TYPES[int(types[i])],
            sensitivity=SENSITIVITIES[int(classes[i])],
            time_kind=TIME_KINDS[int(times[i])],
        )
        for i in range(n)
    ]


def vocabulary() -> dict[str, list[str]]:
    """The label columns of each multi-class head, as stored in a model's metadata."""
    return {
        "content_type": [str(v) for v in CONTENT_TYPES],
        "sensitivity": [str(v) for v in SENSITIVITIES],
        "time_kind": [str(v) for v in TIME_KINDS],
    }


def index_of(vocab: Sequence[object], value: object) -> int:
    """The column of ``value`` in ``vocab``; ``ValueError`` naming both if absent."""
    for i, item in enumerate(vocab):
        if item == value:
            return i
    raise ValueError(f"{value!r} is not one of {list(vocab)}")
