"""``make bench``: figures and ratios measured side by side in one run.

Invariant: nothing here asserts a timing. Every figure is measured in this process on
this machine, next to its baseline, and written to ``bench/results.json``.
``--smoke`` runs the same code on a tiny workload (CI runs that, for breakage only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlcipher3
from rich.console import Console
from rich.table import Table

import device.db
from bench import cli as cli_bench
from bench import cloud_recall as cloud_recall_bench
from bench import consolidation as consolidation_bench
from bench import detector as detector_bench
from bench import embedding as embedding_bench
from bench import export as export_bench
from bench import live as live_bench
from bench import pouchdb as pouchdb_bench
from bench import pull_profile as pull_profile_bench
from bench import push_profile as push_profile_bench
from bench import relations as relations_bench
from bench import retrieval as retrieval_bench
from bench import retrieval_quality as retrieval_quality_bench
from bench import sensitivity as sensitivity_bench
from bench import simulator as simulator_bench
from bench import subset as subset_bench
from bench import subset_pull as subset_pull_bench
from bench import sync_suite
from device.agent import DeviceAgent
from protocol.ids import make_id
from protocol.messages import PushRequest
from protocol.model import Initiator
from protocol.operations import AddEpisode, Remember
from simulator.cloud_runner import RunningCloud

RESULTS = Path(__file__).resolve().parent / "results.json"
PASSPHRASE = "bench passphrase"
ROW_BYTES = 200


def _sentence(i: int) -> str:
    body = f"I keep note number {i} about the garden, the bikes and the long trip north"
    return (body + " and so on" * 20)[: ROW_BYTES - 1] + "."


@contextmanager
def _plain_sqlite() -> Iterator[None]:
    """Run the device's own code on plain SQLite: the same library, with no key set.

    SQLCipher without ``PRAGMA key`` is SQLite (the same build, so the comparison
    isolates the cost of encryption); the file is checked to be a plaintext SQLite
    file. The standard library's sqlite3 (3.40) is too old for the device schema's
    triggers, so it appears only in the raw baseline below.
    """
    original = device.db.key_pragma
    device.db.key_pragma = lambda passphrase: "SELECT 1"  # type: ignore[assignment]
    try:
        yield
    finally:
        device.db.key_pragma = original


def _timed(fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def bench_device_writes(n: int, folder: Path) -> float:
    """say + remember pairs per second through DeviceAgent (two ops, each its own txn)."""
    agent = DeviceAgent.create(folder, PASSPHRASE, device_name="bench")

    def work() -> None:
        for i in range(n):
            text = _sentence(i)
            agent.say(text, f"c{i}")
            agent.remember(text, f"c{i}")

    try:
        return n / _timed(work)
    finally:
        agent.close()


def bench_raw_writes(n: int, path: Path, module: Any, *, key: bool) -> float:
    """The physical limit: two single-row transactions per pair, same sizes, raw driver."""
    conn = module.connect(str(path), isolation_level=None)
    if key:
        conn.execute(f"PRAGMA key = '{PASSPHRASE}'")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE t (id TEXT PRIMARY KEY, body BLOB)")
    blob = os.urandom(ROW_BYTES)

    def work() -> None:
        for i in range(n):
            for kind in ("e", "r"):
                conn.execute("BEGIN IMMEDIATE")
                conn.execute("INSERT INTO t VALUES (?, ?)", (f"{kind}{i}", blob))
                conn.execute("COMMIT")

    try:
        return n / _timed(work)
    finally:
        conn.close()


def bench_push(n: int, folder: Path) -> dict[str, float]:
    """Ops per second, device queue to cloud store over loopback, vs the cloud's own apply."""
    results: dict[str, float] = {}
    with RunningCloud.sqlite(folder / "cloud") as cloud:
        _space, code = cloud.operator.add_user("bench")
        agent = DeviceAgent.create(
            folder / "device", PASSPHRASE, device_name="bench", cloud_url=cloud.url
        )
        agent.enroll(code)
        for i in range(n):
            agent.say(_sentence(i), f"c{i}")
            agent.remember(_sentence(i), f"c{i}")
        ops = agent.pending_ops()
        results["push_ops"] = ops
        results["push_ops_per_s"] = ops / _timed(agent.sync)
        agent.close()

        # The same ops applied by the cloud service directly: no HTTP, no device.
        space2, code2 = cloud.operator.add_user("bench-direct")
        from nacl.public import PrivateKey

        from protocol.messages import EnrollRequest

        enrolled = cloud.operator.enroll(
            EnrollRequest(
                code=code2, device_name="direct", public_key=bytes(PrivateKey.generate().public_key)
            )
        )
        wire = _wire_ops(n)
        batches = [wire[i : i + 500] for i in range(0, len(wire), 500)]

        def direct() -> None:
            for batch in batches:
                cloud.operator.push(space2, enrolled.device_id, PushRequest(ops=batch))

        results["direct_apply_ops_per_s"] = len(wire) / _timed(direct)

    raw = sqlite3.connect(str(folder / "raw.db"), isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("PRAGMA synchronous = NORMAL")
    raw.execute("CREATE TABLE t (space TEXT, id TEXT, body BLOB, PRIMARY KEY (space, id))")
    blob = os.urandom(ROW_BYTES + 40)

    def raw_insert() -> None:
        for start in range(0, 2 * n, 500):
            raw.execute("BEGIN IMMEDIATE")
            raw.executemany(
                "INSERT INTO t VALUES ('s', ?, ?)",
                ((str(i), blob) for i in range(start, min(start + 500, 2 * n))),
            )
            raw.execute("COMMIT")

    results["raw_store_insert_rows_per_s"] = 2 * n / _timed(raw_insert)
    raw.close()
    return results


def _wire_ops(n: int) -> list[dict[str, Any]]:
    at = datetime(2026, 11, 29, tzinfo=UTC)
    ops: list[dict[str, Any]] = []
    for i in range(n):
        episode = make_id("ep", i.to_bytes(10, "big"))
        ops.append(
            AddEpisode(
                op_id=make_id("op", (2 * i).to_bytes(10, "big")),
                made_at=at,
                initiated_by=Initiator.USER,
                episode_id=episode,
                conversation_id=f"c{i}",
                text=_sentence(i),
                typed_at=at,
            ).model_dump(mode="json")
        )
        ops.append(
            Remember(
                op_id=make_id("op", (2 * i + 1).to_bytes(10, "big")),
                initiated_by=Initiator.USER,
                record_id=make_id("rec", i.to_bytes(10, "big")),
                text=_sentence(i),
                conversation_id=f"c{i}",
                source_episode_ids=[episode],
                made_at=at,
            ).model_dump(mode="json")
        )
    return ops


def _machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "sqlcipher": sqlcipher3.connect(":memory:").execute("PRAGMA cipher_version").fetchone()[0],
    }


