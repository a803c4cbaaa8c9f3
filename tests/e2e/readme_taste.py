"""README's "A taste", followed as a new user would: every command line of its shell
block, in order, in a fresh folder with a fresh HOME, against the cloud the taste starts.

Invariants: the lines come from README.md itself (a change to the taste changes what is
run); the only substitutions are what a user types in by reading an earlier output (the
enrollment code, a record, device or export id) and a free loopback port for the fixed
8765; a command that stays in the foreground (``ui``, ``live``) runs until its first line
and is then stopped, as a user would press Ctrl-C.
"""

from __future__ import annotations

import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[2]
README = SOURCE_ROOT / "README.md"
SECTION = "## A taste"
SH_BLOCK = re.compile(r"```sh\n(.*?)```", re.DOTALL)
DEFAULT_PORT = "8765"
FOREGROUND = ("memsync device ui", "memsync device live")
FIRST_LINE_WAIT = 60.0  # seconds a foreground command may take to print its first line
IDS = {  # placeholder in the taste -> the id pattern a user copies from an earlier output
    "rec_…": r"rec_[a-z0-9]{8,64}",
    "dev_…": r"dev_[a-z0-9]{8,64}",
    "exp_…": r"exp_[a-z0-9]{8,64}",
}


def taste_lines() -> list[str]:
    """The command lines of the taste's shell block, comments cut, continuations joined."""
    text = README.read_text()
    section = text[text.index(SECTION) :]
    block = SH_BLOCK.findall(section)[0]
    joined = block.replace("\\\n", " ")
    lines = []
    for raw in joined.splitlines():
        line = _without_comment(raw).strip()
        if line:
            lines.append(line)
    return lines


def _without_comment(line: str) -> str:
    """The line up to a ``#`` that starts a shell comment (after a space, outside quotes)."""
    quote = ""
    for n, c in enumerate(line):
        if quote:
            quote = "" if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (n == 0 or line[n - 1].isspace()):
            return line[:n]
    return line


@dataclass
class Step:
    line: str
    command: str
    returncode: int
    output: str


@dataclass
class Taste:
    """One run of the taste: its folder, environment, the cloud it started, what it saw."""

    folder: Path
    port: int
    env: dict[str, str] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    cloud: subprocess.Popen[str] | None = None
    seen: str = ""  # every output so far, newest last

    def __post_init__(self) -> None:
        home = self.folder / "home"
        home.mkdir(parents=True, exist_ok=True)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("MEMSYNC_")},
            "HOME": str(home),
            "PYTHONUNBUFFERED": "1",  # a foreground command's first line arrives at once
            "PYTHONPATH": str(SOURCE_ROOT),
            "MEMSYNC_ACCOUNT_PASSPHRASE": "a taste of the account passphrase",
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def latest(self, pattern: str, *, after: str = "") -> str:
        found = re.findall(pattern, self.seen)
        if not found:
            raise AssertionError(f"no {pattern!r} in the outputs so far:\n{self.seen[-3000:]}")
        return str(found[-1]) if not after else str(found[0])

    def fill(self, line: str) -> str:
        command = line.replace(DEFAULT_PORT, str(self.port))
        if command.startswith("memsync cloud serve"):
            command = command.replace(
                "memsync cloud serve", f"memsync cloud serve --port {self.port}"
            )
        if "<CODE>" in command:
            command = command.replace("<CODE>", self.latest(r"enrollment code: (\S+)"))
        for placeholder, pattern in IDS.items():
            if placeholder in command:
                command = command.replace(placeholder, self.first_id(pattern))
        return command

    def first_id(self, pattern: str) -> str:
        """The id a user would copy: the first record remembered; the device or export
        the latest output named."""
        found = re.findall(pattern, self.seen)
        if not found:
            raise AssertionError(f"no {pattern!r} in the outputs so far:\n{self.seen[-3000:]}")
        return str(found[0]) if pattern.startswith("rec_") else str(found[-1])

    def run(self, line: str, *, timeout: float = 600.0) -> Step:
        command = self.fill(line)
        if command.startswith("export "):
            name, _, value = command.removeprefix("export ").partition("=")
            self.env[name] = shlex.split(value)[0]
            return self._saw(Step(line, command, 0, ""))
        if command.endswith("&"):
            return self._start_cloud(line, command.rstrip("&").strip())
        if command.startswith(FOREGROUND):
            return self._foreground(line, command)
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=self.folder,
            env=self.env,
            input="yes\n",  # what a user types at a confirmation
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return self._saw(Step(line, command, done.returncode, done.stdout + done.stderr))

    def _saw(self, step: Step) -> Step:
        self.steps.append(step)
        self.seen += f"\n$ {step.command}\n{step.output}"
        return step

    def _start_cloud(self, line: str, command: str) -> Step:
        log = (self.folder / "cloud.log").open("w")
        self.cloud = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.folder,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        deadline = time.monotonic() + 60
        import httpx

        while time.monotonic() < deadline:
            if self.cloud.poll() is not None:
                break
            try:
                if (
                    httpx.get(f"http://127.0.0.1:{self.port}/v1/health", timeout=1).status_code
                    == 200
                ):
                    return self._saw(Step(line, command, 0, "cloud serving"))
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        return self._saw(Step(line, command, 1, (self.folder / "cloud.log").read_text()))

    def _foreground(self, line: str, command: str) -> Step:
        proc = subprocess.Popen(
            ["bash", "-c", f"exec {command}"],
            cwd=self.folder,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], FIRST_LINE_WAIT)
        first = proc.stdout.readline() if ready else ""
        os.killpg(proc.pid, signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            rest, _ = proc.communicate()
        return self._saw(Step(line, command, 0 if first else 1, first + rest))

    def stop(self) -> None:
        if self.cloud is not None and self.cloud.poll() is None:
            os.killpg(self.cloud.pid, signal.SIGTERM)
            try:
                self.cloud.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.cloud.pid, signal.SIGKILL)


def main() -> None:
    import socket
    import tempfile

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    taste = Taste(folder=Path(tempfile.mkdtemp(prefix="taste-")), port=port)
    try:
        for line in taste_lines():
            t = time.monotonic()
            step = taste.run(line)
            print(
                f"--- [{step.returncode}] {time.monotonic() - t:.1f}s $ {shlex.quote(step.command)}"
            )
            print(step.output.rstrip()[:1500])
    finally:
        taste.stop()


if __name__ == "__main__":
    main()
