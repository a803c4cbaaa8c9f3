"""A fork server for device sync processes: real processes without paying Python's start.

Invariants:
- The server is a process of its own (``python -m simulator.forkserver``), started once
  (lazily, on the first request) and single-threaded: it imports the device code and
  then only accepts requests on a Unix socket in a private folder, so every fork is of
  a clean process holding no database, no connection and no thread.
- Each request forks a *runner*, which forks the *worker* that runs the sync
  (``simulator.sync_process.run_sync``: what ``memsync device sync --dir`` runs) with
  exactly the environment the caller sent (its ``os.environ`` at the call, the
  passphrase and the kill hook ``MEMSYNC_DEVICE_CRASH_AT`` set as a subprocess would
  have them). The worker is a separate real process that opens the device's database
  files itself; a kill point kills it by a real SIGKILL at that point. The runner, its
  parent, reports how it ended as a subprocess would: ``returncode`` (negative: the
  signal), ``stdout``, ``stderr``; on the timeout the runner SIGKILLs it and the caller
  gets ``subprocess.TimeoutExpired``.
- Requests are independent connections, so any thread may call ``sync`` at any time,
  concurrently with others. A request that could not be handed over (no server, or it
  is gone) raises ``ForkServerUnavailable`` and nothing ran, so the caller may run the
  sync another way; once a request was handed over, a missing answer is an error,
  never a silent second sync.
- The server ends when it is closed, or when the process that started it ends (it
  watches a pipe only that process holds).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from simulator.errors import SimulatorError

SOURCE_ROOT = Path(__file__).resolve().parents[1]
SOCKET_NAME = "fork.sock"
ANSWER_SLACK_SECONDS = 60  # beyond the sync's own timeout, for the runner to answer
PRELOADED = ("device.sync", "device.cli", "simulator.cli", "simulator.sync_process")


class ForkServerUnavailable(SimulatorError):
    """The request was not handed to a fork server (nothing ran)."""


class ForkServerError(SimulatorError):
    """A fork server took a request and gave no proper answer."""


def supported() -> bool:
    return hasattr(os, "fork") and hasattr(socket, "AF_UNIX")


class ForkServer:
    """The client side: starts the server on first use; ``sync`` runs one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._folder: Path | None = None
        self._lifeline: int | None = None
        self._broken: str | None = None
        self.served = 0  # requests answered

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def start(self) -> None:
        """Start the server now (it imports while the caller goes on) instead of at the
        first request; a server that cannot start is left for the first request to
        report (``ForkServerUnavailable``, then the caller's fallback)."""
        with self._lock, contextlib.suppress(ForkServerUnavailable):
            self._start()

    def _start(self) -> Path:
        """Start the server if needed (under the lock); the socket's path."""
        if self._broken is not None:
            raise ForkServerUnavailable(self._broken)
        if self._process is not None:
            if self._process.poll() is not None:
                self._broken = f"the fork server ended with code {self._process.returncode}"
                raise ForkServerUnavailable(self._broken)
            assert self._folder is not None
            return self._folder / SOCKET_NAME
        if not supported():
            self._broken = "this platform has no fork() or no Unix sockets"
            raise ForkServerUnavailable(self._broken)
        folder = Path(tempfile.mkdtemp(prefix="memsync-fork-"))
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        read_end, write_end = os.pipe()
        try:
            listener.bind(str(folder / SOCKET_NAME))
            listener.listen(64)  # requests queue here while the server imports
            env = {**os.environ}
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(SOURCE_ROOT), os.environ.get("PYTHONPATH", "")) if p
            )
            log = (folder / "server.log").open("wb")
            with log:
                self._process = subprocess.Popen(
                    [sys.executable, "-m", "simulator.forkserver", "--fd",
                     str(listener.fileno()), "--lifeline", str(read_end), "--folder", str(folder)],
                    cwd=SOURCE_ROOT, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                    pass_fds=(listener.fileno(), read_end),
                )  # fmt: skip
        except OSError as exc:
            os.close(write_end)
            shutil.rmtree(folder, ignore_errors=True)
            self._broken = f"the fork server could not start: {exc}"
            raise ForkServerUnavailable(self._broken) from exc
        finally:
            listener.close()
            os.close(read_end)
        self._folder, self._lifeline = folder, write_end
        return folder / SOCKET_NAME

    def sync(
        self, directory: Path, env: Mapping[str, str], embedder: str, timeout: float
    ) -> subprocess.CompletedProcess[str]:
        """Run the device sync in ``directory`` in a forked process with ``env``."""
        with self._lock:
            path = self._start()
        request = {"dir": str(directory), "env": dict(env), "embedder": embedder,
                   "timeout": timeout}  # fmt: skip
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            try:
                conn.connect(str(path))
            except OSError as exc:
                raise ForkServerUnavailable(f"the fork server at {path} is gone: {exc}") from exc
            conn.settimeout(timeout + ANSWER_SLACK_SECONDS)
            conn.sendall(json.dumps(request).encode() + b"\n")
            conn.shutdown(socket.SHUT_WR)
            answer = _read_all(conn)
        except TimeoutError as exc:
            raise ForkServerError(
                f"the fork server gave no answer for the sync of {directory} within "
                f"{timeout + ANSWER_SLACK_SECONDS} s"
            ) from exc
        finally:
            conn.close()
        if not answer:
            raise ForkServerError(
                f"the fork server took the sync of {directory} and closed without an answer "
                f"(see {path.parent / 'server.log'})"
            )
        done = json.loads(answer)
        args = ["memsync", "device", "sync", "--dir", str(directory)]
        if done["timed_out"]:
            raise subprocess.TimeoutExpired(args, timeout, done["stdout"], done["stderr"])
        with self._lock:
            self.served += 1
        return subprocess.CompletedProcess(args, done["returncode"], done["stdout"], done["stderr"])

    def close(self) -> None:
        with self._lock:
            if self._lifeline is not None:
                os.close(self._lifeline)  # the server sees the pipe end and exits
                self._lifeline = None
            if self._process is not None:
                try:
                    self._process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self._process.kill()
                    self._process.wait()
            if self._folder is not None:
                shutil.rmtree(self._folder, ignore_errors=True)
            self._broken = self._broken or "the fork server was closed"


