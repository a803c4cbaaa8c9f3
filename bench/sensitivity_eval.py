"""The hand-written sensitivity evaluation set (issue 18): ``load("tune")``, ``load("test")``.

Invariants: the sentences and their labels are written by hand in
``bench/sensitivity_data/written.txt`` (never generated, never rule-labelled, never
training data: ``tests/device/test_detector_sensitivity.py`` checks that no sentence
here is in ``models/detector/data``). ``tune.jsonl`` and ``test.jsonl`` are made from
that file by ``python bench/sensitivity_eval.py`` alone, deterministically: within each
(sensitivity, kind) group, in file order, sentences alternate test, tune, test, ... so
both halves carry every class and kind. Thresholds and rules may be fitted on ``tune``;
``test`` is the held-out half, read only for the aggregate figures. Pure apart from
reading (and, run as a script, writing) those three files.

A row: ``text``, ``candidate`` (bool), ``sensitivity`` (a ``protocol.model.Sensitivity``
value), ``kind`` (one of ``KINDS``), ``speaker`` (an imagined person's id).

``score(rows, sensitivity, candidate)`` turns any classifier's decisions on a half into
the figures ``make bench`` reports (the cloud's classifier can be scored the same way).
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from protocol.model import Sensitivity

PATH = Path(__file__).resolve().parent / "sensitivity_data"
SOURCE = PATH / "written.txt"
HALVES = ("tune", "test")
KINDS = ("statement", "joke", "banter", "chatter", "question", "distractor", "command")
SENSITIVITIES = tuple(s.value for s in Sensitivity)  # normal first, then each class
# Kinds that are never memory candidates (the issue: jokes become "recently learned").
NOT_CANDIDATE_KINDS = ("joke", "banter", "chatter")
# "Short chatter": a joke, banter or chatter line of at most this many words.
SHORT_WORDS = 6


def load(half: str) -> list[dict[str, Any]]:
    """The rows of one half (``"tune"`` or ``"test"``), in file order."""
    if half not in HALVES:
        raise ValueError(f"half must be one of {HALVES}, not {half!r}")
    text = (PATH / f"{half}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def is_short_chatter(row: dict[str, Any]) -> bool:
    """A joke, banter or chatter line of at most ``SHORT_WORDS`` words."""
    return row["kind"] in NOT_CANDIDATE_KINDS and len(row["text"].split()) <= SHORT_WORDS


def prf(tp: int, fp: int, fn: int) -> dict[str, float]:
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": round(precision, 3),
        "recall": round(recall, 3),
        "f1": round(f1, 3),
        "support": tp + fn,
    }


def score(
    rows: list[dict[str, Any]],
    sensitivity: list[str],
    candidate: list[bool] | None = None,
) -> dict[str, Any]:
    """Figures for decisions on ``rows``: sensitivity values (``str`` of the class) and,
    optionally, candidate marks, one per row in the same order.

    ``sensitive``: a row whose gold class is not normal counts as found when it gets
    any sensitive class (precision: rows given a sensitive class that are sensitive).
    Per class: exact class. ``jokes_banter_chatter_candidate_rate``: share of jokes,
    banter and chatter marked candidates (also per kind: ``joke_candidate_rate``, ...).
    ``short_chatter_sensitive_rate``: share of short chatter given a sensitive class.
    """
    if len(sensitivity) != len(rows) or (candidate is not None and len(candidate) != len(rows)):
        raise ValueError("one decision per row")
    gold = [r["sensitivity"] for r in rows]
    sens_gold = [g != "normal" for g in gold]
    sens_pred = [str(p) != "normal" for p in sensitivity]
    out: dict[str, Any] = {
        "sentences": len(rows),
        "sensitive": prf(
            sum(g and p for g, p in zip(sens_gold, sens_pred, strict=True)),
            sum(p and not g for g, p in zip(sens_gold, sens_pred, strict=True)),
            sum(g and not p for g, p in zip(sens_gold, sens_pred, strict=True)),
        ),
    }
    per_class: dict[str, dict[str, float]] = {}
    for cls in SENSITIVITIES[1:]:
        g = [x == cls for x in gold]
        p = [str(x) == cls for x in sensitivity]
        per_class[cls] = prf(
            sum(a and b for a, b in zip(g, p, strict=True)),
            sum(b and not a for a, b in zip(g, p, strict=True)),
            sum(a and not b for a, b in zip(g, p, strict=True)),
        )
    out["per_class"] = per_class
    short = [is_short_chatter(r) for r in rows]
    out["short_chatter"] = sum(short)
    out["short_chatter_sensitive_rate"] = round(
        sum(s and p for s, p in zip(short, sens_pred, strict=True)) / max(sum(short), 1), 3
    )
    if candidate is not None:
        chat = [r["kind"] in NOT_CANDIDATE_KINDS for r in rows]
        out["chatter_jokes_banter"] = sum(chat)
        out["jokes_banter_chatter_candidate_rate"] = round(
            sum(c and m for c, m in zip(chat, candidate, strict=True)) / max(sum(chat), 1), 3
        )
        for kind in NOT_CANDIDATE_KINDS:
            of_kind = [r["kind"] == kind for r in rows]
            out[f"{kind}_candidate_rate"] = round(
                sum(k and m for k, m in zip(of_kind, candidate, strict=True))
                / max(sum(of_kind), 1),
                3,
            )
        out["candidate_accuracy"] = round(
            sum(r["candidate"] == m for r, m in zip(rows, candidate, strict=True)) / len(rows), 3
        )
    return out


def parse(path: Path = SOURCE) -> list[dict[str, Any]]:
    """Every sentence of ``written.txt`` with the labels of the header above it."""
    rows: list[dict[str, Any]] = []
    header: list[str] | None = None
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("@"):
            header = line[1:].split()
            speaker, kind, candidate, sensitivity = header
            where = f"{path.name}:{number}"
            if kind not in KINDS or candidate not in ("y", "n"):
                raise ValueError(f"{where}: bad header {line!r}")
            if sensitivity not in SENSITIVITIES:
                raise ValueError(f"{where}: unknown sensitivity {sensitivity!r}")
            if kind in NOT_CANDIDATE_KINDS and (candidate == "y" or sensitivity != "normal"):
                raise ValueError(f"{where}: a {kind} is labelled not candidate and normal")
            continue
        if header is None:
            raise ValueError(f"{path.name}:{number}: a sentence before any '@' header")
        speaker, kind, candidate, sensitivity = header
        rows.append(
            {
                "text": line,
                "candidate": candidate == "y",
                "sensitivity": sensitivity,
                "kind": kind,
                "speaker": speaker,
            }
        )
    seen: set[str] = set()
    for row in rows:
        key = " ".join(row["text"].lower().split())
        if key in seen:
            raise ValueError(f"written twice: {row['text']!r}")
        seen.add(key)
    return rows


def split(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Alternate test, tune, test, ... within each (sensitivity, kind) group."""
    counts: Counter[tuple[str, str]] = Counter()
    out: dict[str, list[dict[str, Any]]] = {half: [] for half in HALVES}
    for row in rows:
        group = (row["sensitivity"], row["kind"])
        out["test" if counts[group] % 2 == 0 else "tune"].append(row)
        counts[group] += 1
    return out


def write() -> dict[str, int]:
    """Regenerate ``tune.jsonl`` and ``test.jsonl`` from ``written.txt``."""
    halves = split(parse())
    for half, rows in halves.items():
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (PATH / f"{half}.jsonl").write_text(body, encoding="utf-8")
    return {half: len(rows) for half, rows in halves.items()}


if __name__ == "__main__":
    sizes = write()
    for half in HALVES:
        rows = load(half)
        by_class = Counter(r["sensitivity"] for r in rows)
        by_kind = Counter(r["kind"] for r in rows)
        print(half, sizes[half], dict(sorted(by_class.items())), dict(sorted(by_kind.items())))
    sys.exit(0)
