"""Issue 17's "tell, then ask" evaluation: is the memory ever confidently wrong?

``run(scripts, folder)`` plays each script of ``bench/relations_data/*.jsonl`` (the format
is ``docs/relations-eval.md``) against one real cloud: the FastAPI app under uvicorn on
loopback (``RunningCloud.sqlite``), with a fresh user (a sealed space of its own) and two
real SQLCipher devices, "phone" and "laptop", per script. Every step goes through the
device agent's Python API at the step's "at" on an injected clock (a ``FleetClock`` per
script; the cloud reads the clock of the script being played, so the consolidator sees
the same time as the devices). Before each ask every device syncs, the consolidator runs
once (``memsync cloud worker --once``: ``run_once`` on a ``Consolidator`` over the
cloud's stores), every device syncs again, and the asking device recalls the query.

An ask passes on the structured hits (``RecallHit``): each "current" substring in a hit
not labelled outdated (and flagged conflict when the ask says ``conflict``), each
"not_current" substring only in outdated hits, no "absent" substring anywhere; matched
case-insensitively on the hit's text and its kept context sentence (``context_text``,
when hits carry one). A script passes when all its asks pass; a step that raises is a
step error and fails its script, never the run. Beside it, a state-level check reads
``list_records()`` on the asking device (is the stale record still live?).

Anchors, on the same scripts in the same run, over every sentence the user typed in the
script (nothing else: no state, no controls): plain cosine top-3 with the device's own
ONNX embedder, BM25 top-3, and cosine top-3 re-sorted newest first.

Discipline: the tuning half (``tune.jsonl``) prints every failing script; the held-out
half (``test.jsonl``) prints only per-kind figures. ``--show-test-failures`` exists for
the person who writes the held-out half; it is forbidden while tuning.

Invariant: nothing here asserts a score; ``tests/e2e/test_relations_quality.py`` holds
the floor (``floor.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from device.embedder import default_embedder
from device.views import RecallHit, RecordView
from protocol.sentences import normalise, split_sentences
from protocol.subset import MAX_DAYS, SubsetPolicy, SubsetRules
from simulator.clock import FleetClock
from simulator.cloud_runner import RunningCloud
from simulator.fleet import DeviceHandle, Fleet

DATA = Path(__file__).resolve().parent / "relations_data"
TUNE_FILE = DATA / "tune.jsonl"
TEST_FILE = DATA / "test.jsonl"
PROBE_FILE = DATA / "probe.jsonl"  # hand-written probes of the weak kinds; played like tune
HALVES = ("tune", "probe", "test")
FLOOR_FILE = DATA / "floor.json"
DEVICES = ("phone", "laptop")
KINDS = (
    "correction_cue",
    "explicit_correct",
    "typed_only",
    "subjectless",
    "many_valued",
    "person_attributes",
    "distractor",
    "exception",
    "conflict",
    "retract_restate",
    "control_before_end",
    "restatement",
)
ANCHORS = ("cosine_top3", "bm25_top3", "newest_similar_first")
STEP_KINDS = (
    "say",
    "remember",
    "correct",
    "dont_use",
    "use_again",
    "forget",
    "end_session",
    "sync",
)
TOP = 3
#: every device keeps the whole space: what is measured is how statements relate, not
#: which records a device's subset (issue 9, 30 days "recent" by default) holds
WHOLE_SPACE = SubsetPolicy(rules=SubsetRules(recent_days=MAX_DAYS))
#: the ids of the three smoke scripts (``bench.run --smoke``)
SMOKE_IDS = ("tune-001", "tune-011", "tune-038")


# --- loading -------------------------------------------------------------------------


def load(path: Path) -> list[dict[str, Any]]:
    """The scripts of one JSONL file, in file order."""
    scripts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                scripts.append(dict(json.loads(line)))
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path.name} line {number}: not JSON ({exc})") from exc
    return scripts


def half_of(script: dict[str, Any]) -> str:
    sid = str(script["id"])
    return "test" if sid.startswith("test-") else "probe" if sid.startswith("probe-") else "tune"


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def step_kind(step: dict[str, Any]) -> str:
    found = [k for k in STEP_KINDS if k in step]
    if len(found) != 1:
        raise ValueError(f"a step names exactly one of {STEP_KINDS}, this one {sorted(step)}")
    return found[0]


def problems(script: dict[str, Any]) -> list[str]:
    """What is wrong with a script's shape (empty when it follows the format). The
    messages name the step or ask by position, never its sentences."""
    out: list[str] = []
    sid = script.get("id")
    if not isinstance(sid, str) or not sid.startswith(("tune-", "test-", "probe-")):
        out.append("id must start with tune-, test- or probe-")
    if script.get("kind") not in KINDS:
        out.append("kind is not one of the kinds")
    if not script.get("person"):
        out.append("no person")
    said: dict[str, list[str]] = {}
    home: dict[str, str] = {}
    last: datetime | None = None
    steps, asks = script.get("steps") or [], script.get("ask") or []
    if not steps or not asks:
        out.append("a script needs steps and at least one ask")
    for i, step in enumerate([*steps, *asks]):
        where = f"step {i}" if i < len(steps) else f"ask {i - len(steps)}"
        try:
            at = _at(step["at"])
        except (KeyError, ValueError):
            out.append(f"{where}: no ISO-8601 'at'")
            continue
        if last is not None and at < last:
            out.append(f"{where}: 'at' goes back in time")
        last = at
        if step.get("device") not in DEVICES:
            out.append(f"{where}: device must be phone or laptop")
        if i >= len(steps):
            for key in ("current", "not_current", "absent"):
                if not isinstance(step.get(key, []), list):
                    out.append(f"{where}: {key} must be a list")
            if not step.get("query"):
                out.append(f"{where}: no query")
            continue
        try:
            kind = step_kind(step)
        except ValueError as exc:
            out.append(f"{where}: {exc}")
            continue
        conversation = step.get("conversation") or (step[kind] if kind == "end_session" else None)
        moved = conversation is not None and (
            home.setdefault(conversation, step.get("device", "")) != step.get("device")
        )
        if moved:
            out.append(f"{where}: conversation {conversation} moves to another device")
        if kind == "say":
            said.setdefault(step["conversation"], []).extend(
                normalise(s) for s in split_sentences(step["say"])
            )
        elif kind in ("remember", "correct"):
            text = step["remember"] if kind == "remember" else step["correct"]["text"]
            if normalise(text) not in said.get(step.get("conversation", ""), []):
                out.append(f"{where}: {kind} text was not typed earlier in its conversation")
    return out


# --- playing a script ----------------------------------------------------------------


class ScriptClocks:
    """The cloud's clock: the clock of the script being played (each script has its own
    ``FleetClock``, which never runs backwards; scripts' months interleave)."""

    def __init__(self) -> None:
        self.current = FleetClock(datetime(2026, 1, 1, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.current.peek()


@dataclass
class Returned:
    """One recall hit, as the judge read it."""

    text: str
    outdated: bool
    current: bool
    conflict: bool
    context_text: str | None = None

    @classmethod
    def of(cls, hit: RecallHit) -> Returned:
        context = getattr(hit, "context_text", None)
        return cls(hit.text, hit.outdated, hit.current, hit.conflict, context or None)

    @property
    def haystack(self) -> str:
        return f"{self.text}\n{self.context_text or ''}".lower()

    def flags(self) -> str:
        names = [n for n in ("outdated", "current", "conflict") if getattr(self, n)]
        return ",".join(names) or "-"


@dataclass
class AskResult:
    query: str
    device: str
    passed: bool
    reasons: list[str]
    returned: list[Returned]
    state_passed: bool
    state_reasons: list[str]
    anchors: dict[str, bool]


@dataclass
class ScriptResult:
    id: str
    kind: str
    half: str
    passed: bool
    step_errors: list[str] = field(default_factory=list)
    asks: list[AskResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def state_passed(self) -> bool:
        return not self.step_errors and bool(self.asks) and all(a.state_passed for a in self.asks)

    def anchor_passed(self, anchor: str) -> bool:
        return bool(self.asks) and all(a.anchors[anchor] for a in self.asks)


def judge(ask: dict[str, Any], hits: Sequence[Returned]) -> list[str]:
    """Why the answer fails the ask (empty: it passes)."""
    reasons = []
    conflict = bool(ask.get("conflict"))
    for s in ask.get("current", []):
        needle = s.lower()
        if not any(needle in h.haystack and not h.outdated for h in hits):
            reasons.append(f"current {s!r} not in a line that is not outdated")
        elif conflict and not any(
            needle in h.haystack and not h.outdated and h.conflict for h in hits
        ):
            reasons.append(f"current {s!r} returned but not flagged conflict")
    for s in ask.get("not_current", []):
        if any(s.lower() in h.haystack and not h.outdated for h in hits):
            reasons.append(f"stale {s!r} in a line not labelled outdated")
    for s in ask.get("absent", []):
        if any(s.lower() in h.haystack for h in hits):
            reasons.append(f"absent {s!r} was returned")
    return reasons


def judge_state(ask: dict[str, Any], views: Iterable[RecordView]) -> list[str]:
    """The state-level check on the asking device: a record is live when it is in use and
    superseded by nothing; every current substring lives, no stale or absent one does,
    and with ``conflict`` the current records name a conflict."""
    live = [v for v in views if v.text and v.in_use and v.superseded_by is None]
    reasons = []
    for s in ask.get("current", []):
        holders = [v for v in live if s.lower() in v.text.lower()]  # type: ignore[union-attr]
        if not holders:
            reasons.append(f"no live record holds current {s!r}")
        elif ask.get("conflict") and not any(v.conflict for v in holders):
            reasons.append(f"the live record holding {s!r} names no conflict")
    for key in ("not_current", "absent"):
        for s in ask.get(key, []):
            if any(s.lower() in v.text.lower() for v in live):  # type: ignore[union-attr]
                reasons.append(f"{key} {s!r} is in a live record")
    return reasons


def find_record(handle: DeviceHandle, text: str) -> str:
    """The record whose current text is ``text`` (the latest such), on this device."""
    wanted = normalise(text).lower()
    matches = [
        v
        for v in handle.agent.list_records()
        if v.text is not None and normalise(v.text).lower() == wanted
    ]
    if not matches:
        raise LookupError(f"no record on the {handle.name} with the text {text!r}")
    latest = max(matches, key=lambda v: (v.recorded_at or "", v.version or 0))
    return latest.record_id


def _apply(step: dict[str, Any], handle: DeviceHandle) -> None:
    agent, kind = handle.agent, step_kind(step)
    if kind == "say":
        agent.say(step["say"], step["conversation"])
    elif kind == "remember":
        agent.remember(step["remember"], step["conversation"])
    elif kind == "correct":
        target = find_record(handle, step["correct"]["target"])
        agent.correct(target, step["correct"]["text"], step["conversation"])
    elif kind == "dont_use":
        agent.dont_use(find_record(handle, step["dont_use"]))
    elif kind == "use_again":
        agent.use_again(find_record(handle, step["use_again"]))
    elif kind == "forget":
        agent.forget_permanently(find_record(handle, step["forget"]))
    elif kind == "end_session":
        agent.end_session(step["end_session"])
    else:
        agent.sync()


class Player:
    """One cloud, one consolidator, and the anchors' embedder, for many scripts."""

    def __init__(self, cloud: RunningCloud, clocks: ScriptClocks, folder: Path) -> None:
        from cloud.consolidator.worker import Consolidator

        self.cloud, self.clocks, self.folder = cloud, clocks, folder
        self.consolidator = Consolidator(cloud.operator, worker_id="relations-bench")
        self.embedder = default_embedder()

    def consolidate(self) -> None:
        from cloud.consolidator.scheduler import run_once

        run_once(self.consolidator)

    def play(self, script: dict[str, Any]) -> ScriptResult:
        start = time.perf_counter()
        sid = str(script.get("id"))
        result = ScriptResult(sid, str(script.get("kind")), half_of(script), passed=False)
        shape = problems(script)
        if shape:
            result.step_errors = [f"format: {p}" for p in shape]
            result.seconds = time.perf_counter() - start
            return result
        steps, asks = script["steps"], script["ask"]
        clock = FleetClock(_at(steps[0]["at"]))
        self.clocks.current = clock
        fleet = Fleet(self.cloud, self.folder / sid, clock=clock)
        try:
            user = fleet.add_user(sid)
            handles = {name: fleet.add_device(user, name) for name in DEVICES}
            for handle in handles.values():
                handle.agent.set_subset_policy(WHOLE_SPACE)
            for i, step in enumerate(steps):
                clock.set(_at(step["at"]))
                try:
                    _apply(step, handles[step["device"]])
                except Exception as exc:  # a refused step is a result, never a crash
                    result.step_errors.append(
                        f"step {i} ({step_kind(step)} on {step['device']}): "
                        f"{type(exc).__name__}: {exc}"
                    )
            typed = typed_sentences(steps)
            for ask in asks:
                clock.set(_at(ask["at"]))
                result.asks.append(self._ask(ask, handles, typed, result))
        except Exception as exc:  # enrolment or the cloud itself failed for this script
            result.step_errors.append(f"script: {type(exc).__name__}: {exc}")
        finally:
            fleet.close()
        result.passed = (
            not result.step_errors and bool(result.asks) and all(a.passed for a in result.asks)
        )
        result.seconds = time.perf_counter() - start
        return result

    def _ask(
        self,
        ask: dict[str, Any],
        handles: dict[str, DeviceHandle],
        typed: list[tuple[str, int]],
        result: ScriptResult,
    ) -> AskResult:
        for phase in ("sync before the consolidator", "consolidator", "sync after it"):
            try:
                if phase == "consolidator":
                    self.consolidate()
                else:
                    for handle in handles.values():
                        handle.agent.sync()
            except Exception as exc:
                result.step_errors.append(
                    f"before ask {ask['query']!r}: {phase}: {type(exc).__name__}: {exc}"
                )
        handle = handles[ask["device"]]
        returned: list[Returned] = []
        reasons: list[str] = []
        try:
            returned = [Returned.of(h) for h in handle.agent.recall(ask["query"])]
            reasons = judge(ask, returned)
        except Exception as exc:
            reasons = [f"recall raised {type(exc).__name__}: {exc}"]
        try:
            state_reasons = judge_state(ask, handle.agent.list_records())
        except Exception as exc:
            state_reasons = [f"list_records raised {type(exc).__name__}: {exc}"]
        return AskResult(
            query=ask["query"],
            device=ask["device"],
            passed=not reasons,
            reasons=reasons,
            returned=returned,
            state_passed=not state_reasons,
            state_reasons=state_reasons,
            anchors=self.anchors(ask, typed),
        )

    # --- anchors ---------------------------------------------------------------------

    def anchors(self, ask: dict[str, Any], typed: list[tuple[str, int]]) -> dict[str, bool]:
        texts = [t for t, _ in typed]
        if not texts:
            return dict.fromkeys(ANCHORS, False)
        vectors = self.embedder.embed([*texts, ask["query"]])
        cosine = vectors[:-1] @ vectors[-1]
        by_cosine = _ranked(cosine.tolist())
        top = sorted(by_cosine[:TOP], key=lambda i: -typed[i][1])
        newest = [*top, *by_cosine[TOP:]]
        by_bm25 = _ranked(bm25(texts, ask["query"]))
        return {
            "cosine_top3": anchor_passes(ask, [texts[i] for i in by_cosine]),
            "bm25_top3": anchor_passes(ask, [texts[i] for i in by_bm25]),
            "newest_similar_first": anchor_passes(ask, [texts[i] for i in newest]),
        }


def typed_sentences(steps: Sequence[dict[str, Any]]) -> list[tuple[str, int]]:
    """Every sentence the user typed in the script, with its typing order."""
    out: list[tuple[str, int]] = []
    for step in steps:
        if "say" in step:
            out.extend((s, len(out) + i) for i, s in enumerate(split_sentences(step["say"])))
    return out


def _ranked(scores: Sequence[float]) -> list[int]:
    """Indices by score, highest first; ties keep typing order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


_WORD = re.compile(r"[a-z0-9]+")


def bm25(texts: Sequence[str], query: str, k1: float = 1.5, b: float = 0.75) -> list[float]:
    """Okapi BM25 of ``query`` against each text, over these texts alone (lower-cased
    words of letters and digits; no stemming, no stop words)."""
    docs = [_WORD.findall(t.lower()) for t in texts]
    n = len(docs)
    average = sum(len(d) for d in docs) / n if n else 0.0
    df = Counter(w for d in docs for w in set(d))
    scores = []
    for doc in docs:
        tf = Counter(doc)
        score = 0.0
        for w in set(_WORD.findall(query.lower())):
            if tf[w]:
                idf = math.log(1 + (n - df[w] + 0.5) / (df[w] + 0.5))
                norm = tf[w] + k1 * (1 - b + b * len(doc) / (average or 1.0))
                score += idf * tf[w] * (k1 + 1) / norm
        scores.append(score)
    return scores


def anchor_passes(ask: dict[str, Any], ranking: Sequence[str]) -> bool:
    """An anchor's answer is its ranked sentences, the first three presented as current.
    It passes when the best sentence holding a current substring ranks above every
    sentence holding a stale one (with no current substring: no stale one in the top
    3), each current substring is in the top 3, and no absent substring is. An anchor
    has no flags, so ``conflict`` asks only need both values in the top 3."""
    lowered = [t.lower() for t in ranking]
    top = lowered[:TOP]
    current = [s.lower() for s in ask.get("current", [])]
    stale = [s.lower() for s in ask.get("not_current", [])]
    absent = [s.lower() for s in ask.get("absent", [])]
    stale_at = [i for i, t in enumerate(lowered) if any(s in t for s in stale)]
    if current:
        best = next((i for i, t in enumerate(lowered) if any(c in t for c in current)), None)
        if stale_at and (best is None or min(stale_at) <= best):
            return False
    elif any(i < TOP for i in stale_at):
        return False
    if any(not any(c in t for t in top) for c in current):
        return False
    return not any(a in t for a in absent for t in top)


def run(scripts: Sequence[dict[str, Any]], folder: Path) -> list[ScriptResult]:
    """Play every script on one real cloud in ``folder``; one result per script."""
    clocks = ScriptClocks()
    with RunningCloud.sqlite(folder / "cloud", clock=clocks) as cloud:
        player = Player(cloud, clocks, folder / "devices")
        return [player.play(script) for script in scripts]


# --- figures -------------------------------------------------------------------------


def _figures(results: Sequence[ScriptResult]) -> dict[str, Any]:
    n = len(results)
    passed = sum(r.passed for r in results)

    def rate(count: int) -> float:
        return round(count / n, 3) if n else 0.0

    return {
        "scripts": n,
        "passed": passed,
        "pass_rate": rate(passed),
        "state_pass_rate": rate(sum(r.state_passed for r in results)),
        "step_errors": sum(bool(r.step_errors) for r in results),
        "anchors": {a: rate(sum(r.anchor_passed(a) for r in results)) for a in ANCHORS},
    }


def summarise(results: Sequence[ScriptResult]) -> dict[str, Any]:
    """Per half present: per kind and overall figures (aggregates only)."""
    out: dict[str, Any] = {}
    for half in HALVES:
        mine = [r for r in results if r.half == half]
        if not mine:
            continue
        kinds = {k: _figures([r for r in mine if r.kind == k]) for k in KINDS}
        out[half] = {
            "kinds": {k: f for k, f in kinds.items() if f["scripts"]},
            "overall": _figures(mine),
            "seconds": round(sum(r.seconds for r in mine), 1),
        }
    return out


def failures(results: Sequence[ScriptResult], half: str = "tune") -> list[dict[str, Any]]:
    """Every failing script of ``half`` with what came back (for the tuner)."""
    return [
        {
            "id": r.id,
            "kind": r.kind,
            "step_errors": r.step_errors,
            "asks": [asdict(a) for a in r.asks if not a.passed or not a.state_passed],
        }
        for r in results
        if r.half == half and not r.passed
    ]


def render(summary: dict[str, Any]) -> list[Table]:
    tables = []
    for half, figures in summary.items():
        label = {"tune": "tuning half", "probe": "probe set", "test": "held-out test half"}[half]
        table = Table(
            title=f"tell-then-ask relations, {label} ({figures['seconds']:.0f} s)",
            caption="n scripts, pass / rate: answer-level passes, state: state-level pass "
            "rate, err: scripts with step errors; anchors: cosine, BM25, newest similar first",
        )
        table.add_column("kind", no_wrap=True)
        # scripts, passed, their rate, the state-level rate, scripts with step errors,
        # then each anchor's pass rate (cosine, BM25, newest similar first)
        for col in ("n", "pass", "rate", "state", "err", "cos@3", "bm25@3", "new@3"):
            table.add_column(col, justify="right")
        rows = [*figures["kinds"].items(), ("overall", figures["overall"])]
        for kind, f in rows:
            table.add_row(
                kind,
                str(f["scripts"]),
                str(f["passed"]),
                f"{f['pass_rate']:.2f}",
                f"{f['state_pass_rate']:.2f}",
                str(f["step_errors"]),
                *(f"{f['anchors'][a]:.2f}" for a in ANCHORS),
            )
        tables.append(table)
    return tables


def print_failures(failing: Sequence[dict[str, Any]]) -> None:
    """``failures(...)`` printed: id, each failing ask and the lines it got, flagged."""
    for f in failing:
        print(f"FAIL {f['id']} ({f['kind']})")
        for error in f["step_errors"]:
            print(f"  step error: {error}")
        for ask in f["asks"]:
            verdict = "fails" if not ask["passed"] else "passes; state fails"
            print(f"  ask {ask['query']!r} on the {ask['device']}: {verdict}")
            for reason in ask["reasons"]:
                print(f"    - {reason}")
            for reason in ask["state_reasons"]:
                print(f"    - state: {reason}")
            if not ask["returned"]:
                print("    (nothing returned)")
            for hit in ask["returned"]:
                flags = ",".join(n for n in ("outdated", "current", "conflict") if hit[n]) or "-"
                context = f"  [context: {hit['context_text']}]" if hit["context_text"] else ""
                print(f"    [{flags}] {hit['text']}{context}")


def scripts_for(half: str) -> list[dict[str, Any]]:
    """The scripts of ``half`` (tune, test or both) whose files exist."""
    files = {
        "tune": [TUNE_FILE],
        "probe": [PROBE_FILE],
        "test": [TEST_FILE],
        "both": [TUNE_FILE, TEST_FILE],
        "all": [TUNE_FILE, PROBE_FILE, TEST_FILE],
    }[half]
    return [s for path in files if path.exists() for s in load(path)]


def measure(folder: Path, smoke: bool = False) -> dict[str, Any]:
    """``bench.run``: both halves (smoke: three tuning scripts), their aggregates, and
    the tuning half's failures (never the held-out half's)."""
    scripts = scripts_for("both")
    if smoke:
        scripts = [s for s in scripts if s["id"] in SMOKE_IDS]
    start = time.perf_counter()
    results = run(scripts, folder)
    return {
        "seconds": round(time.perf_counter() - start, 1),
        "halves": summarise(results),
        "tune_failures": failures(results, "tune"),
        "test_file_present": TEST_FILE.exists(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--half", choices=["tune", "probe", "test", "both", "all"], default="tune")
    parser.add_argument("--id", action="append", default=[], help="play only these script ids")
    parser.add_argument(
        "--show-test-failures",
        action="store_true",
        help="also print the held-out half's failing scripts: FORBIDDEN while tuning "
        "(for whoever writes the held-out half only)",
    )
    parser.add_argument("--json", type=Path, help="write the aggregate figures here")
    args = parser.parse_args(argv)
    scripts = scripts_for(args.half)
    if args.id:
        scripts = [s for s in scripts if s["id"] in set(args.id)]
    if not scripts:
        print(f"no scripts for --half {args.half} in {DATA}", file=sys.stderr)
        return 1
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="memsync-bench-relations-") as tmp:
        results = run(scripts, Path(tmp))
    seconds = time.perf_counter() - start
    summary = summarise(results)
    print_failures(failures(results, "tune"))
    print_failures(failures(results, "probe"))  # the probe set is a tuning set too
    if args.show_test_failures:
        print_failures(failures(results, "test"))
    console = Console(width=max(Console().width, 130))
    for table in render(summary):
        console.print(table)
    print(f"{len(scripts)} scripts in {seconds:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
