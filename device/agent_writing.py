"""``DeviceAgent``'s writes, as delegations: what the user types and what comes from
elsewhere (``device.writing``, ``device.importing``, ``device.candidates``), and the
user's words and controls and the assistant's (``device.ops``).

Invariants: every method here is a delegation to the module of its concern; each write
is refused in temporary mode before it touches the store and tells the live loop: the
logged words through ``AgentCore._write``, the user's controls through ``device.ops``
(whose ops go through ``apply_operation``), an imported package through
``importing.import_package`` in one transaction. Only ``keep_on_device`` writes the
store itself, in one atomic call.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Unpack

from device import candidates, importing, views
from device.agent_core import AgentCore
from device.errors import InvalidOperation
from device.ops import RememberFields
from protocol.model import ArtifactKind, LifeArea, RecordContent, Sensitivity


class WritingFacade(AgentCore):
    """The writes of ``DeviceAgent`` (see ``device.agent``)."""

    # --- writing: what the user types, and what comes from elsewhere ------------------

    def say(
        self, text: str, conversation_id: str, *, sensitivity: Sensitivity | None = None
    ) -> str:
        """Log what the user typed, marking the detector's candidates; the episode id."""
        return self.say_detected(text, conversation_id, sensitivity=sensitivity).episode_id

    def say_detected(
        self, text: str, conversation_id: str, *, sensitivity: Sensitivity | None = None
    ) -> views.SaidResult:
        """``say``, returning what the detector saw in each sentence."""
        return self._write(
            "episode",
            lambda w: w.say(text, conversation_id, sensitivity=sensitivity),
            doing="logging what you typed",
        )

    def end_session(self, conversation_id: str) -> list[views.LocalResult]:
        """The conversation ended: its candidates are ready for consolidation."""
        return self._write(
            "end of conversation",
            lambda w: w.end_session(conversation_id),
            doing="ending the conversation",
        )

    def ingest(
        self, text: str, *, medium: str, source: str, conversation_id: str = "external"
    ) -> str:
        """Log external content (it only ever becomes candidates); the episode id."""
        return self._write(
            "external content",
            lambda w: w.ingest(text, medium=medium, source=source, conversation_id=conversation_id),
            doing="logging external content",
        )

    def observe(self, subject: str, value: str, *, source: str) -> str:
        """Log one behaviour event from an app ("morning coffee order" = "americano")."""
        return self._write(
            "behaviour event",
            lambda w: w.observe(subject, value, source=source),
            doing="logging a behaviour event",
        )

    def import_text(self, text: str, *, source: str) -> list[views.LocalResult]:
        """Import text: each statement a candidate "imported, not verified"."""
        return self._write(
            "import", lambda w: w.import_text(text, source=source), doing="importing"
        )

    def import_package(
        self, path: Path | str, *, include_sensitive: bool = True, allow_unsigned: bool = False
    ) -> views.ImportReport:
        """Import an export package as candidates, in one transaction (``importing``)."""
        self._writable("importing a package")
        report = importing.import_package(
            self._db,
            Path(path),
            now=self._now_dt(),
            new_id=self._id,
            apply=self._apply_kept,
            include_sensitive=include_sensitive,
            allow_unsigned=allow_unsigned,
        )
        self._queued()
        return report

    def keep_on_device(self, sensitivity: Sensitivity) -> None:
        """Keep a sensitive class only on this device (never sent, not even encrypted)."""
        self._writable("keeping a class on this device")
        if sensitivity is Sensitivity.NORMAL:
            raise InvalidOperation(
                "only a sensitive class can be kept on this device, not 'normal'; "
                "nothing was changed"
            )
        with self._db.atomic():
            candidates.keep_on_device(self._db, sensitivity, self._now())

    def device_only_classes(self) -> set[Sensitivity]:
        return candidates.device_only_classes(self._db)

    # --- writing: the user's words and controls, and the assistant's (``device.ops``) ------

    def remember(
        self, text: str, conversation_id: str, **fields: Unpack[RememberFields]
    ) -> views.LocalResult:
        """Keep one whole sentence the user typed as a said record (``RememberFields``)."""
        return self._ops.remember(text, conversation_id, **fields)

    def correct(self, record_id: str, text: str, conversation_id: str) -> views.LocalResult:
        """ "That's wrong": a new version in the user's own words; the old one stays."""
        return self._ops.correct(record_id, text, conversation_id)

    def dont_use(self, record_id: str) -> views.LocalResult:
        """ "Know it, but don't use it": excluded from retrieval; reversible."""
        return self._ops.dont_use(record_id)

    def use_again(self, record_id: str) -> views.LocalResult:
        return self._ops.use_again(record_id)

    def restrict_usage(
        self, record_id: str, *, area: LifeArea | None = None, project: str | None = None
    ) -> views.LocalResult:
        """ "Only use for X" (one area or one project); both None lifts the restriction."""
        return self._ops.restrict_usage(record_id, area, project)

    def confirm(self, record_id: str) -> views.LocalResult:
        """The user confirms a candidate: it becomes active and verified."""
        return self._ops.confirm(record_id)

    def reaffirm(
        self, record_id: str, still_true: bool, expected_end: datetime | None = None
    ) -> views.LocalResult:
        """The answer to "Still doing this?" for a "for now" record."""
        return self._ops.reaffirm(record_id, still_true, expected_end)

    def forget_permanently(self, record_id: str) -> views.LocalResult:
        """Shred the record and all derived from it at once, and queue it. No undo."""
        return self._ops.forget_permanently(record_id)

    def forget_area(self, area: LifeArea | None, account_passphrase: str) -> views.LocalResult:
        """Forget a life area (None: all memory); needs the account passphrase."""
        return self._ops.forget_area(area, account_passphrase)

    def infer(self, content: RecordContent, *, record_id: str | None = None) -> views.LocalResult:
        """A record the assistant (or consolidator) derived: never "said"."""
        return self._ops.infer(content, record_id)

    def add_artifact(
        self, kind: ArtifactKind, derived_from: Sequence[str], payload: str
    ) -> views.LocalResult:
        """A derived item naming its parents; forgetting any parent shreds it."""
        return self._ops.add_artifact(kind, derived_from, payload)

    def set_project(self, name: str, open: bool) -> views.LocalResult:
        """Open (create or reopen) or close a project; closed ones are left out of recall."""
        return self._ops.set_project(name, open)
