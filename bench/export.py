"""Export streams in flat memory (issue 7): one space's package at 1k, 10k and 100k records.

``measure(folder, smoke)`` builds one space per size through ``CloudService.push``
(``bench.spaces.fill_space``: an episode and a remembered sentence per record, in
batches of 500 ops, SQLite store), registers an account key, and exports it through
``CloudService.export`` exactly as the route does (strong authentication, the exports
log, one snapshot, sealing to a device key) into a null sink that only counts bytes.
Each size is exported twice: once timed (seconds, MB/s of sealed stream), once under
``tracemalloc`` for the peak of Python allocations during the export, while the
process's resident set is sampled after every frame (its growth over the start).
Reported: the figures per size and the ratios largest / smallest (flat memory: ~1x).

Invariants: nothing here asserts a timing or a size; a stream that does not end with
its final chunk is an error naming the space, not a figure.
"""

from __future__ import annotations

import os
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nacl.public import PrivateKey, SealedBox
from nacl.signing import SigningKey
from rich.table import Table

from bench.spaces import fill_space
from cloud.config import CloudConfig
from cloud.service import CloudService
from protocol.export.stream import open_stream
from protocol.messages import AccountKeyRequest, EnrollRequest, ExportRequest
from protocol.strongauth import prove_export

FULL_SIZES = (1_000, 10_000, 100_000)
SMOKE_SIZES = (20, 60)
ACCOUNT = SigningKey(bytes(range(3, 35)))
PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


class ExportBroken(RuntimeError):
    """The bench export did not produce a whole package."""


def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE_BYTES


def _device(service: CloudService, space_id: str) -> tuple[str, PrivateKey]:
    key = PrivateKey.generate()
    enrolled = service.enroll(
        EnrollRequest(
            code=service.new_enrollment_code(space_id),
            device_name="exporter",
            public_key=bytes(key.public_key),
        )
    )
    service.register_account_key(
        space_id, enrolled.device_id, AccountKeyRequest(account_key=bytes(ACCOUNT.verify_key))
    )
    return enrolled.device_id, key


def _export(
    service: CloudService, space_id: str, device_id: str, export_id: str
) -> Iterator[bytes]:
    proof = prove_export(ACCOUNT, space_id, export_id, True)
    req = ExportRequest(export_id=export_id, include_sensitive=True, proof=proof)
    return service.export(space_id, device_id, req)


def _one(service: CloudService, space_id: str, n: int) -> dict[str, Any]:
    device_id, key = _device(service, space_id)
    # timed: sealed bytes into a null sink
    start = time.perf_counter()
    sealed = sum(len(f) for f in _export(service, space_id, device_id, f"exp_{n:08d}aaaa"))
    seconds = time.perf_counter() - start
    # traced: the peak of Python allocations and the resident set's growth while exporting
    tracemalloc.start()
    tracemalloc.reset_peak()
    base_traced = tracemalloc.get_traced_memory()[0]
    base_rss = peak_rss = _rss()
    frames = 0
    for _frame in _export(service, space_id, device_id, f"exp_{n:08d}bbbb"):
        frames += 1
        peak_rss = max(peak_rss, _rss())
    peak_traced = tracemalloc.get_traced_memory()[1] - base_traced
    tracemalloc.stop()
    # and once opened on the device side, to know the stream is whole (not timed)
    opened = sum(
        len(chunk)
        for chunk in open_stream(
            _export(service, space_id, device_id, f"exp_{n:08d}cccc"),
            f"exp_{n:08d}cccc",
            SealedBox(key).decrypt,
        )
    )
    if opened == 0:
        raise ExportBroken(f"space {space_id} ({n} records): the package is empty")
    mb = sealed / 1e6
    return {
        "records": n,
        "export_s": seconds,
        "sealed_mb": mb,
        "package_mb": opened / 1e6,
        "mb_per_s": mb / seconds,
        "frames": frames,
        "peak_traced_mb": peak_traced / 1e6,
        "rss_growth_mb": (peak_rss - base_rss) / 1e6,
    }


def measure(folder: Path, smoke: bool) -> dict[str, Any]:
    """Figures per space size (keyed by record count) and the ratios largest / smallest."""
    sizes = SMOKE_SIZES if smoke else FULL_SIZES
    out: dict[str, Any] = {}
    for tag, n in enumerate(sizes, start=1):
        where = folder / str(n)
        service = CloudService(
            CloudConfig(
                store_url=f"sqlite:///{where / 'records.db'}", key_store_path=where / "keys.db"
            )
        )
        try:
            built = fill_space(service, f"export-{n}", n, tag)
            figures = _one(service, built.space_id, n)
            figures["build_s"] = built.build_s
            out[str(n)] = figures
        finally:
            service.close()
    small, big = out[str(sizes[0])], out[str(sizes[-1])]
    out["ratio_records"] = sizes[-1] / sizes[0]
    out["ratio_peak_traced"] = big["peak_traced_mb"] / small["peak_traced_mb"]
    out["ratio_export_s"] = big["export_s"] / small["export_s"]
    return out


def render(result: dict[str, Any]) -> Table:
    table = Table(title="export of one space to a null sink (SQLite store, sealed stream)")
    columns = ["records", "export s", "sealed MB", "MB/s", "peak traced MB", "RSS growth MB"]
    for col in columns:
        table.add_column(col, justify="right")
    sizes = sorted(int(k) for k in result if k.isdigit())
    for n in sizes:
        row = result[str(n)]
        table.add_row(
            f"{n:,}",
            f"{row['export_s']:.2f}",
            f"{row['sealed_mb']:.1f}",
            f"{row['mb_per_s']:.1f}",
            f"{row['peak_traced_mb']:.2f}",
            f"{row['rss_growth_mb']:.1f}",
        )
    table.add_row(
        f"ratio {result['ratio_records']:.0f}x",
        f"{result['ratio_export_s']:.1f}x",
        "",
        "",
        f"{result['ratio_peak_traced']:.2f}x",
        "",
    )
    return table