def _stamped(**parts: Any) -> dict[str, Any]:
    """A results document: when and on what machine, then the parts measured."""
    return {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": _machine(),
        **parts,
    }


def run_sync(smoke: bool) -> dict[str, Any]:
    """Issue 6's sync benches alone (``--only sync``): fleet, pull cost, key destruction
    and live sync."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-sync-") as tmp:
        sync = sync_suite.run(Path(tmp) / "sync", sync_suite.SMOKE if smoke else sync_suite.FULL)
        live = live_bench.measure(Path(tmp) / "live", smoke)
    return _stamped(sync=sync, live_sync=live)


def run_export(smoke: bool) -> dict[str, Any]:
    """Issue 7's export bench alone (``--only export``)."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-export-") as tmp:
        export = export_bench.measure(Path(tmp) / "export", smoke)
    return _stamped(export=export)


def run_subset(smoke: bool) -> dict[str, Any]:
    """Issue 9's device subset bench alone (``--only subset``)."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-subset-") as tmp:
        subset = subset_bench.measure(Path(tmp) / "subset", smoke)
    return _stamped(subset=subset)


def run_relations(smoke: bool) -> dict[str, Any]:
    """Issue 17's tell-then-ask quality bench alone (``--only relations``)."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-relations-") as tmp:
        relations = relations_bench.measure(Path(tmp) / "relations", smoke)
    return _stamped(relations=relations)


