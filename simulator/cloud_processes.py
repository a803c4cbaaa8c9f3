"""Several real ``memsync cloud serve`` processes on ONE record store and ONE key store.

Invariants:
- Every process is a real subprocess (``python -m simulator.cli cloud serve``, cwd the
  repository root) bound to 127.0.0.1 on a port picked by binding port 0 first; a
  restarted process comes back on the same port, so devices keep their cloud URL.
- ``start`` returns only once the process answers ``GET /v1/health``, polled with a
  deadline; a process that exits before that is an error carrying its log's tail.
- The processes hold no state of their own: they share the store URL, the key store
  file and the master key (the ``master.key`` beside the key store, made once by the
  operator before any process starts, or ``MEMSYNC_MASTER_KEY`` when the config
  carries one). The operator handle is a ``CloudService`` on the same stores.
- Processes use their own system clock: a config's injected clock does not cross the
  process boundary.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from cloud.config import CloudConfig
from cloud.service import CloudService
from simulator.errors import CloudProcessError

REPO_ROOT = Path(__file__).resolve().parents[1]
READY_TIMEOUT = 60.0
POLL_INTERVAL = 0.05


def free_port() -> int:
    """A loopback port nothing listens on now (bind port 0, read it, release it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class CloudProcess:
    """One ``memsync cloud serve`` subprocess; its port stays the same across restarts."""

    def __init__(
        self, index: int, config: CloudConfig, log_path: Path, *, ready_timeout: float
    ) -> None:
        self.index = index
        self.config = config
        self.log_path = log_path
        self.ready_timeout = ready_timeout
        self.port = free_port()
        self.popen: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.kills = 0  # times this process was ended by SIGKILL

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.alive and self.popen is not None else None

    def _command(self) -> list[str]:
        return [
            sys.executable, "-m", "simulator.cli", "cloud", "serve",
            "--store", self.config.store_url,
            "--keys", str(Path(self.config.key_store_path).resolve()),
            "--host", "127.0.0.1", "--port", str(self.port),
        ]  # fmt: skip

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("MEMSYNC_STORE", None)
        env.pop("MEMSYNC_KEYS", None)
        if self.config.master_key is not None:
            env["MEMSYNC_MASTER_KEY"] = self.config.master_key.hex()
        return env

    def spawn(self) -> None:
        """Start the process without waiting for it to serve."""
        if self.alive:
            raise CloudProcessError(f"cloud process {self.index} is already running")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            log.write(f"--- start {self.starts + 1} on port {self.port}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(
                self._command(),
                cwd=REPO_ROOT,
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.starts += 1

    def wait_ready(self) -> None:
        """Poll ``/v1/health`` until it answers 200, the process exits, or the deadline."""
        assert self.popen is not None
        deadline = time.monotonic() + self.ready_timeout
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                try:
                    if client.get(f"{self.url}/v1/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                try:  # the poll interval doubles as a check that the process still runs
                    code = self.popen.wait(timeout=POLL_INTERVAL)
                except subprocess.TimeoutExpired:
                    continue
                raise CloudProcessError(
                    f"cloud process {self.index} exited with {code} before serving "
                    f"on {self.url}:\n{self.log_tail()}"
                )
        self.kill()
        raise CloudProcessError(
            f"cloud process {self.index} did not answer {self.url}/v1/health within "
            f"{self.ready_timeout}s:\n{self.log_tail()}"
        )

    def start(self) -> None:
        self.spawn()
        self.wait_ready()

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM: uvicorn finishes the requests in flight and exits."""
        self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL: the process dies at once, whatever it was doing."""
        if self.popen is not None and self.popen.poll() is None:
            self.kills += 1
        self._end(signal.SIGKILL, 30.0)

    def _end(self, sig: signal.Signals, timeout: float) -> None:
        if self.popen is None:
            return
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=30.0)

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode if self.popen is not None else None

    def restart(self, *, kill: bool = False) -> None:
        """Stop (or SIGKILL) the process and start it again on the same port."""
        if kill:
            self.kill()
        else:
            self.stop()
        self.start()

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return "(no log)"


class CloudProcesses:
    """N cloud processes on one store, plus an operator handle on that store."""

    def __init__(
        self,
        config: CloudConfig,
        count: int,
        folder: Path,
        *,
        ready_timeout: float = READY_TIMEOUT,
    ) -> None:
        if count < 1:
            raise CloudProcessError(f"count {count}: at least one cloud process is needed")
        self.config = config
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        # the operator opens the stores first: it migrates them and makes the master key,
        # so processes starting together never race to create either
        self.operator = CloudService(config)
        self.processes = [
            CloudProcess(i, config, folder / f"cloud-{i}.log", ready_timeout=ready_timeout)
            for i in range(count)
        ]

    @classmethod
    def sqlite(cls, folder: Path, count: int, **kwargs: float) -> CloudProcesses:
        folder.mkdir(parents=True, exist_ok=True)
        config = CloudConfig(
            store_url=f"sqlite:///{(folder / 'records.db').resolve()}",
            key_store_path=(folder / "keys.db").resolve(),
        )
        return cls(config, count, folder, **kwargs)

    @classmethod
    def postgres(cls, store_url: str, folder: Path, count: int, **kwargs: float) -> CloudProcesses:
        folder.mkdir(parents=True, exist_ok=True)
        config = CloudConfig(store_url=store_url, key_store_path=(folder / "keys.db").resolve())
        return cls(config, count, folder, **kwargs)

    @property
    def urls(self) -> list[str]:
        return [p.url for p in self.processes]

    @property
    def url(self) -> str:
        return self.processes[0].url

    def __getitem__(self, index: int) -> CloudProcess:
        try:
            return self.processes[index]
        except IndexError:
            raise CloudProcessError(
                f"no cloud process {index}; there are {len(self.processes)}"
            ) from None

    def start(self) -> CloudProcesses:
        """Start every process (spawned together, then each awaited)."""
        try:
            for process in self.processes:
                process.spawn()
            for process in self.processes:
                process.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def settle(self, timeout: float = 120.0) -> None:
        """Nothing to wait for from here: each process's indexer lives in that process
        (``RunningCloud.settle`` waits for an in-process one)."""

    def stop(self) -> None:
        for process in self.processes:
            process.stop()

    def kill(self, index: int) -> None:
        self[index].kill()

    def restart(self, index: int, *, kill: bool = False) -> None:
        self[index].restart(kill=kill)

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.operator.close()

    def __enter__(self) -> CloudProcesses:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
