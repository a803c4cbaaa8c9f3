"""The inspector's FastAPI app: server-rendered pages over one ``DeviceAgent`` (the
checks are ``device.ui.guard``, forms ``device.ui.forms``, record lines
``device.ui.presenting``, words for enum values ``device.ui.labels``, bulk actions
``device.ui.bulk``, the cloud's side of Settings ``device.ui.settings``, the actions
that need the cloud ``device.ui.online_actions``, templates and the flash-and-redirect
``device.ui.rendering``).

Invariants:
- Every request passes three checks, in this order, before any page or agent call:
  the Host header is ``127.0.0.1:<port>`` or ``localhost:<port>`` (DNS rebinding),
  the session (the run's token in ``?token=`` once, which sets the ``memsync_ui``
  cookie, HttpOnly, SameSite=Strict, Path=/, and redirects 303 without it; then the
  cookie), and for a POST the form field ``csrf`` equal to the session's CSRF token
  AND an ``Origin`` (or, without one, ``Referer``) of this same origin. A failed check
  answers 403 and nothing is read or changed.
- Every response carries the CSP, X-Frame-Options, Referrer-Policy and Cache-Control
  headers of ``SECURITY_HEADERS``; pages are Jinja2 templates with autoescape on and
  no JavaScript; state changes are POST, then a 303 to a page showing the flash.
- Concurrency: every endpoint is ``async`` and calls the agent inline, on the event
  loop, so agent calls are serialised by the loop itself (the SQLCipher connection is
  never used by two requests at once); nothing here runs in the threadpool.
- The page quotes only the user's own words: a record is shown in quotes after "you
  said" if and only if the user typed it (``RecordView.users_words``), whatever its
  epistemic state; every other record says who produced its words and who verified it
  ("You confirmed this from <source>", "Seen in independent sources", "You accepted
  this rule", a confidence label and its source), in a style of its own
  (``device.ui.presenting.Kind``). A forgotten record is a skeleton line with no
  content; a corrected record's old body is never rendered (``#versions`` shows dates
  and the receipt's sentence only).
- Every waiting item says why it waits, in words (``RecordView.waits_because``). A
  record with a confirmation warning (words that are not the user's, or an
  instruction-shaped text) is confirmed in two steps: the first POST only leads to
  ``/records/<id>/confirm``, which shows the source, its full reference and the
  warning and arms the session for that record's version; only a second POST from
  there (``step=second``, same CSRF and origin checks) confirms.
- Session ids and CSRF tokens come from the injected randomness; tokens are compared
  in constant time.
- No page shows a raw enum value as text: badges, filters and details use
  ``device.ui.labels`` and keep the raw value in ``data-value``/``title``.
- Undo of an accepted rule and each item of a bulk action go through the agent's
  ordinary write path (``reject_rule``, ``confirm``, ``dont_use``): one local op each.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from device.agent import DeviceAgent
from device.errors import (
    DeviceError,
    InspectorRefused,
    NoCloud,
    NotEnrolled,
    Offline,
    ServerError,
)
from device.importing import ORIGIN_THIS_ACCOUNT, looks_like_package
from device.ui.bulk import run_each, selected, sentence, snippet
from device.ui.forms import Upload, form, read_form
from device.ui.guard import (
    COOKIE,
    INVALID_LINK,
    Guard,
    RandomBytes,
    Session,
    Sessions,
    local_path,
    same_origin,
)
from device.ui.labels import CONTENT_TYPE, LIFE_AREA
from device.ui.online_actions import add_online_actions
from device.ui.presenting import STATES, Shown, grouped, held_because, shown, version_lines
from device.ui.rendering import TEMPLATES, back, page
from device.ui.settings import NOT_YET_SENT, pending_lines, settings_of
from device.views import RecordView
from protocol.errors import ProtocolError
from protocol.ids import is_id
from protocol.model import Layer, LifeArea, LifecycleState

FORGOTTEN_SENTENCE = "Permanently forgotten; it cannot be brought back."
SEARCH_LIMIT = 50
SECOND_STEP = "second"
NOT_YET_CONFIRMED = (
    "Not confirmed yet: read where it comes from and the warning, then confirm it here."
)


def create_app(
    agent: DeviceAgent,
    token: str,
    *,
    csrf_secret: bytes,
    port: int | None = None,
    random_bytes: RandomBytes | None = None,
) -> FastAPI:
    """The inspector over ``agent``. ``token`` opens a session (``?token=``);
    ``port`` is the port the Host header must name (default: the socket's own);
    ``random_bytes`` makes session ids (default: the agent's injected randomness)."""
    if not token or len(csrf_secret) < 16:
        raise ValueError("the inspector needs a token and a CSRF secret of 16+ bytes")
    sessions = Sessions(token, csrf_secret, random_bytes or agent.random_bytes)
    app = FastAPI(title="memsync inspector", docs_url=None, redoc_url=None, openapi_url=None)
    static_dir = Path(__file__).parent / "static"

    def denied(request: Request, message: str = INVALID_LINK) -> HTMLResponse:
        return page(403, "Not allowed", message)

    def session_of(request: Request) -> tuple[str | None, Session | None]:
        sid = request.cookies.get(COOKIE)
        return sid, sessions.get(sid)

    @app.middleware("http")
    async def authenticate(request: Request, call_next: Any) -> Response:
        given = request.query_params.get("token")
        _sid, session = session_of(request)
        if given is not None and request.method == "GET":
            if session is None and not sessions.token_ok(given):
                return denied(request)
            rest = [(k, v) for k, v in request.query_params.multi_items() if k != "token"]
            target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
            redirect = RedirectResponse(target, status_code=303)
            if session is None:
                redirect.set_cookie(
                    COOKIE, sessions.new(), httponly=True, samesite="strict", path="/"
                )
            return redirect
        if session is None:
            return denied(request)
        request.state.session = session
        if request.method == "POST":
            form = await read_form(request)
            csrf = form.get("csrf")
            if not isinstance(csrf, str) or not hmac.compare_digest(
                csrf.encode(), session.csrf.encode()
            ):
                return denied(
                    request,
                    "This form did not carry the inspector's CSRF token; nothing was changed.",
                )
            if not same_origin(request):
                return denied(
                    request,
                    "This form was sent from another site (Origin/Referer); nothing was changed.",
                )
            request.state.form = form
        response: Response = await call_next(request)
        return response

    app.add_middleware(Guard, port=port)  # added last, so it runs first

    @app.exception_handler(InspectorRefused)
    async def _refused(request: Request, exc: InspectorRefused) -> Response:
        return page(exc.status, "Refused", str(exc))

    def render(request: Request, name: str, **context: Any) -> HTMLResponse:
        session: Session = request.state.session
        flash, session.flash = session.flash, None
        body = TEMPLATES.get_template(name).render(
            csrf=session.csrf, flash=flash, path=request.url.path, **context
        )
        return HTMLResponse(body)

    def views() -> list[RecordView]:
        return agent.what_do_you_know()

    def record_or_404(record_id: str) -> RecordView:
        if is_id("rec", record_id):
            for view in views():
                if view.record_id == record_id:
                    return view
        raise InspectorRefused(
            f"/records/{record_id[:80]}", f"record {record_id[:80]} is not held here", status=404
        )

    def show(view: RecordView) -> Shown:
        """A record as a page shows it, dated from its first version."""
        first = None
        if len(view.versions) > 1 and not view.is_skeleton:
            first = agent.record_history(view.record_id)[0].recorded_at
        return shown(view, first_recorded_at=first)

    def act(request: Request, target: str, run: Callable[[], Any]) -> RedirectResponse:
        """Run one agent write; the flash says what its receipt says, or why not."""
        try:
            result = run()
        except (DeviceError, ProtocolError, ValueError) as exc:
            return back(request, target, f"Not done: {exc}")
        message = getattr(result, "message", "") or "Done."
        return back(request, target, message)

    # --- pages ---------------------------------------------------------------------

    @app.get("/static/{name}")
    async def static(name: str) -> Response:
        path = static_dir / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise InspectorRefused(f"/static/{name[:80]}", "no such file", status=404)
        return Response(path.read_bytes(), media_type="text/css; charset=utf-8")

    @app.get("/")
    async def root() -> Response:
        return RedirectResponse("/memory", status_code=303)

    @app.get("/memory")
    async def memory(
        request: Request, area: str = "", state: str = "", type: str = "", q: str = ""
    ) -> Response:
        every = views()
        by_id = {v.record_id: v for v in every}
        query = q.strip()
        if query:
            hits = agent.recall(query, SEARCH_LIMIT)
            chosen = [by_id[h.record_id] for h in hits if h.record_id in by_id]
        else:
            chosen = every
        live = [v for v in chosen if not v.is_skeleton]
        if area:
            live = [v for v in live if area in v.life_areas]
        if state:
            live = [v for v in live if v.lifecycle == state]
        if type:
            live = [v for v in live if v.content_type == type]
        skeletons = [] if query else [show(v) for v in every if v.is_skeleton]
        return render(
            request,
            "memory.html",
            title="What do you know about me?",
            groups=grouped(show(v) for v in live),
            skeletons=skeletons,
            areas=list(LIFE_AREA.items()),
            states=STATES,
            types=list(CONTENT_TYPE.items()),
            chosen={"area": area, "state": state, "type": type, "q": q},
            searched=bool(query),
        )

    @app.get("/records/{record_id}")
    async def record(request: Request, record_id: str) -> Response:
        view = record_or_404(record_id)
        if view.is_skeleton:
            return RedirectResponse(f"/records/{record_id}/forgotten", status_code=303)
        versions = version_lines(agent.record_history(record_id))
        projects = sorted({v.project for v in views() if v.project})
        return render(
            request,
            "record.html",
            title="How do you know this?",
            record=show(view),
            explanation=agent.explain(record_id),
            sources=agent.sources(record_id),
            versions=versions,
            areas=list(LIFE_AREA.items()),
            projects=projects,
            restriction=view.usage_restriction,
            held_because=held_because(agent.held_because(record_id)),
        )

    @app.get("/records/{record_id}/forget")
    async def forgetpage(request: Request, record_id: str) -> Response:
        view = record_or_404(record_id)
        if view.is_skeleton:
            return RedirectResponse(f"/records/{record_id}/forgotten", status_code=303)
        return render(request, "forget.html", title="Forget permanently?", record=show(view))

    @app.get("/records/{record_id}/forgotten")
    async def forgotten(request: Request, record_id: str) -> Response:
        view = record_or_404(record_id)
        if not view.is_skeleton:
            return RedirectResponse(f"/records/{record_id}", status_code=303)
        return render(
            request,
            "forgotten.html",
            title="Permanently forgotten",
            record_id=record_id,
            sentence=FORGOTTEN_SENTENCE,
            pending=pending_lines(agent, view),
        )

    @app.get("/learned")
    async def learned(request: Request) -> Response:
        return render(
            request,
            "learned.html",
            title="Recently learned",
            records=[show(v) for v in agent.recently_learned()],
        )

    @app.get("/candidates")
    async def candidates(request: Request, select: str = "") -> Response:
        waiting = [(show(v), agent.explain(v.record_id)) for v in agent.waiting_for_confirmation()]
        return render(
            request,
            "candidates.html",
            title="Waiting for confirmation",
            waiting=waiting,
            select_all=select == "all",
        )

    @app.get("/rules")
    async def rules(request: Request) -> Response:
        every = agent.rules()
        proposed = [
            (show(v), agent.explain(v.record_id))
            for v in every
            if v.lifecycle == LifecycleState.CANDIDATE.value
        ]
        accepted = [show(v) for v in every if v.lifecycle == LifecycleState.ACTIVE.value]
        rejected = [show(v) for v in every if v.lifecycle == LifecycleState.NOT_IN_USE.value]
        return render(
            request,
            "rules.html",
            title="Behaviour rules",
            proposed=proposed,
            accepted=accepted,
            rejected=rejected,
        )

    @app.get("/settings")
    async def settings(request: Request) -> Response:
        return render(request, "settings.html", title="Devices and settings", **settings_of(agent))

    # --- actions -------------------------------------------------------------------

    add_online_actions(app, agent, record_or_404)

    @app.post("/records/{record_id}/correct")
    async def correct(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        text = str(form(request).get("text", "")).strip()
        target = f"/records/{record_id}"
        if not text:
            return back(request, target, "Not done: type the corrected text first.")

        def run() -> Any:
            conversation = f"ui-{agent.now().date().isoformat()}"
            agent.say(text, conversation)
            return agent.correct(record_id, text, conversation)

        return act(request, target, run)

    @app.post("/records/{record_id}/dont-use")
    async def dont_use(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        target = local_path(form(request).get("next"), f"/records/{record_id}")
        return act(request, target, lambda: agent.dont_use(record_id))

    @app.post("/records/{record_id}/use-again")
    async def use_again(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        target = local_path(form(request).get("next"), f"/records/{record_id}")
        return act(request, target, lambda: agent.use_again(record_id))

    @app.post("/records/{record_id}/restrict")
    async def restrict(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        chosen = str(form(request).get("target", ""))
        kind, _, name = chosen.partition(":")

        def run() -> Any:
            if kind == "area":
                return agent.restrict_usage(record_id, area=LifeArea(name))
            if kind == "project" and name:
                return agent.restrict_usage(record_id, project=name)
            return agent.restrict_usage(record_id)

        return act(request, f"/records/{record_id}", run)

    @app.post("/records/{record_id}/forget")
    async def forget(request: Request, record_id: str) -> Response:
        view = record_or_404(record_id)
        if view.is_skeleton:
            return RedirectResponse(f"/records/{record_id}/forgotten", status_code=303)
        if form(request).get("understand") != "on":
            return back(
                request,
                f"/records/{record_id}/forget",
                "Not done: tick \u201cI understand this cannot be undone\u201d to forget it.",
            )
        try:
            result = agent.forget_permanently(record_id)
        except (DeviceError, ProtocolError) as exc:
            return back(request, f"/records/{record_id}", f"Not done: {exc}")
        message = result.message
        try:
            agent.sync()
        except (Offline, ServerError, NotEnrolled, NoCloud):
            message += " " + NOT_YET_SENT + "."
        except DeviceError as exc:
            message += f" Not sent yet: {exc}"
        return back(request, f"/records/{record_id}/forgotten", message)

    @app.post("/records/{record_id}/confirm")
    async def confirm(request: Request, record_id: str) -> Response:
        """One step for a record without a confirmation warning; two for one with it:
        the first POST only leads to the warning page, and the second (``step=second``,
        from that page, for the version it showed) confirms."""
        view = record_or_404(record_id)
        target = local_path(form(request).get("next"), "/candidates")
        if view.confirm_warning is not None:
            session: Session = request.state.session
            shown_key = _warned_key(view)
            if form(request).get("step") != SECOND_STEP or shown_key not in session.warned:
                if form(request).get("step") == SECOND_STEP:
                    session.flash = NOT_YET_CONFIRMED
                return RedirectResponse(f"/records/{record_id}/confirm", status_code=303)
            session.warned.discard(shown_key)
        return act(request, target, lambda: agent.confirm(record_id))

    @app.get("/records/{record_id}/confirm")
    async def confirm_page(request: Request, record_id: str) -> Response:
        """The second step: where the words come from (the source and its full
        reference), the plain warning, and the explicit button that confirms."""
        view = record_or_404(record_id)
        if view.is_skeleton:
            return RedirectResponse(f"/records/{record_id}/forgotten", status_code=303)
        if view.confirm_warning is not None:
            request.state.session.warned.add(_warned_key(view))
        button = f"Yes, confirm this from {view.source}" if view.source else "Yes, confirm it"
        return render(
            request,
            "confirm.html",
            title="Before you confirm",
            record=show(view),
            candidate=view.lifecycle == LifecycleState.CANDIDATE.value,
            button=button if view.confirm_warning is not None else "Confirm",
            step=SECOND_STEP if view.confirm_warning is not None else "",
        )

    @app.post("/rules/{record_id}/accept")
    async def accept_rule(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        return act(request, "/rules", lambda: agent.accept_rule(record_id))

    @app.post("/rules/{record_id}/reject")
    async def reject_rule(request: Request, record_id: str) -> Response:
        record_or_404(record_id)
        return act(request, "/rules", lambda: agent.reject_rule(record_id))

    @app.post("/rules/{record_id}/undo")
    async def undo_rule(request: Request, record_id: str) -> Response:
        """Undo an accepted rule: it no longer takes effect (``reject_rule``: kept, not
        in use; "Use again" brings it back)."""
        view = record_or_404(record_id)
        if view.layer != Layer.BEHAVIOUR_RULE.value or view.lifecycle != "active":
            return back(
                request, "/rules", f"Not done: {record_id} is not an accepted behaviour rule."
            )
        try:
            result = agent.reject_rule(record_id)
        except (DeviceError, ProtocolError, ValueError) as exc:
            return back(request, "/rules", f"Not done: {exc}")
        return back(
            request,
            "/rules",
            f"Undone: the rule {snippet(view.text)} ({record_id}) no longer takes effect. "
            + (result.message or ""),
        )

    @app.post("/candidates/bulk")
    async def bulk(request: Request) -> Response:
        """Confirm or reject the ticked waiting items, each on its own (best effort)."""
        fields = form(request)
        action = fields.get("action")
        if action not in ("confirm", "reject"):
            return back(request, "/candidates", f"Not done: no such action {str(action)[:40]!r}.")
        ids = selected(fields)
        waiting = {v.record_id: v for v in agent.waiting_for_confirmation()}
        if action == "confirm":
            outcome = run_each(ids, waiting, agent.confirm, two_step=True)
            text = sentence(outcome, "Confirmed", "Not confirmed", len(ids))
        else:
            outcome = run_each(ids, waiting, agent.dont_use, two_step=False)
            text = sentence(outcome, "Rejected", "Not rejected", len(ids))
        return back(request, "/candidates", text)

    @app.post("/temporary")
    async def temporary(request: Request) -> Response:
        on = not agent.temporary_mode
        agent.set_temporary_mode(on)
        text = (
            "Temporary mode is on: nothing from now on is written."
            if on
            else "Temporary mode is off: what you do is kept again."
        )
        return back(request, "/settings", text)

    @app.post("/import")
    async def import_(request: Request) -> Response:
        upload = form(request).get("file")
        from_elsewhere = form(request).get("from_elsewhere") == "yes"  # issue 22: explicit
        origin = ""
        if not isinstance(upload, Upload) or not upload.data:
            return back(request, "/settings", "Not imported: choose a package or text file.")
        name = Path(upload.filename).name or "upload"
        folder = agent.directory / "imports"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{agent.random_bytes(4).hex()}-{name}"
            path.write_bytes(upload.data)
            try:
                if looks_like_package(path):
                    report = agent.import_package(path, allow_unsigned=from_elsewhere)
                    count = len(report.record_ids)
                    if report.origin != ORIGIN_THIS_ACCOUNT:
                        origin = f" The package is {report.origin}: imported from elsewhere."
                else:
                    count = len(agent.import_text(upload.data.decode("utf-8"), source=name))
            finally:
                path.unlink(missing_ok=True)
        except (DeviceError, ProtocolError, OSError, UnicodeDecodeError) as exc:
            return back(request, "/settings", f"Not imported: {exc}")
        return back(
            request,
            "/settings",
            f"Imported {name}: {count} candidate(s) arrived \u201cimported, not verified\u201d; "
            "confirm them under Waiting for confirmation." + origin,
        )

    return app


def _warned_key(view: RecordView) -> str:
    """Which record, at which version, a confirmation warning was shown for."""
    return f"{view.record_id}@{view.version}"