def run_sensitivity(smoke: bool) -> dict[str, Any]:
    """Issue 18's sensitivity bench alone (``--only sensitivity``)."""
    return _stamped(sensitivity=sensitivity_bench.measure(smoke))


def run_simulator(smoke: bool) -> dict[str, Any]:
    """Issue 19's simulator bench alone (``--only simulator``): 10,000 device sessions."""
    return _stamped(simulator=simulator_bench.measure(smoke))


def run_cli(smoke: bool) -> dict[str, Any]:
    """Issue 23's CLI timing alone (``--only cli``): ``memsync --help`` and ``device list``."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        return _stamped(cli=cli_bench.measure(Path(tmp) / "cli", smoke))


def run_cloud_recall(smoke: bool) -> dict[str, Any]:
    """Issue 20's first ``recall --cloud`` alone (``--only cloud-recall``)."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        return _stamped(cloud_recall=cloud_recall_bench.measure(Path(tmp) / "cloud-recall", smoke))


def run_retrieval_latency(smoke: bool, sizes: list[int]) -> dict[str, Any]:
    """Issue 20's recall latency alone (``--only retrieval-latency``): p50/p95 at each
    store size beside the floor measured in the same run."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        rows = retrieval_bench.latency(Path(tmp) / "latency", sizes, 20 if smoke else 200)
        return _stamped(retrieval_latency=rows)


def run_pouchdb(smoke: bool) -> dict[str, Any]:
    """Issue 21's side-by-side with PouchDB alone (``--only pouchdb``): push, initial sync
    and one-change sync, both sides alternately (skipped with a note without node)."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-pouchdb-") as tmp:
        return _stamped(pouchdb=pouchdb_bench.measure(Path(tmp) / "pouchdb", smoke))


def run_push_profile(smoke: bool) -> dict[str, Any]:
    """Issue 21's profile of one push alone (``--only push-profile``): cloud CPU and
    statements per op, the same statements through the raw driver, and the floor."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        return _stamped(push_profile=push_profile_bench.measure(Path(tmp) / "profile", smoke))


def run_subset_pull(smoke: bool) -> dict[str, Any]:
    """Issue 21's one-change sync as the space grows alone (``--only subset-pull``): a
    default device and a mirror at 1k, 10k and 100k records."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        return _stamped(subset_pull=subset_pull_bench.measure(Path(tmp) / "subset-pull", smoke))


