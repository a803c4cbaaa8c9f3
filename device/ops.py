"""The agent's own operations, built: the user's controls and the assistant's writes,
each given its ids, its time, its initiator and (for words the user typed) its source
episodes, then handed to one ``apply`` (the agent's ``apply_operation``).

Invariants:
- Who started an op is set here, never by the caller: the user's controls are
  ``user``; ``infer`` and ``add_artifact`` are the assistant's.
- ``remember`` and ``correct`` are one path (``_in_own_words``): the sentence's source
  episodes are the conversation's episodes holding it, read from this device's store
  (else every episode of the conversation, so ``decide`` names the reason: a fragment,
  a paraphrase, several sentences); ``decide`` checks the words, not this module.
- An op that does not validate raises ``InvalidOperation`` naming it before anything
  is applied (``device.invalid``); in temporary mode ``writable`` raises first.
- Ids and times come from the injected parts, in the same order on every call (record
  id, then op id), so a seeded run makes the same ids.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypedDict, Unpack

from pydantic import ValidationError

from device import account, provisional, store
from device.detect_memo import DetectionMemo
from device.detector import default_detector
from device.errors import Refused
from device.facts import episode_facts_of
from device.invalid import build, invalid, known_keywords
from device.parts import Parts
from device.views import LocalResult
from protocol.consolidation.extract import content_type_of
from protocol.consolidation.timeexpr import read_time
from protocol.detection.labels import Detection
from protocol.model import (
    ArtifactKind,
    ContentType,
    CustomType,
    Initiator,
    Layer,
    LifeArea,
    RecordContent,
    Sensitivity,
    TimeKind,
    UsageRestriction,
)
from protocol.operations import (
    AddArtifact,
    AnyOperation,
    Confirm,
    Correct,
    DontUse,
    ForgetArea,
    ForgetPermanently,
    Infer,
    Reaffirm,
    RefusalCode,
    Remember,
    RestrictUsage,
    ReviseRule,
    SetProject,
    UseAgain,
)
from protocol.rules import context_episodes
from protocol.sentences import check_said

MAX_SOURCES = 64
Detect = Callable[[Sequence[str]], tuple[list[Detection], str]]


_MEMO = DetectionMemo()


def detect(sentences: Sequence[str]) -> tuple[list[Detection], str]:
    """The device's detector over ``sentences``, and its model id; a list it just read
    (``say`` then ``remember`` of the same sentence) is answered from ``device.detect_memo``."""
    model = default_detector()
    return _MEMO.detect(model, sentences, model.detect, model.model_id)


def remembered_type(text: str, detect: Detect, now: datetime) -> ContentType:
    """The content type of an explicit remember: the detector's, except that *opinion*
    (which a factual question leaves out) needs the sentence's own words to agree
    ("I think …"); otherwise the rules' reading. A fact typed as an opinion would be
    dropped from the very answers it belongs in."""
    detected = detect([text])[0][0].content_type
    if detected is not ContentType.OPINION:
        return detected
    read, _cue = content_type_of(text, read_time(text, said_at=now, hint=None))
    return detected if read is ContentType.OPINION else read


class RememberFields(TypedDict, total=False):
    """What ``remember`` may say of the record besides its words (each optional)."""

    content_type: ContentType | None  # None: read by the detector (``remembered_type``)
    custom_type: CustomType | None  # names its core type
    layer: Layer  # default: consolidated fact
    time_kind: TimeKind  # default: permanent
    valid_from: datetime | None
    valid_until: datetime | None
    expected_end: datetime | None
    life_areas: Sequence[LifeArea]  # default: general
    project: str | None
    sensitivity: Sensitivity  # default: normal
    subject: str | None


class Ops:
    """The agent's operations over its ``parts``; each ends in ``apply``."""

    def __init__(
        self,
        parts: Parts,
        apply: Callable[[AnyOperation], LocalResult],
        writable: Callable[[str], None],
    ) -> None:
        self._parts = parts
        self._apply = apply
        self._writable = writable

    # --- the user's own words ----------------------------------------------------------

    def sources(self, record_id: str, text: str, conversation_id: str) -> list[str]:
        """The conversation's episodes holding the sentence (else all, so ``decide``
        names the reason: fragment, paraphrase, several sentences)."""
        db = self._parts.db
        held = [
            (row["episode_id"], f)
            for row in store.conversation_episodes(db, conversation_id)
            if (f := episode_facts_of(db, row)) is not None
        ]
        if not held:
            raise Refused(
                RefusalCode.NOT_SAID.value,
                f"record {record_id} refused: {text!r} is not a sentence the user typed; "
                f"this device holds nothing typed in conversation {conversation_id!r}",
            )
        sources = [e for e, f in held if check_said(text, [f.text]).ok]
        if not sources:
            return [e for e, _ in held][-MAX_SOURCES:]
        return [*context_episodes(text, held, sources[-1]), *sources][-MAX_SOURCES:]

    def _in_own_words(
        self,
        cls: type[Remember] | type[Correct],
        kind: str,
        record_id: str,
        text: str,
        conversation_id: str,
        **fields: Any,
    ) -> LocalResult:
        """The one path of ``remember`` and ``correct``: the sentence, its source
        episodes, the user as initiator, then the op's own ``fields``."""
        sources = self.sources(record_id, text, conversation_id)
        op = build(
            kind,
            record_id,
            lambda: cls(
                op_id=self._parts.new_id("op"),
                made_at=self._parts.now(),
                initiated_by=Initiator.USER,
                record_id=record_id,
                text=text,
                conversation_id=conversation_id,
                source_episode_ids=sources,
                **fields,
            ),
        )
        return self._apply(op)

    def remember(
        self, text: str, conversation_id: str, **fields: Unpack[RememberFields]
    ) -> LocalResult:
        """Keep one whole sentence the user typed in this conversation as a said record.
        Without ``content_type`` (or a ``custom_type``, which names its core) the detector
        reads it from the sentence, as it does for what the user says."""
        known_keywords("remember", fields, RememberFields)
        self._writable("remembering")
        custom_type = fields.get("custom_type")
        content_type = fields.get("content_type")
        if content_type is None:
            content_type = (
                custom_type.core
                if custom_type is not None
                else remembered_type(text, detect, self._parts.now())
            )
        return self._in_own_words(
            Remember,
            "record",
            self._parts.new_id("rec"),
            text,
            conversation_id,
            content_type=content_type,
            custom_type=custom_type,
            layer=fields.get("layer", Layer.CONSOLIDATED_FACT),
            time_kind=fields.get("time_kind", TimeKind.PERMANENT),
            valid_from=fields.get("valid_from"),
            valid_until=fields.get("valid_until"),
            expected_end=fields.get("expected_end"),
            life_areas=list(fields.get("life_areas", (LifeArea.GENERAL,))),
            project=fields.get("project"),
            sensitivity=fields.get("sensitivity", Sensitivity.NORMAL),
            subject=fields.get("subject"),
        )

    def correct(self, record_id: str, text: str, conversation_id: str) -> LocalResult:
        """ "That's wrong": a new version in the user's own words (a whole typed sentence of
        that conversation); the old version stays in the chain, no longer active."""
        self._writable("correcting")
        return self._in_own_words(
            Correct,
            "correction of record",
            record_id,
            text,
            conversation_id,
            base_version=provisional.confirmed_version(self._parts.db, record_id),
        )

    # --- the user's controls on one record ---------------------------------------------

    def record_op(self, cls: Any, record_id: str, **fields: Any) -> LocalResult:
        """An op on one record (``DontUse``, ``Confirm``, ``ReviseRule``, ...): the
        user's unless ``initiated_by`` says otherwise."""
        self._writable(f"{cls.model_fields['kind'].default} on record {record_id}")
        initiated = fields.pop("initiated_by", Initiator.USER)
        op = build(
            f"{cls.model_fields['kind'].default} of record",
            repr(record_id),
            lambda: cls(
                op_id=self._parts.new_id("op"),
                made_at=self._parts.now(),
                initiated_by=initiated,
                record_id=record_id,
                **fields,
            ),
        )
        return self._apply(op)

    def dont_use(self, record_id: str) -> LocalResult:
        return self.record_op(DontUse, record_id)

    def use_again(self, record_id: str) -> LocalResult:
        return self.record_op(UseAgain, record_id)

    def confirm(self, record_id: str) -> LocalResult:
        return self.record_op(Confirm, record_id)

    def reaffirm(
        self, record_id: str, still_true: bool, expected_end: datetime | None
    ) -> LocalResult:
        return self.record_op(Reaffirm, record_id, still_true=still_true, expected_end=expected_end)

    def revise_rule(self, record_id: str, text: str) -> LocalResult:
        return self.record_op(ReviseRule, record_id, text=text)

    def restrict_usage(
        self, record_id: str, area: LifeArea | None, project: str | None
    ) -> LocalResult:
        """ "Only use for X" (one area or one project); both None lifts the restriction."""
        self._writable(f"restrict_usage on record {record_id}")
        try:
            restriction = (
                None
                if area is None and project is None
                else UsageRestriction(area=area, project=project)
            )
        except ValidationError as exc:
            raise invalid("usage restriction of record", record_id, exc) from exc
        return self.record_op(RestrictUsage, record_id, restriction=restriction)

    # --- forgetting ----------------------------------------------------------------------

    def forget_permanently(self, record_id: str) -> LocalResult:
        """Shred the record, its source episodes and everything derived from it at once
        (``device.shred``, through the effects); the op is queued like any other."""
        episodes = store.source_episode_ids(self._parts.db, record_id)
        return self.record_op(ForgetPermanently, record_id, episode_ids=episodes)

    def forget_area(self, area: LifeArea | None, account_passphrase: str) -> LocalResult:
        """Forget a whole life area (None: all memory); the account passphrase is checked
        against the stored account key and proves the op to the cloud."""
        self._writable(f"forgetting {area.value if area else 'all memory'}")
        meta = store.get_meta(self._parts.db)
        key = account.signing_key(account_passphrase, meta.space_id, meta.account_key)
        assert meta.space_id is not None
        op_id = self._parts.new_id("op")
        area_name = area.value if area else None
        op = build(
            "forget of area",
            repr(area_name),
            lambda: ForgetArea(
                op_id=op_id,
                made_at=self._parts.now(),
                initiated_by=Initiator.USER,
                area=area,
                proof=account.proof(key, str(meta.space_id), op_id, area_name),
            ),
        )
        return self._apply(op)

    # --- the assistant's writes, and projects ----------------------------------------------

    def infer(self, content: RecordContent, record_id: str | None) -> LocalResult:
        """A record the assistant (or consolidator) derived: observed, inferred or
        hypothesis, never "said". External content stays a candidate."""
        self._writable("writing an inferred record")
        rid = record_id or self._parts.new_id("rec")
        op = build(
            "inferred record",
            rid,
            lambda: Infer(
                op_id=self._parts.new_id("op"),
                made_at=self._parts.now(),
                initiated_by=Initiator.ASSISTANT,
                record_id=rid,
                content=content,
            ),
        )
        return self._apply(op)

    def add_artifact(
        self, kind: ArtifactKind, derived_from: Sequence[str], payload: str
    ) -> LocalResult:
        """A derived item (summary, text view, embedding, cached copy) naming its parents;
        forgetting any parent shreds it."""
        self._writable("storing a derived item")
        artifact_id = self._parts.new_id("art")
        op = build(
            "artifact",
            artifact_id,
            lambda: AddArtifact(
                op_id=self._parts.new_id("op"),
                made_at=self._parts.now(),
                initiated_by=Initiator.ASSISTANT,
                artifact_id=artifact_id,
                artifact_kind=kind,
                derived_from=list(derived_from),
                payload=payload,
            ),
        )
        return self._apply(op)

    def set_project(self, name: str, open: bool) -> LocalResult:
        self._writable(f"setting project {name!r}")
        op = build(
            "project",
            repr(name),
            lambda: SetProject(
                op_id=self._parts.new_id("op"),
                made_at=self._parts.now(),
                initiated_by=Initiator.USER,
                project=name,
                open=open,
            ),
        )
        return self._apply(op)
