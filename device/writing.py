"""The device's write paths besides an explicit "remember this".

Invariants:
- During a conversation only the episode and the detector's candidate marks are
  written, in one transaction (the model runs before it); a sentence that corrects
  what was just said is marked whatever the model scores it
  (``protocol.detection.follow_up``, the rule the cloud re-applies); records come later, from
  background consolidation (the cloud's worker, or this device for classes it keeps to
  itself).
- Whether an utterance is kept only on this device is decided BEFORE its episode is
  logged, from the caller's explicit class, the detector's label of every sentence and
  the sensitivity lexicon (which can only raise a class); such an episode, its
  candidates and every record made from it are never queued for the cloud.
- This device's own consolidation never undoes the user: a candidate a record already
  accounts for (``device.accounting``, the consolidator's rule) is resolved to that
  record and nothing is written.
- External content, connected sources and behaviour events are logged as episodes of
  their own source kind, never as the user's words; imports become candidates
  "imported, not verified". None of them can ever be a behaviour rule (the rules
  refuse it, whatever the caller asks).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from device import candidates, store
from device.accounting import Histories
from device.db import Database
from device.facts import episode_facts, episode_facts_of
from device.views import DetectedSentence, LocalResult, SaidResult
from protocol.consolidation.content import said_content
from protocol.consolidation.extract import Hints, RuleExtractor
from protocol.consolidation.observations import event_text
from protocol.consolidation.sensitivity import sensitivity_of
from protocol.detection import follow_up
from protocol.detection.labels import Detection
from protocol.export.importing import IMPORT_CONVERSATION
from protocol.model import (
    ContentType,
    EpistemicState,
    Evidence,
    Initiator,
    Observation,
    RecordContent,
    Sensitivity,
    SourceKind,
)
from protocol.operations import (
    AddEpisode,
    AnyOperation,
    CandidateRef,
    Consolidate,
    EndSession,
    Infer,
    MarkCandidate,
)
from protocol.provenance import EXTERNAL_MEDIA
from protocol.sentences import is_question, split_sentences

Apply = Callable[[AnyOperation, bool | None], LocalResult]
Build = Callable[[str, str, Callable[[], AnyOperation]], AnyOperation]
BEHAVIOUR_CONVERSATION = "behaviour"
MAX_IMPORTED_SENTENCES = 64
MAX_MARKED_SENTENCE = 255  # a mark names a sentence index up to this


@dataclass(frozen=True, slots=True)
class Writer:
    db: Database
    now: Callable[[], datetime]
    new_id: Callable[[str], str]
    apply: Apply
    detect: Callable[[Sequence[str]], tuple[list[Detection], str]]
    build: Build  # builds an op; an invalid one raises an error naming the item

    # --- what the user types ------------------------------------------------------------

    def say(
        self, text: str, conversation_id: str, *, sensitivity: Sensitivity | None = None
    ) -> SaidResult:
        """Log what the user typed and mark the sentences worth remembering."""
        sentences = split_sentences(text) or [text]
        detections, model_id = self.detect(sentences)
        named = sensitivity if sensitivity is not Sensitivity.NORMAL else None
        classes = [
            named or sensitivity_of(s, d.sensitivity)
            for s, d in zip(sentences, detections, strict=True)
        ]
        device_only = bool(set(classes) & candidates.device_only_classes(self.db))
        marked = self._with_corrections(sentences, detections, conversation_id)
        shown = [
            DetectedSentence(
                sentence=index,
                text=sentence,
                candidate=marked[index],
                score=d.score,
                content_type=d.content_type.value,
                sensitivity=cls.value,
                time_kind=d.time_kind.value,
            )
            for index, (sentence, d, cls) in enumerate(
                zip(sentences, detections, classes, strict=True)
            )
        ]
        with self.db.atomic():  # the words and their marks commit together, once
            episode_id, typed_at = self._log(
                text, SourceKind.USER_STATEMENT, None, conversation_id, keep=device_only
            )
            for index, (d, cls) in enumerate(zip(detections, classes, strict=True)):
                if not marked[index] or index > MAX_MARKED_SENTENCE:
                    continue
                mark = MarkCandidate(
                    op_id=self.new_id("op"),
                    made_at=typed_at,
                    initiated_by=Initiator.ASSISTANT,
                    episode_id=episode_id,
                    sentence=index,
                    content_type=d.content_type,
                    sensitivity=cls,
                    time_kind=d.time_kind,
                    score=round(d.score, 6),
                    model_id=model_id,
                )
                self.apply(mark, device_only or None)
        return SaidResult(episode_id, tuple(shown), device_only, model_id)

    def _with_corrections(
        self, sentences: Sequence[str], detections: Sequence[Detection], conversation_id: str
    ) -> list[bool]:
        """The detector's marks, plus every sentence that corrects what was just said
        (``protocol.detection.follow_up``; the cloud applies the same rule)."""
        marked = [d.candidate for d in detections]
        earlier: list[str] | None = None
        for index, sentence in enumerate(sentences):
            if marked[index] or not follow_up.correction_cued(sentence):
                continue
            if earlier is None:
                earlier = self._recent_sentences(conversation_id)
            marked[index] = follow_up.is_correction(sentence, [*earlier, *sentences[:index]])
        return marked

    def _recent_sentences(self, conversation_id: str) -> list[str]:
        """The last sentences the user typed in this conversation, oldest first."""
        out: list[str] = []
        for row in reversed(store.conversation_episodes(self.db, conversation_id)):
            read = episode_facts_of(self.db, row)
            if read is not None and read.source_kind is SourceKind.USER_STATEMENT:
                out[:0] = split_sentences(read.text)
            if len(out) >= follow_up.CONTEXT_REACH:
                break
        return out

    def end_session(self, conversation_id: str) -> list[LocalResult]:
        """The conversation ended: its candidates are ready for consolidation. Those of
        episodes kept on this device are consolidated here and now (the cloud never
        sees them); they stay candidates until the user confirms, like every
        sensitive class."""
        end = self.build(
            "end of conversation",
            repr(conversation_id),
            lambda: EndSession(
                op_id=self.new_id("op"),
                made_at=self.now(),
                initiated_by=Initiator.USER,
                conversation_id=conversation_id,
            ),
        )
        ended = self.apply(end, None)
        results = [ended]
        histories = Histories(self.db)  # opened once, only if a device-only item waits
        for row in candidates.waiting(self.db, conversation_id=conversation_id):
            if candidates.episode_device_only(self.db, row.episode_id):
                made = self._consolidate_here(row, histories)
                if made is not None:
                    results.append(made)
        return results

    def _consolidate_here(
        self, row: candidates.CandidateRow, histories: Histories
    ) -> LocalResult | None:
        episode = episode_facts(self.db, row.episode_id)
        if episode is None or episode.typed_at is None:
            return None
        sentences = split_sentences(episode.text) or [episode.text]
        if row.sentence >= len(sentences):
            return None
        sentence = sentences[row.sentence]
        # never undo the user: a record that already accounts for this sentence (kept,
        # corrected or retracted; ``device.accounting``) finishes the candidate with it
        found = histories.accounted_for(row.episode_id, sentence, episode.typed_at)
        if found is not None:
            with self.db.atomic():
                candidates.resolve(self.db, [(row.episode_id, row.sentence)], found.record_id)
            return None
        hints = Hints(
            content_type=row.content_type, sensitivity=row.sensitivity, time_kind=row.time_kind
        )
        extraction = RuleExtractor().extract(sentence, said_at=episode.typed_at, hints=hints)
        content = said_content(
            sentence,
            extraction,
            episode_id=row.episode_id,
            conversation_id=row.conversation_id,
            said_at=episode.typed_at,
        )
        op = Consolidate(
            op_id=self.new_id("op"),
            made_at=self.now(),
            initiated_by=Initiator.ASSISTANT,
            record_id=self.new_id("rec"),
            content=content,
            candidates=[CandidateRef(episode_id=row.episode_id, sentence=row.sentence)],
        )
        result = self.apply(op, True)
        histories.wrote(op.record_id)
        return result

    # --- what comes from elsewhere ------------------------------------------------------

    def ingest(self, text: str, *, medium: str, source: str, conversation_id: str) -> str:
        """Log external content (a web page, email, document, calendar invite, another
        agent, tool output). It only ever becomes candidates."""
        if medium not in EXTERNAL_MEDIA:
            raise ValueError(
                f"unknown medium {medium!r}; external content is one of {', '.join(EXTERNAL_MEDIA)}"
            )
        source_id = f"{medium}:{source}"
        return self._log(text, SourceKind.EXTERNAL_CONTENT, source_id, conversation_id)[0]

    def observe(self, subject: str, value: str, *, source: str) -> str:
        """Log one behaviour event ("morning coffee order: americano") from an app."""
        return self._log(
            event_text(subject, value), SourceKind.USER_BEHAVIOUR, source, BEHAVIOUR_CONVERSATION
        )[0]

    def import_text(self, text: str, *, source: str) -> list[LocalResult]:
        """Import a dump: every statement becomes a candidate "imported, not verified"."""
        episode_id, at = self._log(text, SourceKind.IMPORT, source, IMPORT_CONVERSATION)
        sentences = (split_sentences(text) or [text])[:MAX_IMPORTED_SENTENCES]
        detections, _model = self.detect(sentences)
        results = []
        for sentence, d in zip(sentences, detections, strict=True):
            if is_question(sentence):
                continue
            content_type = d.content_type
            if content_type is ContentType.PREFERENCE:
                content_type = ContentType.PERSONAL_FACT  # an import cannot state a preference
            content = RecordContent(
                text=sentence,
                content_type=content_type,
                epistemic_state=EpistemicState.OBSERVED,
                source_episode_ids=[episode_id],
                source_kind=SourceKind.IMPORT,
                evidence=Evidence(
                    observations=[
                        Observation(source_id=source, source_kind=SourceKind.IMPORT, at=at)
                    ]
                ),
                sensitivity=sensitivity_of(sentence, d.sensitivity),
                background=True,
            )
            op = Infer(
                op_id=self.new_id("op"),
                made_at=at,
                initiated_by=Initiator.ASSISTANT,
                record_id=self.new_id("rec"),
                content=content,
            )
            results.append(self.apply(op, None))
        return results

    def _log(
        self,
        text: str,
        kind: SourceKind,
        source: str | None,
        conversation_id: str,
        *,
        keep: bool = False,
    ) -> tuple[str, datetime]:
        """Log an episode (``keep``: only on this device); its id and when it was logged."""
        at = self.now()
        episode_id = self.new_id("ep")
        what = "episode" if kind is SourceKind.USER_STATEMENT else f"{kind.value} episode"
        op = self.build(
            what.replace("_", " "),
            episode_id,
            lambda: AddEpisode(
                op_id=self.new_id("op"),
                made_at=at,
                initiated_by=Initiator.USER,
                episode_id=episode_id,
                conversation_id=conversation_id,
                text=text,
                typed_at=at,
                source_kind=kind,
                source_id=source,
            ),
        )
        self.apply(op, keep)
        return episode_id, at
