"""The ``memsync`` console entry: one command, four groups, each loaded only when named.

Invariants: this module imports nothing of the project at import time. ``memsync device
…`` loads ``device.cli`` alone (never the cloud, the simulator or onnxruntime unless the
command itself needs them); ``memsync cloud …`` loads ``cloud.cli``; ``simulate`` and
``demo`` hand the whole command line to ``simulator.cli``. ``--help``, no command or an
unknown one are answered from the group names here, loading nothing. A misspelt command
at any level is refused naming it, with the nearest command as a suggestion. Exit codes
are the groups' own (2 for a refusal, 130 when interrupted).
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

DESCRIPTION = "Offline-first sync engine for a personal assistant's long-term memory."
GROUPS = {
    "cloud": "run and administer the memsync cloud",
    "device": "the offline device core",
    "simulate": "play a scenario or a seeded random run against a real cloud on loopback "
    "and check the invariants",
    "demo": "the main job: the forget-propagation, writing, account-end and device-subset "
    "scenarios on an embedded SQLite cloud",
}
LOADED_BY_NAME = ("cloud", "device")  # the groups whose parser this module builds


def suggestion(word: str, choices: Sequence[str]) -> str | None:
    """The choice nearest to a misspelt ``word`` (None when nothing is close)."""
    near = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    if near:
        return near[0]
    prefixed = [c for c in choices if c.startswith(word) or word.startswith(c)]
    return prefixed[0] if len(prefixed) == 1 else None


class Parser(argparse.ArgumentParser):
    """An argument parser whose refusal of an unknown command suggests the nearest one
    and, under ``--json``, is a JSON object on stderr."""

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if isinstance(action, argparse._SubParsersAction) and choices is not None:
            if value not in choices:
                names = sorted(str(c) for c in choices)
                near = suggestion(str(value), names)
                shown = str(value)[:40]
                hint = f"; did you mean {near!r}?" if near else f" (commands: {', '.join(names)})"
                raise argparse.ArgumentError(action, f"no command {shown!r}{hint}")
            return
        super()._check_value(action, value)

    def error(self, message: str) -> NoReturn:
        if "--json" in sys.argv[1:] or _json_requested:
            import json

            print(json.dumps({"error": message, "usage": self.format_usage().strip()}),
                  file=sys.stderr)  # fmt: skip
            self.exit(2)
        super().error(message)


_json_requested = False


def build_parser(group: str | None) -> Parser:
    """The parser for ``group`` (``cloud`` or ``device``: its real commands), or (None)
    one that only names the groups, for help and for refusing an unknown group."""
    parser = Parser(prog="memsync", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, help_text in GROUPS.items():
        if name == group:
            importlib.import_module(f"{name}.cli").register(sub)
        else:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _group(argv: Sequence[str]) -> str | None:
    for arg in argv:
        if not arg.startswith("-"):
            return arg
        if arg in ("-h", "--help"):
            return None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    global _json_requested
    args_list = list(sys.argv[1:] if argv is None else argv)
    _json_requested = "--json" in args_list
    group = _group(args_list)
    if group in ("simulate", "demo"):
        simulator_main = importlib.import_module("simulator.cli").main
        return int(simulator_main(args_list))
    parser = build_parser(group if group in LOADED_BY_NAME else None)
    args = parser.parse_args(args_list)
    if group not in LOADED_BY_NAME:  # pragma: no cover - parse_args exits before this
        parser.print_help()
        return 2
    try:
        code = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return int(code or 0)


if __name__ == "__main__":
    raise SystemExit(main())
