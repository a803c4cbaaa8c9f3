"""The inspector's actions that need the cloud: sync, the subset (pin, unpin, its rules
and budget) and export, added to the app by ``device.ui.app.create_app``.

Invariants:
- Each runs behind the app's checks (Host, session, CSRF and origin: ``device.ui.app``)
  and calls the agent inline, on the event loop, like every endpoint there.
- Each is a POST answered by a 303 to a page whose flash says what happened: the cloud
  unreachable (``Offline``, ``ServerError``) is always ``CLOUD_UNREACHABLE`` (after
  "Not exported: " for an export), a refusal (``DeviceError``, ``ProtocolError``) in
  its own words.
- A record named in the path must be held here (``record_or_404``) before the cloud is
  asked anything about it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response

from device.agent import DeviceAgent
from device.errors import DeviceError, Offline, ServerError
from device.ui.forms import form
from device.ui.guard import local_path
from device.ui.rendering import back
from device.ui.settings import CLOUD_UNREACHABLE, synced
from device.views import RecordView
from protocol.errors import ProtocolError
from protocol.subset import SubsetBudget, SubsetPolicy, SubsetRules


def add_online_actions(
    app: FastAPI, agent: DeviceAgent, record_or_404: Callable[[str], RecordView]
) -> None:
    """Add ``/sync``, ``/records/<id>/pin``, ``/records/<id>/unpin``, ``/subset`` and
    ``/export`` to ``app``, over ``agent``."""

    @app.post("/sync")
    async def sync(request: Request) -> Response:
        target = local_path(form(request).get("next"), "/memory")
        try:
            report = agent.sync()
        except (Offline, ServerError):
            return back(request, target, CLOUD_UNREACHABLE)
        except (DeviceError, ProtocolError) as exc:
            return back(request, target, f"Not synced: {exc}")
        text = synced(report)
        return back(request, target, text)

    def online(request: Request, target: str, run: Callable[[], Any], done: str) -> Response:
        """A change the cloud makes (the subset): the flash says it, or why not."""
        try:
            run()
        except (Offline, ServerError):
            return back(request, target, CLOUD_UNREACHABLE)
        except (DeviceError, ProtocolError, ValueError) as exc:
            return back(request, target, f"Not done: {exc}")
        return back(request, target, done)

    @app.post("/records/{record_id}/pin")
    async def pin(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        return online(
            request,
            f"/records/{record_id}",
            lambda: agent.pin(record_id),
            "Kept on this device whatever the rules say (within its budget).",
        )

    @app.post("/records/{record_id}/unpin")
    async def unpin(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        return online(
            request,
            f"/records/{record_id}",
            lambda: agent.unpin(record_id),
            "The rules decide again whether this device keeps it; if it leaves at the next "
            "sync, it stays in the cloud.",
        )

    @app.post("/subset")
    async def subset(request: Request) -> Response:
        fields = form(request)

        def run() -> None:
            view = agent.subset()
            budget = SubsetBudget(
                max_records=int(fields.get("max_records", "")),
                max_bytes=int(fields.get("max_megabytes", "")) * 1024 * 1024,
            )
            rules = view.policy.rules.model_copy(
                update={"recent_days": int(fields.get("recent_days", ""))}
            )
            agent.set_subset_policy(
                SubsetPolicy(rules=SubsetRules.model_validate(rules.model_dump()), budget=budget)
            )

        return online(
            request,
            "/settings",
            run,
            "Changed: what enters and leaves this device arrives with the next sync "
            "(what leaves stays in the cloud).",
        )

    @app.post("/export")
    async def export(request: Request) -> Response:
        fields = form(request)
        passphrase = str(fields.get("account_passphrase", ""))
        include = fields.get("include_sensitive") == "on"
        out = agent.directory / "exports"
        try:
            out.mkdir(parents=True, exist_ok=True)
            result = agent.export(out, passphrase, include_sensitive=include)
        except (Offline, ServerError):
            return back(request, "/settings", f"Not exported: {CLOUD_UNREACHABLE}")
        except (DeviceError, ProtocolError, OSError) as exc:
            return back(request, "/settings", f"Not exported: {exc}")
        return back(
            request,
            "/settings",
            f"Exported {result.export_id}: {result.package_path} and {result.view_path}"
            + ("" if result.includes_sensitive else " (sensitive classes left out)"),
        )
