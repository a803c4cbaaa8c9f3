"""DeviceAgent: the offline core's API for the simulator, the CLI and tests, a facade.

Each public method delegates to the module of its one concern, handed the agent's parts
(``device.parts``) and callables explicitly: writing (``ops``, ``writing``,
``importing``), reading (``reading``, ``recalling``, ``learned``, ``holdings``), sync
(``syncing``, ``live``), enrollment and the account (``enrollment``, ``wiping``,
``export``), the cloud's other answers (``remote``), watching (``watching``), opening
(``opening``). Only wiring lives here.

Invariants:
- Every write comes through ``apply_operation`` (decide, apply, queue and receipt in
  ONE local transaction, ``device.local``; a refusal raises ``Refused`` and changes
  nothing) or ``_write`` (``device.writing``), and each tells the live loop.
- In temporary mode nothing is written at all: every write raises ``TemporaryMode``
  before touching the store (``_writable``, first in each write); reads work.
- All traffic goes through one ``CloudClient`` (``_cloud``, the one transport seam),
  every call inside the wipe guard (``_revocable``, ``device.wiping``); time and
  randomness come from the injected ``clock`` and ``random_bytes``.
- Syncs are serialised by the agent's sync lock (manual, live, account deletion).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, Unpack

from pydantic import ValidationError

from device import account_key as account_keys
from device import (
    candidates,
    catalog,
    enrollment,
    export,
    holdings,
    importing,
    keys,
    learned,
    opening,
    reading,
    store,
    syncing,
    views,
    watching,
)
from device.account_key import KeyChange
from device.changes import ChangeFeed, ChangeHub, RecordEvent, Subscription
from device.client import LIVE_PULL_SINCE, CloudClient
from device.db import DB_FILENAME, Database
from device.errors import DeviceRevoked, InvalidOperation, NoCloud, NotEnrolled, TemporaryMode
from device.export import ExportResult
from device.invalid import build, invalid, known_keywords
from device.live import LiveSync
from device.local import apply_local
from device.ops import Ops, RememberFields, detect
from device.parts import Injected, Parts, system_clock, utc_now
from device.query_watch import QueryWatch
from device.recalling import Question, Recaller, Scope
from device.remote import Remote
from device.retrieval import Recall
from device.sync_status import SyncStatus, SyncTracker
from device.syncing import LiveOptions
from device.wiping import Wipes, revoked
from device.writing import Writer
from protocol.messages import DeviceStatus, ForgetStatus
from protocol.model import ArtifactKind, LifeArea, RecordContent, Sensitivity
from protocol.operations import AnyOperation, Receipt
from protocol.subset import SubsetPolicy, SubsetView
from protocol.version import SUPPORTED_VERSIONS, VersionRange, check_range

_T = TypeVar("_T")


def _checked_versions(versions: VersionRange | None) -> VersionRange:
    try:
        return check_range(SUPPORTED_VERSIONS if versions is None else versions)
    except ValueError as exc:
        raise InvalidOperation(
            f"protocol_versions {versions!r}: {exc}; nothing was opened"
        ) from exc


def _check_injected(injected: Injected) -> None:
    """Refuse an unknown keyword or a bad version range before anything is opened."""
    known_keywords("DeviceAgent", injected, Injected)
    _checked_versions(injected.get("protocol_versions"))


class DeviceAgent:
    def __init__(self, db: Database, directory: Path, **injected: Unpack[Injected]) -> None:
        _check_injected(injected)
        self._db = db
        self._directory = directory
        self._transport = injected.get("transport")
        self._protocol_versions = _checked_versions(injected.get("protocol_versions"))
        self._clock = injected.get("clock") or system_clock
        self._random = injected.get("random_bytes") or secrets.token_bytes
        self._client: CloudClient | None = None
        self._temporary = False
        self._sync_lock = threading.RLock()
        self._live: LiveSync | None = None
        self._changes = ChangeHub(db, self._now_dt)
        self._status = SyncTracker()
        parts = self._parts = Parts(db, self._now_dt, self._random)
        self._wipes = Wipes(parts, self._cloud)
        self._ops = Ops(parts, self.apply_operation, self._writable)
        self._recaller = Recaller(
            parts, lambda: self._temporary, self._cloud, self._revocable, self.holds
        )
        self._remote = Remote(parts, self._cloud, self._revocable, self._status, self._queued)

    # --- lifecycle (``device.opening``) ----------------------------------------------------

    @classmethod
    def create(
        cls,
        directory: Path,
        passphrase: str,
        *,
        device_name: str,
        cloud_url: str | None = None,
        kdf_iterations: int | None = None,
        **injected: Unpack[Injected],
    ) -> DeviceAgent:
        """Create a new encrypted device database and key pair in ``directory``;
        ``kdf_iterations`` None is SQLCipher's 256,000 (lower it only for simulations)."""
        directory = Path(directory)
        _check_injected(injected)
        opening.check_name(device_name)
        db = Database.create(directory / DB_FILENAME, passphrase, kdf_iterations=kdf_iterations)
        agent = cls(db, directory, **injected)
        opening.initialise(agent._parts, directory, device_name=device_name, cloud_url=cloud_url)
        return agent

    @classmethod
    def open(cls, directory: Path, passphrase: str, **injected: Unpack[Injected]) -> DeviceAgent:
        """Open an existing device database (applying any pending migrations)."""
        directory = Path(directory)
        _check_injected(injected)
        db = Database.open_existing(directory / DB_FILENAME, passphrase)
        agent = cls(db, directory, **injected)
        opening.prepare(agent._parts)
        return agent

    def close(self) -> None:
        self.stop_live()
        if self._client is not None:
            self._client.close()
            self._client = None
        self._db.close()

    def __enter__(self) -> DeviceAgent:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- identity --------------------------------------------------------------------

    @property
    def device_id(self) -> str | None:
        return store.get_meta(self._db).device_id

    @property
    def space_id(self) -> str | None:
        return store.get_meta(self._db).space_id

    @property
    def device_name(self) -> str:
        return store.get_meta(self._db).device_name

    @property
    def public_key(self) -> bytes:
        return keys.public_key_bytes(keys.load_private_key(store.get_meta(self._db).private_key))

    @property
    def account_key(self) -> bytes | None:
        return store.get_meta(self._db).account_key

    @property
    def protocol_versions(self) -> VersionRange:
        """The protocol versions this device speaks (its pin, or every one it knows)."""
        return self._protocol_versions

    @property
    def protocol_version(self) -> int:
        """The version the device speaks to its cloud: the highest of its range until a
        cloud refused it, then the one negotiated (``CloudClient.protocol_version``)."""
        return self._protocol_versions[1] if self._client is None else self._client.protocol_version

    @property
    def live_pull(self) -> bool:
        """Whether the version spoken to the cloud has live pull (``PullRequest.wait``)."""
        return self.protocol_version >= LIVE_PULL_SINCE

    @property
    def db_path(self) -> Path:
        return self._db.path

    @property
    def directory(self) -> Path:
        return self._directory

    # --- the parts, and the wiring -----------------------------------------------------

    def _now_dt(self) -> datetime:
        return utc_now(self._clock)

    def _now(self) -> str:
        return self._now_dt().isoformat()

    def now(self) -> datetime:
        """The injected clock's time, in UTC (for callers that date what they write)."""
        return self._now_dt()

    def random_bytes(self, n: int) -> bytes:
        """``n`` bytes from the injected randomness (session ids, tokens, file names)."""
        return self._random(n)

    def _id(self, prefix: str) -> str:
        return self._parts.new_id(prefix)

    def _cloud(self, cloud_url: str | None = None) -> CloudClient:
        """The one client: made when first needed, made again when the URL changes."""
        url = cloud_url or store.get_meta(self._db).cloud_url
        if url is None:
            raise NoCloud(
                f"device {self.device_name!r} has no cloud URL; give one to enroll or init"
            )
        if self._client is None or self._client.base_url != url:
            if self._client is not None:
                self._client.close()
            self._client = CloudClient(
                url, transport=self._transport, protocol_versions=self._protocol_versions
            )
        self._client.credential = store.get_meta(self._db).credential
        return self._client

    def _writable(self, what: str) -> None:
        if self._temporary:
            raise TemporaryMode(what)

    def _queued(self) -> None:
        """An op was applied (maybe queued) or the subset changed: a live loop syncs."""
        live = self._live
        if live is not None:
            live.queued()

    def _revocable(self) -> AbstractContextManager[None]:
        """A call to the cloud, guarded: a must-wipe answer wipes (``device.wiping``)."""
        return self._wipes.revocable()

    def _revoked(self, held: int, confirmed: bool) -> DeviceRevoked:
        return revoked(self.device_name, held, confirmed)

    def _needs_credential(self, then: str) -> None:
        if store.get_meta(self._db).credential is None:
            raise NotEnrolled(f"device {self.device_name!r} is not enrolled; {then}")

    def _debug_db(self) -> Any:
        """The raw connection, for tests that must poke the store directly."""
        return self._db

    # --- temporary mode --------------------------------------------------------------

    @property
    def temporary_mode(self) -> bool:
        """While on, nothing is written: no episode, record, queue row, receipt, history."""
        return self._temporary

    def set_temporary_mode(self, on: bool) -> None:
        """Turn temporary mode on or off (kept in memory only: turning it on writes nothing)."""
        self._temporary = bool(on)

    # --- enrollment and the account key ----------------------------------------------

    def enroll(
        self, code: str, cloud_url: str | None = None, *, account_passphrase: str | None = None
    ) -> str:
        """Enroll with a one-time code (then register the account key); the device id."""
        self._writable("enrollment")
        device_id = enrollment.enroll(self._db, lambda: self._cloud(cloud_url), code)
        if account_passphrase is not None:
            self.register_account(account_passphrase)
        return device_id

    def register_account(self, account_passphrase: str) -> None:
        """Register the account passphrase's key; one already registered must match."""
        self._writable("registering the account key")
        enrollment.register_account(self._db, self._cloud, self._revocable, account_passphrase)

    # --- writing: what the user types, and what comes from elsewhere ------------------

    def change_account_passphrase(self, current: str, new: str) -> KeyChange:
        """Change the account passphrase (``device.account_key.change``)."""
        self._writable("changing the account passphrase")
        with self._revocable():
            return account_keys.change(
                self._db, self._cloud, current, new, random_bytes=self._random
            )

    def learn_account_key(self, account_passphrase: str) -> bool:
        """Take a passphrase changed on another device (``device.account_key.learn``)."""
        self._writable("checking the account passphrase")
        with self._revocable():
            return account_keys.learn(self._db, self._cloud, account_passphrase)

    def apply_operation(self, op: AnyOperation) -> views.LocalResult:
        """Apply an operation locally and queue it; ``Refused`` carries the receipt."""
        self._writable(f"operation {op.kind} {op.op_id}")
        result = apply_local(self._db, op, now=self._now_dt(), random_bytes=self._random)
        self._queued()
        return result

    def _apply_kept(self, op: AnyOperation, keep: bool | None) -> views.LocalResult:
        return apply_local(
            self._db, op, now=self._now_dt(), random_bytes=self._random, keep_on_device=keep
        )

    def _write(self, what: str, run: Callable[[Writer], _T], *, doing: str = "") -> _T:
        """One of ``device.writing``'s paths (``doing``: the temporary-mode guard's words);
        a value it refuses is told in words."""
        if doing:
            self._writable(doing)
        writer = Writer(self._db, self._now_dt, self._id, self._apply_kept, detect, build)
        try:
            result = run(writer)
        except ValidationError as exc:
            raise invalid(what, "", exc) from exc
        except ValueError as exc:
            raise InvalidOperation(f"{what} refused, nothing was changed: {exc}") from exc
        self._queued()
        return result

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

    # --- behaviour rules, and what was written in the background (``device.learned``) ----

    def rules(self) -> list[views.RecordView]:
        """Behaviour rules: proposed (candidate), accepted (active), undone (not in use)."""
        return learned.rules(self.what_do_you_know())

    def accept_rule(self, record_id: str) -> views.LocalResult:
        """Accept a proposed behaviour rule: it takes effect from now on."""
        learned.rule(self.what_do_you_know(), record_id)
        return self.confirm(record_id)

    def reject_rule(self, record_id: str) -> views.LocalResult:
        """Reject a proposed rule, or undo an accepted one (kept, not in use)."""
        learned.rule(self.what_do_you_know(), record_id)
        return self.dont_use(record_id)

    def revise_rule(self, record_id: str, text: str) -> views.LocalResult:
        """Rewrite an accepted or proposed rule: a new version (the old stays in history)."""
        learned.rule(self.what_do_you_know(), record_id)
        return self._ops.revise_rule(record_id, text)

    def undo_rule(self, record_id: str) -> views.LocalResult:
        """Back to the rule's previous words (a new version), else stop using it."""
        view = learned.rule(self.what_do_you_know(), record_id)
        words = learned.undo_words(view, self.record_history(record_id))
        return self.dont_use(record_id) if words is None else self.revise_rule(record_id, words)

    def recently_learned(self, days: int = 7) -> list[views.RecordView]:
        """Active records the background consolidation wrote in the last ``days`` days."""
        return learned.recently_learned(self.what_do_you_know(), self._now_dt(), days)

    def waiting_for_confirmation(self) -> list[views.RecordView]:
        """Candidates the user is asked to confirm."""
        return learned.waiting(self.what_do_you_know())

    # --- reading (``device.reading``, ``device.recalling``) ------------------------------

    def recall(self, query: str, limit: int = 5, **scope: Unpack[Scope]) -> list[views.RecallHit]:
        """The records retrieval returns for a task (see ``retrieve`` for the whole answer)."""
        return list(self.retrieve(query, limit, **scope).hits)

    def retrieve(self, query: str, limit: int = 5, **scope: Unpack[Scope]) -> Recall:
        """The fixed eight-step retrieval over this device's subset, offline; each hit
        counts as used (``device.recalling``)."""
        return self._recaller.local(Question.of(query, limit, **scope))

    def retrieve_from_cloud(
        self, query: str, limit: int = 5, *, fallback: bool = True, **scope: Unpack[Scope]
    ) -> Recall:
        """The cloud's retrieval over the whole space, sealed to this device; offline,
        with ``fallback``, this device's own answers (``device.recalling``)."""
        return self._recaller.in_cloud(Question.of(query, limit, **scope), fallback=fallback)

    def what_do_you_know(self) -> list[views.RecordView]:
        """Everything: candidates, inferences, not in use, corrected, skeletons."""
        return reading.what_do_you_know(self._db, self._now_dt())

    def list_records(self) -> list[views.RecordView]:
        return self.what_do_you_know()

    def record_history(self, record_id: str) -> list[views.VersionView]:
        """The version chain, for the user: old versions marked no longer active."""
        return reading.record_history(self._db, record_id)

    def as_of(self, when: datetime) -> list[views.RecordView]:
        """What memory said at ``when`` (forgotten content never)."""
        if when.tzinfo is None or when.utcoffset() is None:
            raise ValueError(f"as_of needs a time with a time zone, got {when!r}")
        return reading.as_of(self._db, when.astimezone(UTC))

    def explain(self, record_id: str) -> str:
        """ "How do you know this?", from the record's evidence and source episodes."""
        return reading.explain(self._db, record_id, self._now_dt())

    def sources(self, record_id: str) -> list[views.SourceView]:
        """The current version's source episodes (quoted only for the user's words)."""
        return reading.sources(self._db, record_id)

    def due_questions(self) -> list[tuple[str, str]]:
        return reading.due_questions(self._db, self._now_dt())

    # --- what this device holds (``device.holdings``) ------------------------------------

    def receipt(self, op_id: str) -> Receipt | None:
        """The durable receipt of an op: the cloud's once pushed, else the local one."""
        return holdings.receipt(self._db, op_id)

    def pending_ops(self) -> int:
        return store.queue_count(self._db)

    def data_keys_for(self, record_id: str) -> list[bytes]:
        """Raw DEKs held for the record's versions and its source episodes."""
        return holdings.data_keys_for(self._db, record_id)

    def data_keys_for_artifact(self, artifact_id: str) -> list[bytes]:
        return holdings.data_keys_for_artifact(self._db, artifact_id)

    def artifact_ids(self) -> list[str]:
        return catalog.artifact_ids(self._db)

    def data_key_ids(self) -> set[str]:
        return store.key_ids(self._db)

    def holds(self, record_id: str) -> bool:
        """Whether this device holds the record's content now (read from its database)."""
        return holdings.holds(self._db, record_id)

    def held_records(self) -> set[str]:
        """The records whose content this device holds now (read from its database)."""
        return holdings.held_records(self._db)

    def held_because(self, record_id: str) -> str | None:
        """Why the cloud put the record in this device's subset, or None."""
        return holdings.held_because(self._db, record_id)

    # --- export ----------------------------------------------------------------------

    def export(
        self, out_dir: Path, account_passphrase: str, *, include_sensitive: bool = True
    ) -> ExportResult:
        """Export the whole space into ``out_dir`` (``device.export``)."""
        with self._revocable():
            return export.export(
                self._db,
                self._cloud,
                Path(out_dir),
                account_passphrase,
                include_sensitive=include_sensitive,
                random_bytes=self._random,
            )

    # --- sync (``device.syncing``, ``device.live``) --------------------------------------

    def sync(self) -> views.SyncReport:
        """Acks left over, then push (pull first on 409), then pull and ack."""
        self._writable("syncing")
        self._needs_credential("enroll it with a code first")
        return syncing.sync(
            self._parts,
            cloud=self._cloud,
            revocable=self._revocable,
            lock=self._sync_lock,
            status=self._status,
        )

    def rebuild_vectors(self, limit: int | None = None, batch: int = 64) -> int:
        """Re-embed vectors another model made, at most ``limit``; how many."""
        return syncing.rebuild_vectors(self._parts, limit, batch)

    def start_live(self, **options: Unpack[LiveOptions]) -> LiveSync:
        """Sync now, then whenever the cloud's space changes or an op is queued."""
        self._needs_credential("enroll it before live sync")
        if self._live is not None and self._live.running:
            raise InvalidOperation(f"device {self.device_name!r} is already in live sync")
        client = self._cloud()  # made here, once: the live threads share it
        live = syncing.live_sync(self._parts, client, self.sync, self._revocable, **options)
        self._live = live
        live.start()
        return live

    def stop_live(self) -> None:
        """Stop live sync (no-op when it is not running)."""
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    @contextmanager
    def live(self, **options: Unpack[LiveOptions]) -> Iterator[LiveSync]:
        """Live sync for the duration of a ``with`` block."""
        started = self.start_live(**options)
        try:
            yield started
        finally:
            self.stop_live()

    # --- watching changes and the sync status (``device.watching``) ----------------------

    def watch(self, callback: Callable[[RecordEvent], None]) -> Subscription:
        """``callback`` with each record event once its transaction committed."""
        return watching.watch(self._changes, callback)

    def changes(self) -> ChangeFeed:
        """The iterator form of ``watch``."""
        return ChangeFeed(self._changes)

    def watch_query(
        self,
        query: str,
        callback: Callable[[list[views.RecallHit]], None],
        limit: int = 5,
        **scope: Unpack[Scope],
    ) -> QueryWatch:
        """``recall`` now, and again whenever its answer changes (``query_watch``)."""
        question = Question.of(query, limit, **scope)
        return watching.watch_query(self._changes, self._recaller, question, callback)

    def sync_status(self, *, ask_cloud: bool = False) -> SyncStatus:
        """Where this device stands (``ask_cloud``: the cloud's count first)."""
        live = self._live is not None and self._live.running
        ask = self.subset if ask_cloud else None
        return watching.sync_status(self._db, self._status, live=live, ask_cloud=ask)

    # --- the cloud's other answers: devices, pending forgets, the subset (``remote``) ----

    def devices(self) -> list[DeviceStatus]:
        """Every device of this account as the cloud knows it (``GET /v1/devices``)."""
        return self._remote.devices()

    def pending_forgets(self) -> list[ForgetStatus]:
        """Forgets some device of this account has not confirmed yet."""
        return self._remote.pending_forgets()

    def subset(self) -> SubsetView:
        """This device's subset as the cloud chose it (``GET /v1/subset``)."""
        return self._remote.subset()

    def set_subset_policy(self, policy: SubsetPolicy) -> SubsetView:
        """Replace this device's subset rules and budget (effective at the next sync)."""
        return self._remote.set_subset_policy(policy)

    def pin(self, record_id: str, pinned: bool = True) -> SubsetView:
        """Keep a record on this device whatever the rules say (within the budget)."""
        return self._remote.pin(record_id, pinned)

    def unpin(self, record_id: str) -> SubsetView:
        return self.pin(record_id, pinned=False)

    # --- the end of the account (``device.wiping``) --------------------------------------

    def delete_account(self, account_passphrase: str) -> views.AccountDeletion:
        """Delete the whole account (cloud and devices); this device wipes its copy."""
        self._writable("deleting the account")
        return self._wipes.delete_account(
            account_passphrase, sync_lock=self._sync_lock, stop_live=self.stop_live
        )

    @property
    def closing_notice(self) -> str | None:
        """The ``Memsync-Closing`` header the cloud sent last, or None."""
        return None if self._client is None else self._client.closing

    def confirm_wipe(self) -> bool:
        """Tell the cloud this device wiped its copy; False when it was not reached."""
        return self._wipes.confirm()
