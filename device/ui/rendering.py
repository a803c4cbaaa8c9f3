"""The inspector's templates (Jinja2, autoescape on, with ``when`` and the labels of
``device.ui.labels`` as globals), its plain refusal page, and ``back``: the flash a
POST leaves in the session and the 303 to the page that shows it."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from device.ui.labels import label, when
from protocol.model import SourceKind

TEMPLATES = Environment(
    loader=PackageLoader("device.ui", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    trim_blocks=True,
    lstrip_blocks=True,
)
TEMPLATES.globals.update(
    when=when, source_kind_words=lambda value: label(SourceKind, value) if value else ""
)


def page(status: int, title: str, message: str) -> HTMLResponse:
    body = TEMPLATES.get_template("denied.html").render(title=title, message=message)
    return HTMLResponse(body, status_code=status)


def back(request: Request, target: str, message: str) -> RedirectResponse:
    """Leave ``message`` as the session's flash and send the browser to ``target`` (303)."""
    request.state.session.flash = message
    return RedirectResponse(target, status_code=303)
