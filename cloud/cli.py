"""``memsync cloud ...``: serve the cloud, run consolidator workers, add and list users
and devices (``users``, ``devices``: ``cloud.cli_ops``), show pending forgets, revoke
devices, compact a user's change feed, end an account (``delete-account``,
``account-status``) and close the service (``close``, ``service-status``,
``enforce-closing``: ``cloud.end_cli``).

``register(subparsers)`` adds the ``cloud`` command group to an argparse parser; each
handler is ``handler(args) -> int`` set with ``set_defaults(func=...)``.
Every option is a setting of ``cloud.settings`` (flag > ``MEMSYNC_<NAME>`` > the
``--config`` file > default): ``--store`` (``MEMSYNC_STORE``, default
``./memsync-cloud/records.db``; a plain path means a SQLite file), ``--keys``
(``MEMSYNC_KEYS``, default ``./memsync-cloud/keys.db``). A bad setting or a record store
that cannot be opened is one line on stderr and exit code 2, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from typing import Any

from cloud.cli_common import (
    FLAG_SETTINGS,
    common,
    config_from_args,
    fail,
    logging_flags,
    service_of,
    settings_from_args,
)
from cloud.cli_ops import register_ops
from cloud.end_cli import register_end
from cloud.errors import CloudError
from cloud.server_limits import ServerLimits
from cloud.settings import DEFAULT_KEYS, DEFAULT_STORE, store_url

__all__ = [
    "DEFAULT_KEYS",
    "DEFAULT_STORE",
    "FLAG_SETTINGS",
    "config_from_args",
    "register",
    "store_url",
]


def register(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``cloud`` command group to ``subparsers`` (from ``add_subparsers()``)."""
    cloud: argparse.ArgumentParser = subparsers.add_parser(
        "cloud", help="run and administer the memsync cloud"
    )
    commands = cloud.add_subparsers(dest="cloud_command", metavar="COMMAND", required=True)

    serve = commands.add_parser("serve", help="serve the sync API over HTTP (uvicorn)")
    common(serve)
    logging_flags(serve)
    serve.add_argument("--host", default=None, help="default: $MEMSYNC_HOST or 127.0.0.1")
    serve.add_argument("--port", type=int, default=None, help="default: $MEMSYNC_PORT or 8765")
    serve.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve Prometheus metrics at /metrics (default: $MEMSYNC_METRICS or on)",
    )
    limits = ServerLimits()
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=None,
        metavar="S",
        help=f"seconds a client has to send a request's head (default {limits.header_timeout:g})",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=None,
        metavar="S",
        help="seconds a request body may take to arrive "
        f"(default {limits.body_timeout:g}; 408 after)",
    )
    serve.add_argument(
        "--keep-alive",
        type=float,
        default=None,
        metavar="S",
        help=f"seconds an idle connection stays open (default {limits.keep_alive:g})",
    )
    serve.add_argument(
        "--max-connections",
        type=int,
        default=None,
        metavar="N",
        help=f"connections and requests at once; 503 beyond (default {limits.max_connections})",
    )
    serve.add_argument("--backlog", type=int, default=None, metavar="N",
                       help=f"listen backlog (default {limits.backlog})")  # fmt: skip
    serve.set_defaults(func=cmd_serve)

    worker = commands.add_parser(
        "worker",
        help="run a consolidator worker (session-end job every few seconds, daily job)",
    )
    common(worker)
    logging_flags(worker)
    worker.add_argument(
        "--worker-id",
        default=None,
        help="this worker's lease owner name (default: <host>:<pid>)",
    )
    worker.add_argument(
        "--once", action="store_true", help="run the session-end and daily jobs once, then exit"
    )
    worker.add_argument(
        "--interval",
        type=float,
        default=None,
        help="seconds between session-end runs (default: $MEMSYNC_WORKER_INTERVAL or 5)",
    )
    worker.add_argument(
        "--daily-at",
        default=None,
        help="HH:MM (UTC) of the daily job (default: $MEMSYNC_WORKER_DAILY_AT or 03:00)",
    )
    worker.add_argument(
        "--lease-seconds",
        type=float,
        default=None,
        help="how long a claimed item is this worker's before another may take it over "
        "(default: $MEMSYNC_WORKER_LEASE_SECONDS or 300)",
    )
    worker.add_argument(
        "--batch",
        type=int,
        default=None,
        help="items claimed at a time (default: $MEMSYNC_WORKER_BATCH or 20)",
    )
    worker.add_argument("--json", action="store_true", help="with --once: print JSON")
    worker.set_defaults(func=cmd_worker)

    add_user = commands.add_parser(
        "add-user", help="create a user's space and print a one-time enrollment code"
    )
    common(add_user)
    add_user.add_argument("name")
    add_user.add_argument("--json", action="store_true", help="print JSON")
    add_user.set_defaults(func=cmd_add_user)

    add_device = commands.add_parser(
        "add-device",
        help="print a new one-time enrollment code for another device of a user",
    )
    common(add_device)
    add_device.add_argument("--user", required=True, help="user name or space id")
    add_device.add_argument("--json", action="store_true", help="print JSON")
    add_device.set_defaults(func=cmd_add_device)

    pending = commands.add_parser(
        "pending", help="list forgotten records and the devices that have not confirmed"
    )
    common(pending)
    pending.add_argument("--user", required=True, help="user name or space id")
    pending.add_argument("--json", action="store_true", help="print JSON")
    pending.set_defaults(func=cmd_pending)

    revoke = commands.add_parser(
        "revoke-device",
        help="revoke a device: its credential is refused and it wipes its copy of the memory",
    )
    common(revoke)
    revoke.add_argument("--user", required=True, help="user name or space id")
    revoke.add_argument("device_id")
    revoke.add_argument("--json", action="store_true", help="print JSON")
    revoke.set_defaults(func=cmd_revoke_device)

    compact = commands.add_parser(
        "compact",
        help="compact a user's change feed: drop rows that carry nothing any more "
        "(devices behind the new floor rebuild with a resync)",
    )
    common(compact)
    compact.add_argument("--user", required=True, help="user name or space id")
    compact.add_argument("--json", action="store_true", help="print JSON")
    compact.set_defaults(func=cmd_compact)
    register_end(commands)
    register_ops(commands, common)
    return cloud


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from cloud.app import create_app
    from cloud.logs import configure_logging
    from cloud.server import server_config

    try:
        settings = settings_from_args(args)
        configure_logging(settings.log_format, settings.log_level)
        token = settings.metrics_token
        app = create_app(
            replace(
                settings.cloud_config(),
                metrics=settings.metrics,
                metrics_token=None if token is None else token.get_secret_value(),
            )
        )
    except CloudError as exc:
        return fail(exc)
    config = server_config(
        app,
        settings.limits(),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,  # cloud.logs formats every logger, uvicorn's too
        access_log=False,  # cloud.telemetry logs each request once, by route template
    )
    uvicorn.Server(config).run()
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    import logging
    import socket

    from cloud.consolidator.stopping import StopSignals

    # first: a stop while the worker loads ends it cleanly (exit 0), never with -15
    stop = None if args.once else StopSignals()
    from cloud.consolidator.scheduler import crash_hook, run_forever, run_once
    from cloud.consolidator.worker import Consolidator
    from cloud.logs import configure_logging

    try:
        settings = settings_from_args(args)
        fault = crash_hook()
    except (ValueError, CloudError) as exc:  # the crash hook's value, or a setting
        return fail(exc)
    configure_logging(settings.log_format, settings.log_level)
    worker_id = settings.worker_id or f"{socket.gethostname()}:{os.getpid()}"
    log = logging.getLogger("memsync.consolidator")
    log.info("worker %s: starting", worker_id)
    try:
        with service_of(args, settings) as service:
            consolidator = Consolidator(
                service,
                worker_id=worker_id,
                lease_seconds=settings.worker_lease_seconds,
                batch=settings.worker_batch,
                fault=fault,
            )
            if stop is not None:
                run_forever(
                    consolidator,
                    stop,
                    session_end_seconds=settings.worker_interval,
                    daily_at=settings.daily_at(),
                )
                return 0
            report = run_once(consolidator)
    except CloudError as exc:
        return fail(exc)
    if args.json:
        jobs = {"session_end": report.session_end, "daily": report.daily}
        print(
            json.dumps(
                {
                    "worker_id": worker_id,
                    **{
                        name: {
                            "claimed": r.claimed,
                            **{o.value: n for o, n in r.outcomes.items()},
                            "records_written": sorted(set(r.written)),
                        }
                        for name, r in jobs.items()
                    },
                    "time_passed": report.daily.time.passed if report.daily.time else [],
                    "reindexed": report.reindexed,
                }
            )
        )
    else:
        print(f"session-end: {report.session_end.summary()}")
        print(f"daily:       {report.daily.summary()}")
        print(f"reindex:     {report.reindexed} record(s) indexed")
    return 0


