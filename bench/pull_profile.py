"""Where one device's pull costs the cloud (issue 21): CPU and statements per pulled change,
for the page-at-a-time reader beside the per-row reader it replaced.

A fresh SQLite cloud gets one space with a mixed feed pushed in-process: per memory an
episode and a remember; every 10th a correction, every 20th an artifact of two records,
every 25th a project opened or closed, every 50th a "don't use", every 100th the forget
of an earlier record (its keys destroyed by the sweep). Fresh devices then pull the
whole feed in pages of ``LIMIT``, as a mirror (protocol 2) and as a subset (protocol 4);
per pulled change:
- cloud CPU: the pulling thread's CPU time inside ``CloudService.pull``;
- statements: the SQL statements the pulls ran (a ``before_cursor_execute`` event).
"Before" is the same measurement run in a child process on the ``cloud/`` and
``protocol/`` of ``BEFORE`` (the last commit whose pull read row by row), taken from
git; this module and the rest of the tree are today's.

Invariants: nothing here asserts a timing; a push that did not apply an op or a pull
that brought nothing is an error naming it, not a figure; every cloud made here is
closed; "before" is skipped with a note (never faked) when git cannot give that commit.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

from rich.table import Table
from sqlalchemy import event

from bench.pouchdb import stubbed_embedders
from bench.spaces import headless_device
from cloud.service import CloudConfig, CloudService
from protocol.messages import AckRequest, PullRequest, PushRequest
from protocol.operations import MAX_OPS_PER_PUSH, ReceiptStatus

ROOT = Path(__file__).resolve().parent.parent
BEFORE = "d106f15161041d21c98a71b2362ae15028909b4a"  # the per-row ChangeReader
LIMIT = 200  # the default page size of a pull
PROTOCOLS = {"mirror": 2, "subset": 4}
AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC).isoformat()


@dataclass(frozen=True)
class Sizes:
    memories: int
    reps: int  # fresh devices pulling the whole feed (medians reported)


FULL = Sizes(2_000, 5)
SMOKE = Sizes(40, 1)


class ProfileFellShort(RuntimeError):
    """A push did not apply an op, or a pull brought nothing: its figures would be wrong."""


def _word(i: int) -> str:
    """A made-up word of its own for each ``i``: every memory is about a subject of its
    own, so a push relates none to the others (shared subject keys would make the
    push's related-records step, not the pull, the bench's cost)."""
    consonants, vowels = "bdfgklmnprstvz", "aeiou"
    out = ""
    while True:
        i, c = divmod(i, len(consonants))
        i, v = divmod(i, len(vowels))
        out += consonants[c] + vowels[v]
        if not i:
            return out + "x"


def _ops(memories: int) -> list[dict[str, Any]]:
    """The mixed feed's ops, in order (raw wire ops with unique ids)."""
    out: list[dict[str, Any]] = []
    n = 0

    def base(kind: str, by: str = "user") -> dict[str, Any]:
        nonlocal n
        n += 1
        return {"kind": kind, "op_id": f"op_{n:010d}", "made_at": AT, "initiated_by": by}

    def rec(i: int) -> str:
        return f"rec_{i:012d}"

    for i in range(memories):
        ep = f"ep_{i:012d}"
        said = f"My {_word(i)} is {_word(i + 7)}."
        typed = f"{said} It has a blue cover."
        conv = f"conv-{i}"  # one conversation a memory: the said-check reads its episodes
        common = {"conversation_id": conv, "source_episode_ids": [ep]}
        out.append(
            {**base("add_episode"), "episode_id": ep, "text": typed, "typed_at": AT}
            | {"conversation_id": conv}
        )
        out.append({**base("remember"), "record_id": rec(i), "text": said, **common})
        if i % 10 == 9:
            out.append({**base("correct"), "record_id": rec(i), "text": "It has a blue cover."})
            out[-1].update(common)
        if i % 20 == 19:
            out.append(
                {
                    **base("add_artifact", "assistant"),
                    "artifact_id": f"art_{i:012d}",
                    "artifact_kind": "summary",
                    "derived_from": [rec(i), rec(i - 1)],
                    "payload": f"Notebooks {i - 1} and {i}.",
                }
            )
        if i % 25 == 24:
            k = i // 25  # three projects opened, then closed, then opened again...
            out.append(
                {**base("set_project"), "project": f"shelf-{k % 3}", "open": k // 3 % 2 == 0}
            )
        if i % 50 == 49:
            out.append({**base("dont_use"), "record_id": rec(i - 2)})
        if i % 100 == 99:
            out.append({**base("forget_permanently"), "record_id": rec(i - 50)})
    return out


def _build(folder: Path, memories: int) -> tuple[CloudService, str]:
    """A fresh cloud whose one space holds the mixed feed; (service, space id)."""

    folder.mkdir(parents=True)
    config = CloudConfig(
        store_url=f"sqlite:///{folder / 'records.db'}",
        key_store_path=folder / "keys.db",
        indexing="manual",
    )
    service = CloudService(config)
    space_id, _code = service.add_user("profile")
    device_id = headless_device(service, space_id, "writer")
    ops = _ops(memories)
    with stubbed_embedders():
        for first in range(0, len(ops), MAX_OPS_PER_PUSH):
            req = PushRequest(ops=ops[first : first + MAX_OPS_PER_PUSH])
            for receipt in service.push(space_id, device_id, req).receipts:
                if receipt.status is not ReceiptStatus.APPLIED:
                    service.close()
                    raise ProfileFellShort(
                        f"op {receipt.op_id} was {receipt.status.value}: {receipt.reason}"
                    )
            with service.store.session() as s:
                unacked = s.unacked_events(space_id, device_id)
            if unacked:
                service.ack(space_id, device_id, AckRequest(event_ids=unacked))
    return service, space_id


def _pull_whole_feed(service: CloudService, space_id: str, version: int) -> dict[str, float]:
    """A fresh device pulls the whole feed; its figures per pulled change."""

    device_id = headless_device(service, space_id, f"puller-{version}")
    statements = 0

    def count(*_args: Any) -> None:
        nonlocal statements
        statements += 1

    cursor, changes, pages, cpu = None, 0, 0, 0.0
    event.listen(service.store.engine, "before_cursor_execute", count)
    try:
        while True:
            req = PullRequest(protocol_version=version, cursor=cursor, limit=LIMIT)
            start = time.thread_time()
            page = service.pull(space_id, device_id, req)
            cpu += time.thread_time() - start
            changes += len(page.changes)
            pages += 1
            cursor = page.cursor
            if not page.has_more:
                break
    finally:
        event.remove(service.store.engine, "before_cursor_execute", count)
    if not changes:
        raise ProfileFellShort(f"device {device_id} pulled nothing from {space_id}")
    return {
        "changes": changes,
        "pages": pages,
        "cloud_cpu_us_per_change": 1e6 * cpu / changes,
        "statements_per_change": statements / changes,
    }


def measure_here(folder: Path, sizes: Sizes) -> dict[str, Any]:
    """The figures of the ``cloud`` this process imports."""
    service, space_id = _build(folder, sizes.memories)
    try:
        out: dict[str, Any] = {}
        for name, version in PROTOCOLS.items():
            runs = [_pull_whole_feed(service, space_id, version) for _ in range(sizes.reps)]
            out[name] = {
                "changes": runs[0]["changes"],
                "pages": runs[0]["pages"],
                "cloud_cpu_us_per_change": statistics.median(
                    r["cloud_cpu_us_per_change"] for r in runs
                ),
                "statements_per_change": statistics.median(
                    r["statements_per_change"] for r in runs
                ),
                "runs": runs,
            }
        return out
    finally:
        service.close()


def _before(folder: Path, sizes: Sizes) -> dict[str, Any]:
    """``measure_here`` on ``BEFORE``'s cloud and protocol, in a child process."""
    code = folder / "before-code"
    code.mkdir(parents=True)
    try:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", BEFORE, "cloud", "protocol"],
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        return {"skipped": f"git cannot give commit {BEFORE[:12]}: {exc}"}
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(code, filter="data")
    (code / "models").symlink_to(ROOT / "models")  # found beside the packages
    script = (
        "import json, sys\n"
        f"sys.path[:0] = [{str(code)!r}, {str(ROOT)!r}]\n"
        "import cloud\n"
        f"assert cloud.__file__.startswith({str(code)!r}), cloud.__file__\n"
        "from pathlib import Path\n"
        "from bench.pull_profile import Sizes, measure_here\n"
        f"out = measure_here(Path({str(folder / 'before')!r}), Sizes({sizes.memories}, "
        f"{sizes.reps}))\n"
        "print(json.dumps(out))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=folder, check=False
    )
    if done.returncode != 0:
        raise ProfileFellShort(f"the run on {BEFORE[:12]} failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def measure(folder: Path, smoke: bool, sizes: Sizes | None = None) -> dict[str, Any]:
    sizes = sizes or (SMOKE if smoke else FULL)
    folder.mkdir(parents=True, exist_ok=True)
    after = measure_here(folder / "after", sizes)
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        before = _before(Path(tmp), sizes)
    return {
        "sizes": sizes.__dict__.copy(),
        "limit": LIMIT,
        "before_commit": BEFORE,
        "before": before,
        "after": after,
    }


def render(result: dict[str, Any]) -> Table:
    after, before = result["after"], result["before"]
    some = next(iter(after.values()))
    table = Table(
        title=f"one device pulls the whole feed ({some['changes']:,} changes of "
        f"{result['sizes']['memories']:,} memories, pages of {result['limit']}, SQLite, "
        f"medians of {result['sizes']['reps']}); before = {result['before_commit'][:12]}"
    )
    table.add_column("per pulled change")
    for name in after:
        table.add_column(f"{name} before", justify="right")
        table.add_column(f"{name} after", justify="right")
    for label, key, fmt in (
        ("changes pulled (in all)", "changes", "{:,}"),
        ("cloud CPU in CloudService.pull", "cloud_cpu_us_per_change", "{:,.0f} µs"),
        ("statements", "statements_per_change", "{:.2f}"),
    ):
        cells = []
        for name in after:
            old = before.get(name)
            cells.append("skipped" if old is None else fmt.format(old[key]))
            cells.append(fmt.format(after[name][key]))
        table.add_row(label, *cells)
    if "skipped" in before:
        table.caption = f"before: {before['skipped']}"
    return table


if __name__ == "__main__":
    from rich.console import Console

    with tempfile.TemporaryDirectory(prefix="memsync-bench-pull-") as tmp:
        figures = measure(Path(tmp), "--smoke" in sys.argv)
    Console().print(render(figures))