def _read_all(conn: socket.socket) -> bytes:
    chunks = []
    while chunk := conn.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


# --- the server installed for this process -------------------------------------------

_current: ForkServer | None = None
_current_lock = threading.Lock()


def current() -> ForkServer | None:
    """The fork server device sync processes go through now, if any."""
    return _current


class _Refusing(ForkServer):
    """A fork server that takes nothing: every sync falls back to a plain subprocess."""

    def _start(self) -> Path:
        raise ForkServerUnavailable("fork server disabled: plain subprocesses")


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within: every device sync process is a plain subprocess (the path without a fork
    server, e.g. a bench's baseline), whatever ``serving`` installs meanwhile."""
    global _current
    with _current_lock:
        before = _current
        _current = _Refusing()
    try:
        yield
    finally:
        with _current_lock:
            _current = before


def install_for_process() -> ForkServer:
    """Install a fork server for the rest of this process (a worker of many runs), started
    now; closed when the process exits (and it exits by itself if this process dies)."""
    global _current
    with _current_lock:
        if _current is None:
            _current = ForkServer()
            atexit.register(_current.close)
        server = _current
    server.start()
    return server


@contextlib.contextmanager
def serving() -> Iterator[ForkServer]:
    """Route this process's device sync processes through a fork server (the one already
    installed, or a new one started lazily and closed at the end)."""
    global _current
    with _current_lock:
        existing = _current
        server = existing or ForkServer()
        _current = server
    if existing is not None:
        yield existing
        return
    try:
        yield server
    finally:
        with _current_lock:
            _current = None
        server.close()


# --- the server process ---------------------------------------------------------------


def _returncode(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _worker(request: Mapping[str, Any], out: int, err: int) -> None:
    """The forked process that syncs; never returns."""
    code = 1
    try:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        from simulator.sync_process import run_sync

        try:
            code = run_sync(Path(request["dir"]), request["embedder"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _runner(conn: socket.socket, request: Mapping[str, Any]) -> None:
    """The forked parent of one worker: run it, report how it ended; never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            conn.close()
            os.close(out_r)
            os.close(err_r)
            _worker(request, out_w, err_w)
        os.close(out_w)
        os.close(err_w)
        deadline = time.monotonic() + float(request["timeout"])
        captured = {out_r: bytearray(), err_r: bytearray()}
        timed_out = False
        with selectors.DefaultSelector() as sel:
            for fd in captured:
                sel.register(fd, selectors.EVENT_READ)
            while sel.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    timed_out = True
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    break
                for key, _ in sel.select(left):
                    data = os.read(key.fd, 65536)
                    if data:
                        captured[key.fd].extend(data)
                    else:
                        sel.unregister(key.fd)
        _, status = os.waitpid(pid, 0)
        answer = {
            "returncode": _returncode(status),
            "stdout": captured[out_r].decode(errors="replace"),
            "stderr": captured[err_r].decode(errors="replace"),
            "timed_out": timed_out,
        }
        conn.sendall(json.dumps(answer).encode())
        conn.close()
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
        os._exit(1)
    os._exit(0)


def _read_request(conn: socket.socket) -> dict[str, Any] | None:
    conn.settimeout(30)
    try:
        raw = _read_all(conn)
    except OSError:
        return None
    conn.settimeout(None)
    if not raw:
        return None
    request: dict[str, Any] = json.loads(raw)
    return request


def _reap() -> None:
    with contextlib.suppress(ChildProcessError):
        while True:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return


def serve(listener: socket.socket, lifeline: int) -> None:
    """Accept requests until the lifeline's other end closes."""
    for module in PRELOADED:  # imported once here, so that no fork imports them again
        importlib.import_module(module)

    with selectors.DefaultSelector() as sel:
        sel.register(listener, selectors.EVENT_READ)
        sel.register(lifeline, selectors.EVENT_READ)
        while True:
            for key, _ in sel.select(timeout=1.0):
                if key.fileobj == lifeline:
                    return  # the process that started this server has gone or closed it
                conn, _addr = listener.accept()
                request = _read_request(conn)
                if request is None:
                    conn.close()
                    continue
                if os.fork() == 0:
                    listener.close()
                    os.close(lifeline)
                    _runner(conn, request)
                conn.close()
            _reap()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simulator.forkserver")
    parser.add_argument("--fd", type=int, required=True, help="the listening Unix socket")
    parser.add_argument("--lifeline", type=int, required=True, help="EOF here: exit")
    parser.add_argument("--folder", type=Path, required=True, help="removed on exit")
    args = parser.parse_args(argv)
    listener = socket.socket(fileno=args.fd)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent's Ctrl-C is the parent's
    try:
        serve(listener, args.lifeline)
    finally:
        listener.close()
        _reap()
        shutil.rmtree(args.folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
