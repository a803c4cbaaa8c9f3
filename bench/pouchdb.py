"""memsync beside PouchDB (issue 21): push, initial sync, one-change sync, run alternately.

The peer is ``bench/pouchdb/peer.js``: a local leveldb PouchDB replicating to an
express-pouchdb server on loopback, in one node process. memsync's cloud serves from a
process of its own (``bench.cloud_process``), as it is deployed: in one Python process
the device's thread and the server's would take turns on the interpreter lock, which
adds milliseconds to each request that neither side spends (a one-change sync measured
22 ms in one process, 15 ms with the lock's switch interval shortened).
Its packages (pinned by ``bench/pouchdb/package.json``
and its lock) are installed by npm into ``.cache/pouchdb`` on first use; with no node
or npm, or when that install fails, the bench is skipped with a note naming why.

Each job alternates the two sides repetition by repetition (A B A B), and the medians are
reported, with wall time and CPU time (``process.cpuUsage`` there; here
``time.process_time`` of this process plus the cloud process's CPU over the same span:
each covers both sides of its pair) and the ratios against PouchDB:
- push: say + remember pairs queued on a fresh device (the embedder stubbed), then
  one ``sync`` to a fresh space (its pull included), with the device's own side apart:
  its thread's CPU and the SQL statements its connection ran, per op; vs as many docs
  as that pushed ops, put locally by bulkDocs in batches of 500, then one
  ``replicate.to`` (memsync runs first in each repetition, so the peer knows the count);
- initial sync: a fresh mirror device (protocol 2) catching up a space of ``records``
  remembered sentences vs a fresh local db's ``replicate.from`` of as many docs;
- one-change sync: one more memory (another device's push) then the caught-up
  device's ``sync``, vs one more doc put on the server then ``replicate.from``.

Invariants: nothing here asserts a timing; a job that moved less than it should (a
push refused, a pull that did not bring the change) is an error naming it, not a
figure; the node process and every cloud and device made here are closed whatever
happens.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from rich.table import Table

from bench import spaces
from bench.cloud_process import CloudProcess
from bench.retrieval import fast_vectors, random_unit_vectors
from cloud.config import CloudConfig
from cloud.embedder import default_embedder as cloud_embedder
from cloud.service import CloudService
from device.agent import DeviceAgent

PEER = Path(__file__).resolve().parent / "pouchdb"
CACHE = Path(__file__).resolve().parent.parent / ".cache" / "pouchdb"
BYTES = 200  # body size on both sides
INSTALL_TIMEOUT = 600.0
ANSWER_TIMEOUT = 900.0
CHANGES_PER_MEMORY = 3  # episode, record_version, record_state
PASSPHRASE = "bench passphrase"


@dataclass(frozen=True)
class Sizes:
    push_ops: int  # say + remember pairs queued: push_ops // 2; the peer puts as many docs
    # as memsync then pushes ops (a remember queues more than one op)
    records: int  # records (docs) of the initial sync
    reps: int  # repetitions of push and of initial sync
    changes: int  # one-change syncs timed after each initial sync


FULL = Sizes(2_000, 20_000, 2, 15)
SMOKE = Sizes(40, 30, 2, 3)


class PeerFailed(RuntimeError):
    """The node peer answered a job with an error, or did not answer."""


class JobFellShort(RuntimeError):
    """A memsync job moved less than it should have; its figures would be wrong."""


def _sentence(i: int) -> str:
    body = f"I keep note number {i} about the garden, the bikes and the long trip north"
    return (body + " and so on" * 20)[: BYTES - 1] + "."


def ensure_peer() -> Path | str:
    """The peer's ``node_modules``, installed on first use; or a note saying why not."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        return "skipped: node or npm is not on PATH (the PouchDB peer needs both)"
    modules = CACHE / "node_modules"
    pinned = [PEER / "package.json", PEER / "package-lock.json"]
    current = modules.is_dir() and all(
        (CACHE / p.name).exists() and filecmp.cmp(p, CACHE / p.name, shallow=False) for p in pinned
    )
    if current:
        return modules
    CACHE.mkdir(parents=True, exist_ok=True)
    for p in pinned:
        shutil.copyfile(p, CACHE / p.name)
    try:
        done = subprocess.run(
            [npm, "ci", "--prefer-offline", "--no-audit", "--no-fund"],
            cwd=CACHE,
            capture_output=True,
            text=True,
            timeout=INSTALL_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return f"skipped: npm ci in {CACHE} took over {INSTALL_TIMEOUT:.0f} s"
    if done.returncode != 0 or not modules.is_dir():
        (CACHE / "package-lock.json").unlink(missing_ok=True)  # retried next time
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return f"skipped: npm ci in {CACHE} failed ({done.returncode}): " + " | ".join(tail)
    return modules


class Peer:
    """The running node peer: one JSON job per line in, one JSON answer per line out."""

    def __init__(self, modules: Path, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._stderr = (folder / "peer.stderr").open("w")
        self._proc = subprocess.Popen(
            ["node", str(PEER / "peer.js"), str(folder)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, "NODE_PATH": str(modules)},
        )
        self.ready = self._read()

    def _read(self) -> dict[str, Any]:
        out: IO[str] | None = self._proc.stdout
        assert out is not None
        line = out.readline()
        if not line:
            raise PeerFailed(f"the PouchDB peer ended (exit {self._proc.poll()}), see its stderr")
        answer: dict[str, Any] = json.loads(line)
        if "error" in answer:
            raise PeerFailed(f"the PouchDB peer refused a job: {answer['error'][:200]}")
        return answer

    def ask(self, **job: Any) -> dict[str, Any]:
        stdin = self._proc.stdin
        assert stdin is not None
        stdin.write(json.dumps(job) + "\n")
        stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._stderr.close()


@contextmanager
def stubbed_embedders() -> Iterator[None]:
    """Random unit vectors for the device's and the cloud's embedders alike (the issue's
    comparison stubs the model on both sides; PouchDB embeds nothing)."""
    cloud = cloud_embedder()
    real = cloud.embed
    object.__setattr__(cloud, "embed", random_unit_vectors(21))
    try:
        with fast_vectors():
            yield
    finally:
        object.__setattr__(cloud, "embed", real)


@contextmanager
def _timed(cloud_cpu: Callable[[], float] = lambda: 0.0) -> Iterator[dict[str, float]]:
    """Wall seconds; CPU seconds of both sides (this process and, through ``cloud_cpu``,
    the cloud's); ``thread_cpu_s``: this thread's alone (the device's side)."""
    out: dict[str, float] = {}
    wall, thread = time.perf_counter(), time.thread_time()
    cpu = time.process_time() + cloud_cpu()
    yield out
    out["s"] = time.perf_counter() - wall
    out["cpu_s"] = time.process_time() + cloud_cpu() - cpu
    out["thread_cpu_s"] = time.thread_time() - thread


class _OwnProcessCloud:
    """A SQLite cloud served by a child process (embedding with random unit vectors),
    with an operator ``CloudService`` here on the same stores to make users and spaces."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        config = CloudConfig(
            store_url=f"sqlite:///{folder / 'records.db'}", key_store_path=folder / "keys.db"
        )
        self.operator = CloudService(config)
        try:
            self.process = CloudProcess(config, embed_stub=True)
        except BaseException:
            self.operator.close()
            raise
        self.url = self.process.url

    def cpu_s(self) -> float:
        return self.process.cpu_s()

    def settle(self) -> None:
        """Let the operator's own indexer finish what its pushes owed (a condition, not a
        sleep), so its work is not counted in a timed span."""
        self.operator.indexer.wait_idle(120)

    def close(self) -> None:
        try:
            self.process.stop()
        finally:
            self.operator.close()


class _Statements:
    """The SQL statements a device's connection runs (its trace callback: each row of an
    executemany counts, the statements SQLite runs inside FTS5 do not)."""

    def __init__(self, agent: DeviceAgent) -> None:
        self._conn = agent._debug_db().conn
        self._count: list[int] | None = None
        self._conn.set_trace_callback(self._seen)

    def _seen(self, sql: str) -> None:
        if self._count is not None and not sql.startswith("--"):
            self._count[0] += 1

    @contextmanager
    def counting(self) -> Iterator[list[int]]:
        self._count = count = [0]
        try:
            yield count
        finally:
            self._count = None

    def close(self) -> None:
        self._conn.set_trace_callback(None)


class Memsync:
    """memsync's side: one cloud on SQLite over loopback HTTP, fresh spaces per job."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.cloud = _OwnProcessCloud(folder / "cloud")
        self.jobs = 0
        self.caught_up: tuple[DeviceAgent, spaces.BuiltSpace] | None = None
        self.added = 0

    def _device(self, space_id: str, *, mirror: bool) -> DeviceAgent:
        self.jobs += 1
        agent = DeviceAgent.create(
            self.folder / f"device-{self.jobs}",
            PASSPHRASE,
            device_name=f"bench-{self.jobs}",
            cloud_url=self.cloud.url,
            protocol_versions=spaces.MIRROR if mirror else None,
        )
        agent.enroll(self.cloud.operator.new_enrollment_code(space_id))
        return agent

    def push(self, ops: int) -> dict[str, float]:
        space_id, _code = self.cloud.operator.add_user(f"push-{self.jobs}")
        agent = self._device(space_id, mirror=False)
        statements = _Statements(agent)
        try:
            with stubbed_embedders():
                with _timed(self.cloud.cpu_s) as queued, statements.counting() as queue_statements:
                    for i in range(ops // 2):
                        agent.say(_sentence(i), f"c{i}")
                        agent.remember(_sentence(i), f"c{i}")
                queued_ops = agent.pending_ops()
                with _timed(self.cloud.cpu_s) as pushed, statements.counting() as push_statements:
                    agent.sync()
            if agent.pending_ops() != 0:
                raise JobFellShort(f"push in space {space_id}: {agent.pending_ops()} ops left")
        finally:
            statements.close()
            agent.close()
        return {
            "ops": queued_ops,
            "queue_s": queued["s"],
            "queue_cpu_s": queued["cpu_s"],
            "queue_device_cpu_s": queued["thread_cpu_s"],
            "queue_statements": queue_statements[0],
            "push_s": pushed["s"],
            "push_cpu_s": pushed["cpu_s"],
            "push_device_cpu_s": pushed["thread_cpu_s"],
            "push_statements": push_statements[0],
        }

    def initial(self, records: int) -> dict[str, float]:
        self.close_caught_up()
        tag = 2100 + self.jobs
        with stubbed_embedders():  # the cloud indexes the fill in the background too
            space = spaces.fill_space(self.cloud.operator, f"initial-{tag}", records, tag)
            self.cloud.operator.index_pending()
            self.cloud.settle()
        agent = self._device(space.space_id, mirror=True)
        try:
            with stubbed_embedders(), _timed(self.cloud.cpu_s) as took:
                report = agent.sync()
        except BaseException:
            agent.close()
            raise
        self.caught_up, self.added = (agent, space), 0
        if report.pulled < 2 * records:
            raise JobFellShort(
                f"initial sync of space {space.space_id}: pulled {report.pulled} changes "
                f"for {records} records"
            )
        return {"records": records, "sync_s": took["s"], "sync_cpu_s": took["cpu_s"]}

    def one_change(self) -> dict[str, float]:
        assert self.caught_up is not None, "one_change needs an initial sync first"
        agent, space = self.caught_up
        ops = spaces.memory_ops(space.tag, space.records + self.added, 1, space.tag)
        with stubbed_embedders():
            spaces.push_checked(self.cloud.operator, space.space_id, space.writer_id, ops)
            self.cloud.settle()
        self.added += 1
        with stubbed_embedders(), _timed(self.cloud.cpu_s) as took:
            report = agent.sync()
        if report.pulled != CHANGES_PER_MEMORY:
            raise JobFellShort(
                f"one-change sync in space {space.space_id}: pulled {report.pulled} changes, "
                f"expected {CHANGES_PER_MEMORY}"
            )
        return {"sync_s": took["s"], "sync_cpu_s": took["cpu_s"]}

    def close_caught_up(self) -> None:
        if self.caught_up is not None:
            self.caught_up[0].close()
            self.caught_up = None

    def close(self) -> None:
        self.close_caught_up()
        self.cloud.close()


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def _run(peer: Peer, ours: Memsync, sizes: Sizes) -> dict[str, Any]:
    peer_push: list[dict[str, float]] = []
    our_push: list[dict[str, float]] = []
    peer_init: list[dict[str, float]] = []
    our_init: list[dict[str, float]] = []
    peer_one: list[dict[str, float]] = []
    our_one: list[dict[str, float]] = []
    for _rep in range(sizes.reps):  # B A B A: the peer puts as many docs as memsync pushed ops
        our_push.append(ours.push(sizes.push_ops))
        peer_push.append(peer.ask(job="push", n=int(our_push[-1]["ops"]), bytes=BYTES))
    for _rep in range(sizes.reps):
        peer_init.append(peer.ask(job="initial", n=sizes.records, bytes=BYTES))
        our_init.append(ours.initial(sizes.records))
        for _change in range(sizes.changes):
            peer_one.append(peer.ask(job="one_change"))
            our_one.append(ours.one_change())
    peer.ask(job="close")
    ops = our_push[0]["ops"]  # the same every repetition (the same sentences)
    push = {
        "ops": ops,
        "pouchdb_docs_per_s": ops / _median(peer_push, "push_s"),
        "memsync_ops_per_s": ops / _median(our_push, "push_s"),
        "pouchdb_cpu_us_per_doc": 1e6 * _median(peer_push, "push_cpu_s") / ops,
        "memsync_cpu_us_per_op": 1e6 * _median(our_push, "push_cpu_s") / ops,
        "pouchdb_queue_docs_per_s": ops / _median(peer_push, "queue_s"),
        "memsync_queue_ops_per_s": ops / _median(our_push, "queue_s"),
        # the device's side alone (its thread's CPU; the cloud's threads left out)
        "memsync_queue_device_cpu_us_per_op": 1e6 * _median(our_push, "queue_device_cpu_s") / ops,
        "memsync_queue_statements_per_op": _median(our_push, "queue_statements") / ops,
        "memsync_push_device_cpu_us_per_op": 1e6 * _median(our_push, "push_device_cpu_s") / ops,
        "memsync_push_statements_per_op": _median(our_push, "push_statements") / ops,
    }
    initial = {
        "pouchdb_docs_per_s": sizes.records / _median(peer_init, "sync_s"),
        "memsync_records_per_s": sizes.records / _median(our_init, "sync_s"),
        "pouchdb_cpu_us_per_doc": 1e6 * _median(peer_init, "sync_cpu_s") / sizes.records,
        "memsync_cpu_us_per_record": 1e6 * _median(our_init, "sync_cpu_s") / sizes.records,
    }
    one = {
        "pouchdb_ms": 1e3 * _median(peer_one, "sync_s"),
        "memsync_ms": 1e3 * _median(our_one, "sync_s"),
        "pouchdb_cpu_ms": 1e3 * _median(peer_one, "sync_cpu_s"),
        "memsync_cpu_ms": 1e3 * _median(our_one, "sync_cpu_s"),
    }
    # ratios are memsync's speed over PouchDB's (above 1: memsync is faster)
    ratios = {
        "push": push["memsync_ops_per_s"] / push["pouchdb_docs_per_s"],
        "push_cpu": push["pouchdb_cpu_us_per_doc"] / push["memsync_cpu_us_per_op"],
        "initial_sync": initial["memsync_records_per_s"] / initial["pouchdb_docs_per_s"],
        "initial_sync_cpu": initial["pouchdb_cpu_us_per_doc"]
        / initial["memsync_cpu_us_per_record"],
        "one_change_sync": one["pouchdb_ms"] / one["memsync_ms"],
        "one_change_sync_cpu": one["pouchdb_cpu_ms"] / one["memsync_cpu_ms"],
    }
    goals = {"push": 2.0, "initial_sync": 1.0, "one_change_sync": 1.0}
    return {
        "push": push,
        "initial_sync": initial,
        "one_change_sync": one,
        "ratios": ratios,
        "goals": {k: {"at_least": v, "met": ratios[k] >= v} for k, v in goals.items()},
        "runs": {"push": our_push, "initial_sync": our_init, "one_change_sync": our_one},
        "peer_runs": {"push": peer_push, "initial_sync": peer_init, "one_change_sync": peer_one},
    }


def measure(folder: Path, smoke: bool, sizes: Sizes | None = None) -> dict[str, Any]:
    """Both sides' figures and the ratios, or ``{"skipped": note}`` with no node/npm."""
    sizes = sizes or (SMOKE if smoke else FULL)
    modules = ensure_peer()
    if isinstance(modules, str):
        return {"skipped": modules, "sizes": sizes.__dict__.copy()}
    peer = Peer(modules, folder / "peer")
    try:
        ours = Memsync(folder / "memsync")
        try:
            out = _run(peer, ours, sizes)
        finally:
            ours.close()
    finally:
        peer.close()
    out["sizes"] = sizes.__dict__.copy()
    out["node"] = peer.ready.get("node")
    return out


def render(result: dict[str, Any]) -> Table:
    sizes = result["sizes"]
    table = Table(
        title="memsync beside PouchDB 9 / express-pouchdb 4.2 on loopback "
        f"(push {sizes['push_ops']:,} ops, initial sync {sizes['records']:,} records, "
        f"medians of {sizes['reps']} A B runs)"
    )
    for col in ("job", "PouchDB", "memsync", "ratio", "CPU ratio", "goal"):
        table.add_column(col, justify="left" if col == "job" else "right")
    if "skipped" in result:
        table.add_row("all", result["skipped"], "", "", "", "")
        return table
    p, i, o, r, g = (
        result[k] for k in ("push", "initial_sync", "one_change_sync", "ratios", "goals")
    )

    def goal(name: str) -> str:
        return f"≥ {g[name]['at_least']:.0f}x " + ("met" if g[name]["met"] else "not met")

    table.add_row(
        "push",
        f"{p['pouchdb_docs_per_s']:,.0f} docs/s",
        f"{p['memsync_ops_per_s']:,.0f} ops/s",
        f"{r['push']:.2f}x",
        f"{r['push_cpu']:.2f}x",
        goal("push"),
    )
    table.add_row(
        "local queueing",
        f"{p['pouchdb_queue_docs_per_s']:,.0f} docs/s",
        f"{p['memsync_queue_ops_per_s']:,.0f} ops/s",
        f"{p['memsync_queue_ops_per_s'] / p['pouchdb_queue_docs_per_s']:.2f}x",
        "",
        "",
    )
    table.add_row(
        "memsync device, per op",
        "",
        f"queue {p['memsync_queue_device_cpu_us_per_op']:,.0f} µs CPU, "
        f"{p['memsync_queue_statements_per_op']:.1f} statements; "
        f"push {p['memsync_push_device_cpu_us_per_op']:,.0f} µs CPU, "
        f"{p['memsync_push_statements_per_op']:.1f} statements",
        "",
        "",
        "",
    )
    table.add_row(
        "initial sync",
        f"{i['pouchdb_docs_per_s']:,.0f} docs/s",
        f"{i['memsync_records_per_s']:,.0f} records/s",
        f"{r['initial_sync']:.2f}x",
        f"{r['initial_sync_cpu']:.2f}x",
        goal("initial_sync"),
    )
    table.add_row(
        "one-change sync",
        f"{o['pouchdb_ms']:.1f} ms",
        f"{o['memsync_ms']:.1f} ms",
        f"{r['one_change_sync']:.2f}x",
        f"{r['one_change_sync_cpu']:.2f}x",
        goal("one_change_sync"),
    )
    return table
