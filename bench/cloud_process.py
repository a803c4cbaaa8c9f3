"""The cloud served from a process of its own, as it is deployed, for the benches.

A device and its cloud never share an interpreter in production. In one process the
cloud's uvicorn thread and the device's thread take turns on Python's interpreter lock
(a waiting thread waits up to the 5 ms switch interval), which adds milliseconds to
every request that has nothing to do with either side's work. ``CloudProcess`` runs
``simulator.cloud_runner.RunningCloud`` in a spawned child, serving the same stores the
parent can open (SQLite files or a PostgreSQL database; the store serves several
processes), and answers, over a pipe, the CPU time that child has used, so a bench
can add the cloud's CPU to the device's.

Invariants: ``url`` is set only once the child listens; ``stop`` ends the child
whatever state it is in (asked, then terminated); a child whose parent went away
stops by itself. ``embed_stub`` makes the child's cloud embed with random unit vectors
for its whole life (a bench that stubs the model on the device side stubs it here too).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import time
from multiprocessing.connection import Connection

from cloud.config import CloudConfig
from simulator.cloud_runner import RunningCloud

START_TIMEOUT = 120.0


def _stub_cloud_embedder() -> None:
    from bench.retrieval import random_unit_vectors
    from cloud.embedder import default_embedder

    object.__setattr__(default_embedder(), "embed", random_unit_vectors(21))


def _serve(config: CloudConfig, conn: Connection, embed_stub: bool) -> None:
    """The cloud process: serve until the parent says stop (or goes away)."""
    if embed_stub:
        _stub_cloud_embedder()
    with RunningCloud(config) as cloud:
        conn.send(cloud.port)
        with contextlib.suppress(EOFError):  # the parent went away: stop too
            while conn.recv() == "cpu":
                conn.send(time.process_time())


class CloudProcess:
    """``RunningCloud`` in a child process; ``url`` once it listens."""

    def __init__(self, config: CloudConfig, *, embed_stub: bool = False) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(
            target=_serve, args=(config, child, embed_stub), daemon=True
        )
        self._process.start()
        child.close()
        try:
            if not self._conn.poll(START_TIMEOUT):
                raise EOFError(f"no port within {START_TIMEOUT:g} s")
            port = self._conn.recv()
        except EOFError as exc:
            self.stop()
            raise RuntimeError(
                f"the cloud process did not start listening ({exc or 'it exited'}; "
                f"exit code {self._process.exitcode})"
            ) from exc
        self.url = f"http://127.0.0.1:{port}"

    def cpu_s(self) -> float:
        """The CPU seconds (user + system) the cloud process has used so far."""
        self._conn.send("cpu")
        value: float = self._conn.recv()
        return value

    def stop(self) -> None:
        with contextlib.suppress(OSError):  # the child already exited
            self._conn.send("stop")
        self._process.join(timeout=60)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()
        self._conn.close()
