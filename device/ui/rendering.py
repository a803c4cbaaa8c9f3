"""The inspector's templates (Jinja2, autoescape on, with ``when`` and the labels of
``device.ui.labels`` as globals) and its plain refusal page."""

from __future__ import annotations

from fastapi.responses import HTMLResponse
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