def run_pull_profile(smoke: bool) -> dict[str, Any]:
    """Issue 21's profile of one device's pull (``--only pull-profile``): cloud CPU and
    statements per pulled change, today's page reader beside the per-row one before it."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        return _stamped(pull_profile=pull_profile_bench.measure(Path(tmp) / "pull", smoke))


def run_retrieval_quality(smoke: bool) -> dict[str, Any]:
    """Issue 20's retrieval quality alone (``--only retrieval-quality``): memsync's recall
    beside plain cosine and BM25, both halves of bench/retrieval_data."""
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        return _stamped(retrieval_quality_20=retrieval_quality_bench.run(Path(tmp), smoke=smoke))


def run(
    n_device: int, n_push: int, sizes: list[int], smoke: bool, n_consolidate: int
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        root = Path(tmp)
        sync = sync_suite.run(root / "sync", sync_suite.SMOKE if smoke else sync_suite.FULL)
        quality = retrieval_bench.quality(root / "eval", smoke)
        quality_20 = retrieval_quality_bench.run(root / "quality20", smoke=smoke)
        latency = retrieval_bench.latency(root / "latency", sizes, 20 if smoke else 200)
        embedding = embedding_bench.measure(smoke)
        detector = detector_bench.measure(smoke)
        ours_cipher = bench_device_writes(n_device, root / "cipher")
        with retrieval_bench.fast_vectors():
            ours_no_model = bench_device_writes(n_device, root / "cipher-no-model")
        with _plain_sqlite():
            ours_plain = bench_device_writes(n_device, root / "plain")
        plain_header = (root / "plain" / "device.db").read_bytes()[:16]
        raw_cipher = bench_raw_writes(n_device, root / "raw-cipher.db", sqlcipher3, key=True)
        raw_plain = bench_raw_writes(n_device, root / "raw-plain.db", sqlcipher3, key=False)
        raw_stdlib = bench_raw_writes(n_device, root / "raw-stdlib.db", sqlite3, key=False)
        push = bench_push(n_push, root / "push")
        consolidation = consolidation_bench.measure(n_consolidate, root / "consolidation")
        live = live_bench.measure(root / "live", smoke)
        export = export_bench.measure(root / "export", smoke)
        subset = subset_bench.measure(root / "subset", smoke)
        relations = relations_bench.measure(root / "relations", smoke)
        sensitivity = sensitivity_bench.measure(smoke)
        cloud_recall = cloud_recall_bench.measure(root / "cloud-recall", smoke)
        cli = cli_bench.measure(root / "cli", smoke)
        pouchdb = pouchdb_bench.measure(root / "pouchdb", smoke)
        subset_pull = subset_pull_bench.measure(root / "subset-pull", smoke)
    simulator = simulator_bench.measure(smoke)
    figures = {
        "device_pairs_per_s_sqlcipher": ours_cipher,
        "device_pairs_per_s_sqlcipher_model_stubbed": ours_no_model,
        "device_pairs_per_s_plain_sqlite": ours_plain,
        "raw_pairs_per_s_sqlcipher": raw_cipher,
        "raw_pairs_per_s_plain_sqlite": raw_plain,
        "raw_pairs_per_s_stdlib_sqlite3": raw_stdlib,
        **push,
        "consolidated_candidates_per_s": consolidation["consolidated_per_s"],
        "remember_applied_per_s": consolidation["remember_applied_per_s"],
    }
    ratios = {
        "device_sqlcipher_vs_device_plain": ours_cipher / ours_plain,
        "device_with_embedding_vs_model_stubbed": ours_cipher / ours_no_model,
        "device_sqlcipher_vs_raw_sqlcipher": ours_cipher / raw_cipher,
        "raw_sqlcipher_vs_raw_plain": raw_cipher / raw_plain,
        "push_e2e_vs_direct_apply": push["push_ops_per_s"] / push["direct_apply_ops_per_s"],
        "push_e2e_vs_raw_store_insert": push["push_ops_per_s"]
        / push["raw_store_insert_rows_per_s"],
        "consolidator_vs_explicit_remember": consolidation["consolidated_per_s"]
        / consolidation["remember_applied_per_s"],
    }
    return _stamped(
        workload={
            "device_pairs": n_device,
            "push_pairs": n_push,
            "row_bytes": ROW_BYTES,
            "candidates": n_consolidate,
        },
        plain_sqlite_file_is_plaintext=plain_header.startswith(b"SQLite format 3"),
        figures=figures,
        ratios=ratios,
        retrieval_quality=quality,
        retrieval_quality_20=quality_20,
        retrieval_latency=latency,
        embedding=embedding,
        detector=detector,
        live_sync=live,
        sync=sync,
        export=export,
        subset=subset,
        relations=relations,
        sensitivity=sensitivity,
        cloud_recall=cloud_recall,
        cli=cli,
        pouchdb=pouchdb,
        subset_pull=subset_pull,
        simulator=simulator,
    )


def render(result: dict[str, Any]) -> Table:
    table = Table(
        title="memsync bench (" + ", ".join(f"{k}={v}" for k, v in result["workload"].items()) + ")"
    )
    table.add_column("measure")
    table.add_column("value", justify="right")
    for name, value in result["figures"].items():
        table.add_row(name, f"{value:,.0f}")
    for name, value in result["ratios"].items():
        table.add_row(f"ratio {name}", f"{value:.2f}x")
    return table


def render_latency(rows: dict[str, Any]) -> Table:
    latency = Table(
        title="device recall latency (one query, offline, SQLCipher store of varied sentences; "
        "floor = embed the query + int8 scan + one FTS5 query, same run, alternating)"
    )
    cols = ("records", "p50 ms", "p95 ms", "floor p50", "floor p95", "p95/floor")
    for col in (*cols, "cpu p50", "floor cpu p50", "cold ms", "db MB"):
        latency.add_column(col, justify="right")
    for size, row in rows.items():
        latency.add_row(
            f"{int(size):,}",
            f"{row['p50_ms']:.1f}",
            f"{row['p95_ms']:.1f}",
            f"{row['floor_p50_ms']:.1f}",
            f"{row['floor_p95_ms']:.1f}",
            f"{row['p95_over_floor_p95']:.2f}x",
            f"{row['cpu_p50_ms']:.1f}",
            f"{row['floor_cpu_p50_ms']:.1f}",
            f"{row['cold_ms']:.0f}",
            f"{row['db_mb']:.1f}",
        )
    return latency


def render_retrieval(result: dict[str, Any]) -> list[Table]:
    q = result["retrieval_quality"]
    quality = Table(
        title=f"retrieval quality ({q['queries']} queries over {q['records']} records, "
        "tests/data/retrieval_eval.json)"
    )
    metrics = ["recall@1", "recall@3", "mrr", "subset_recall", "subset_size"]
    quality.add_column("mode")
    for m in metrics:
        quality.add_column(m, justify="right")
    for mode in ("lexical", "vector", "hybrid"):
        quality.add_row(mode, *(f"{q[mode][m]:.3f}" for m in metrics))
    latency = render_latency(result["retrieval_latency"])
    embedding = Table(title="sentence embeddings on one core (onnxruntime, 1 thread)")
    embedding.add_column("measure")
    embedding.add_column("value", justify="right")
    for name, value in result["embedding"].items():
        embedding.add_row(name, f"{value:,.1f}")
    return [quality, latency, embedding]


def _ms(value: float) -> str:
    return f"{value:,.1f}"


def render_sync(sync: dict[str, Any]) -> list[Table]:
    """Issue 6: the fleet, pull cost by space size, key destruction on a big device."""
    fleet = Table(
        title="fleet sync over loopback HTTP ("
        + ", ".join(f"{k}={sync['sizes'][k]}" for k in ("devices", "users", "rounds", "threads"))
        + f"; PostgreSQL {sync['postgresql']})"
    )
    columns = ["store", "push p50 ms", "push p99 ms", "pull p50 ms", "pull p99 ms"]
    columns += ["req/s", "ops/s", "errors", "converged"]
    for col in columns:
        fleet.add_column(col, justify="left" if col == "store" else "right")
    for store, f in sync["fleet"].items():
        fleet.add_row(
            store,
            _ms(f["push_p50_ms"]),
            _ms(f["push_p99_ms"]),
            _ms(f["pull_p50_ms"]),
            _ms(f["pull_p99_ms"]),
            f"{f['requests_per_s']:,.0f}",
            f"{f['ops_pushed_per_s']:,.0f}",
            str(f["errors"]),
            f"{f['devices_converged']}/{f['devices']}",
        )
    cost = Table(title="pull cost: one new memory (3 changes) pulled, by space size (median)")
    for col in ("store", "records", "pull p50 ms", "pull p90 ms", "sync p50 ms", "ratio"):
        cost.add_column(col, justify="left" if col == "store" else "right")
    for store, figures in sync["pull_cost"].items():
        sizes = sorted(int(k) for k in figures if k.isdigit())
        for n in sizes:
            row = figures[str(n)]
            ratio = f"{figures['ratio_pull']:.2f}x" if n == sizes[-1] else ""
            cost.add_row(
                store,
                f"{n:,}",
                _ms(row["pull_p50_ms"]),
                _ms(row["pull_p90_ms"]),
                _ms(row["sync_p50_ms"]),
                ratio,
            )
    destruction = Table(title="device applying key-destruction events (one sync, SQLite cloud)")
    for col in ("records", "events", "apply s", "ms/event", "db MB before", "db MB after"):
        destruction.add_column(col, justify="right")
    figures = sync["destruction"]
    for key in sorted((k for k in figures if k.isdigit()), key=int):
        d = figures[key]
        destruction.add_row(
            f"{d['records']:,}",
            f"{d['forgotten']:,}",
            f"{d['device_apply_s']:.2f}",
            f"{d['device_ms_per_event']:.2f}",
            f"{d['db_file_mb_before']:.1f} + WAL {d['db_wal_mb_before']:.1f}",
            f"{d['db_file_mb_after']:.1f} + WAL {d['db_wal_mb_after']:.1f}",
        )
    destruction.add_row("ratio", "", f"{figures['ratio_apply']:.2f}x", "", "", "")
    return [fleet, cost, destruction]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="tiny workload, for CI")
    parser.add_argument("--device-pairs", type=int, default=1000)
    parser.add_argument("--push-pairs", type=int, default=2000)
    parser.add_argument("--candidates", type=int, default=1000, help="for the consolidator")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[1_000, 10_000, 100_000],
        help="store sizes for the retrieval latency figures",
    )
    parser.add_argument(
        "--only",
        choices=[
            "all",
            "sync",
            "export",
            "subset",
            "relations",
            "sensitivity",
            "simulator",
            "cloud-recall",
            "retrieval-quality",
            "retrieval-latency",
            "cli",
            "pouchdb",
            "push-profile",
            "subset-pull",
            "pull-profile",
        ],
        default="all",
        help="'sync': only issue 6's sync benches (fleet, pull cost, key destruction, live); "
        "'export': only issue 7's export bench; 'subset': only issue 9's device subset bench; "
        "'relations': only issue 17's tell-then-ask quality bench (the tuning half's failures "
        "are printed, the held-out half's never); 'sensitivity': only issue 18's sensitivity "
        "bench (both halves' figures; `python -m bench.sensitivity --tune-errors` prints the "
        "tuning half's errors); 'simulator': only issue 19's simulator bench (seeded random "
        "runs in worker processes until 10,000 device sessions, beside a one-process "
        "baseline); 'cloud-recall': only issue 20's first recall --cloud on a freshly "
        "pushed space (before and after background indexing); 'retrieval-quality': only "
        "issue 20's retrieval quality (memsync's recall beside plain cosine and BM25 on both "
        "halves of bench/retrieval_data); 'retrieval-latency': only issue 20's recall latency "
        "at --sizes beside its floor; 'cli': only issue 23's CLI wall time (memsync "
        "--help and device list, fresh processes, beside python -c pass); 'pouchdb': only "
        "issue 21's side-by-side with PouchDB (push, initial sync, one-change sync; npm "
        "installs the peer into .cache/pouchdb on first use, skipped with a note without node); "
        "'push-profile': only issue 21's profile of one push (cloud CPU and statements per "
        "op, the same statements through sqlite3, and the floor); 'subset-pull': only issue "
        "21's one-change sync of a default device and a mirror at 1k, 10k and 100k records; "
        "'pull-profile': only issue 21's profile of one device's pull (cloud CPU and "
        "statements per pulled change, "
        "before and after the page-at-a-time reader)",
    )
    args = parser.parse_args()
    # a SIGTERM unwinds like Ctrl-C, so clouds stop and bench databases are dropped
    signal.signal(signal.SIGTERM, lambda _signum, _frame: sys.exit(143))
    console = Console()

    def show(*tables: Table) -> None:
        for table in tables:
            console.print(table)

    def show_relations(result: dict[str, Any]) -> None:
        relations_bench.print_failures(result["relations"]["tune_failures"])
        show(*relations_bench.render(result["relations"]["halves"]))

    def show_simulator(result: dict[str, Any]) -> None:
        show(simulator_bench.render(result["simulator"]))
        print(simulator_bench.verdict(result["simulator"]))

    smoke = args.smoke
    latency_sizes = [200] if smoke else args.sizes
    # one bench alone: what it measures, and what it prints after results.json is written
    alone: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None]]] = {
        "sync": (
            lambda: run_sync(smoke),
            lambda r: show(*render_sync(r["sync"]), live_bench.render(r["live_sync"])),
        ),
        "export": (lambda: run_export(smoke), lambda r: show(export_bench.render(r["export"]))),
        "subset": (lambda: run_subset(smoke), lambda r: show(subset_bench.render(r["subset"]))),
        "relations": (lambda: run_relations(smoke), show_relations),
        "sensitivity": (
            lambda: run_sensitivity(smoke),
            lambda r: show(*sensitivity_bench.render(r["sensitivity"])),
        ),
        "cloud-recall": (
            lambda: run_cloud_recall(smoke),
            lambda r: show(cloud_recall_bench.render(r["cloud_recall"])),
        ),
        "simulator": (lambda: run_simulator(smoke), show_simulator),
        "cli": (lambda: run_cli(smoke), lambda r: show(cli_bench.render(r["cli"]))),
        "pouchdb": (lambda: run_pouchdb(smoke), lambda r: show(pouchdb_bench.render(r["pouchdb"]))),
        "push-profile": (
            lambda: run_push_profile(smoke),
            lambda r: show(push_profile_bench.render(r["push_profile"])),
        ),
        "subset-pull": (
            lambda: run_subset_pull(smoke),
            lambda r: show(subset_pull_bench.render(r["subset_pull"])),
        ),
        "pull-profile": (
            lambda: run_pull_profile(smoke),
            lambda r: show(pull_profile_bench.render(r["pull_profile"])),
        ),
        "retrieval-quality": (
            lambda: run_retrieval_quality(smoke),
            lambda r: show(*retrieval_quality_bench.render(r["retrieval_quality_20"])),
        ),
        "retrieval-latency": (
            lambda: run_retrieval_latency(smoke, latency_sizes),
            lambda r: show(render_latency(r["retrieval_latency"])),
        ),
    }
    if args.only in alone:
        measure, report = alone[args.only]
        result = measure()
        result["smoke"] = smoke
        RESULTS.write_text(json.dumps(result, indent=2) + "\n")
        report(result)
        print(f"wrote {RESULTS}")
        return
    n_device, n_push = (20, 20) if args.smoke else (args.device_pairs, args.push_pairs)
    n_consolidate = 20 if args.smoke else args.candidates
    sizes = [200] if args.smoke else args.sizes
    result = run(n_device, n_push, sizes, args.smoke, n_consolidate)
    result["smoke"] = args.smoke
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    console.print(render(result))
    tables = [
        *render_retrieval(result),
        *retrieval_quality_bench.render(result["retrieval_quality_20"]),
        *detector_bench.render(result["detector"]),
        live_bench.render(result["live_sync"]),
        *render_sync(result["sync"]),
        export_bench.render(result["export"]),
        subset_bench.render(result["subset"]),
        *relations_bench.render(result["relations"]["halves"]),
        *sensitivity_bench.render(result["sensitivity"]),
        cloud_recall_bench.render(result["cloud_recall"]),
        cli_bench.render(result["cli"]),
        pouchdb_bench.render(result["pouchdb"]),
        subset_pull_bench.render(result["subset_pull"]),
        simulator_bench.render(result["simulator"]),
    ]
    for table in tables:
        console.print(table)
    print(simulator_bench.verdict(result["simulator"]))
    failing = len(result["relations"]["tune_failures"])
    print(f"relations: {failing} tuning script(s) fail; --only relations prints each of them")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