def cmd_add_user(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            space_id, code = service.add_user(args.name)
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps({"user": args.name, "space_id": space_id, "enrollment_code": code}))
    else:
        print(f"user:            {args.name}")
        print(f"space id:        {space_id}")
        print(f"enrollment code: {code}  (single use, valid 24 hours)")
    return 0


def cmd_add_device(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            space_id = service.find_space(args.user)
            code = service.new_enrollment_code(space_id)
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps({"user": args.user, "space_id": space_id, "enrollment_code": code}))
    else:
        print(f"enrollment code: {code}  (single use, valid 24 hours)")
    return 0


def cmd_revoke_device(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            space_id = service.find_space(args.user)
            service.revoke_device(space_id, args.device_id)
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(json.dumps({"space_id": space_id, "revoked": args.device_id}))
    else:
        print(
            f"device {args.device_id} is revoked: its credential is refused from now on, and "
            "it wipes its copy of the memory when it next reaches the cloud"
        )
    return 0


def cmd_pending(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            space_id = service.find_space(args.user)
            response = service.pending(space_id)
            revoked = {d.device_id for d in service.devices(space_id).devices if d.revoked_at}
    except CloudError as exc:
        return fail(exc)
    waiting = [f for f in response.forgets if f.pending]
    if args.json:
        print(
            json.dumps(
                {
                    "space_id": space_id,
                    "forgets": [f.model_dump(mode="json") for f in response.forgets],
                    # pending devices that are revoked: they may still hold copies
                    "revoked_device_ids": sorted(
                        {d.device_id for f in waiting for d in f.pending} & revoked
                    ),
                }
            )
        )
        return 0
    if not waiting:
        print("nothing pending")
        return 0
    for forget in waiting:
        devices = ", ".join(
            f"{d.device_name} ({d.device_id}"
            + (", revoked: may still hold copies" if d.device_id in revoked else "")
            + ")"
            for d in forget.pending
        )
        print(
            f"{forget.record_id}  forgotten {forget.forgotten_at.isoformat()}  pending: {devices}"
        )
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    try:
        with service_of(args) as service:
            space_id = service.find_space(args.user)
            report = service.compact(space_id)
    except CloudError as exc:
        return fail(exc)
    if args.json:
        print(
            json.dumps(
                {
                    "space_id": space_id,
                    "deleted": dict(report.deleted),
                    "kept_key_destructions": report.kept_destructions,
                    "remaining": report.remaining,
                    "previous_floor": report.previous_floor,
                    "floor": report.floor,
                }
            )
        )
        return 0
    shown = ", ".join(f"{n} {kind}" for kind, n in report.deleted) or "nothing"
    print(f"deleted:   {shown}")
    print(
        f"kept:      {report.remaining} row(s), {report.kept_destructions} of them key "
        "destructions a device has not acknowledged"
    )
    print(
        f"floor:     {report.previous_floor} -> {report.floor} (a device whose cursor is "
        "below it rebuilds with a resync)"
    )
    return 0
