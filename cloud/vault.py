"""Sealing and opening content with per-item data keys, and hashing subject-index keys.

Invariants:
- Every record version, episode and artifact gets a fresh data key from the key store;
  its ciphertext is bound to ``memsync/1|<space>|<kind>|<id>|<version>`` (kind
  ``record``, ``episode`` or ``artifact``; episodes and artifacts use version 1).
- Content whose key a committed forget names, or whose key is gone from the key store,
  never opens: ``open`` answers None, even in the window before the sweep destroys it.
- A push's vault (``for_push``) keeps the keys it creates and the DEKs it read for that
  push only, and still asks the record store whether a key is forgotten on every use.
- The subject index stores ``HMAC(index key of the space, key)`` for each key of
  ``protocol.subjects.stored_keys``, never the words the keys are made of.
- Data derived from one record version (its search vector) is sealed with that
  version's own data key under its own binding kind (``vector``), so destroying the
  version's key makes the derived data unreadable too; it never opens once the key is
  forgotten, exactly like the content.
- The search indexes blind terms with the space's search key (``search_key``).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from cloud.errors import StoreError
from cloud.keystore import KeyBatch, KeyStore
from cloud.store.base import StoreSession
from protocol.errors import SealError
from protocol.sealing import NONCE_BYTES, binding, open_sealed, seal

_M = TypeVar("_M", bound=BaseModel)


def seal_with(
    dek: bytes, nonce: bytes, plain: bytes, space_id: str, kind: str, item_id: str, version: int
) -> bytes:
    return seal(dek, nonce, plain, binding(space_id, kind, item_id, version))


class Vault:
    """The cloud's one way to seal and open content."""

    def __init__(
        self,
        key_store: KeyStore,
        random_bytes: Callable[[int], bytes],
        batch: KeyBatch | None = None,
    ) -> None:
        self.key_store = key_store
        self._random = random_bytes
        self._batch = batch
        # a push's vault remembers the index tokens it made (one HMAC per key and push)
        self._tokens: dict[tuple[str, str], str] | None = None if batch is None else {}

    def for_push(self) -> Vault:
        """A vault for one push: its new keys wait in a ``KeyBatch`` until ``write_keys``."""
        return Vault(self.key_store, self._random, self.key_store.batch())

    def write_keys(self) -> None:
        """Store the keys this push created (call before the record store commits)."""
        if self._batch is not None:
            self._batch.write()

    def seal_new(
        self, space_id: str, kind: str, item_id: str, version: int, content: BaseModel
    ) -> tuple[str, bytes]:
        """Seal ``content`` under a fresh data key; return ``(key_id, sealed)``."""
        source = self.key_store if self._batch is None else self._batch
        key_id, dek = source.create_data_key(space_id)
        sealed = seal(
            dek,
            self._random(NONCE_BYTES),
            content.model_dump_json().encode(),
            binding(space_id, kind, item_id, version),
        )
        return key_id, sealed

    def data_key(self, s: StoreSession, space_id: str, key_id: str) -> bytes | None:
        """The plain DEK, or None once a forget names it (committed) or it is destroyed."""
        if s.forgotten_key_ids(space_id, [key_id]):  # asked every time, never cached
            return None
        source = self.key_store if self._batch is None else self._batch
        return source.data_key(space_id, key_id)

    def open(
        self,
        s: StoreSession,
        space_id: str,
        kind: str,
        item_id: str,
        version: int,
        key_id: str,
        sealed: bytes,
        model: type[_M],
    ) -> _M | None:
        """The opened content, or None when its key is forgotten."""
        dek = self.data_key(s, space_id, key_id)
        if dek is None:
            return None
        return self.open_with(dek, space_id, kind, item_id, version, sealed, model)

    @staticmethod
    def open_with(
        dek: bytes,
        space_id: str,
        kind: str,
        item_id: str,
        version: int,
        sealed: bytes,
        model: type[_M],
    ) -> _M:
        """Open content with a DEK ``data_keys`` gave (so one not forgotten)."""
        try:
            plain = open_sealed(dek, sealed, binding(space_id, kind, item_id, version))
            return model.model_validate_json(plain)
        except (SealError, ValidationError) as exc:
            raise StoreError(
                f"{kind} {item_id} v{version} of {space_id} does not open: {exc}"
            ) from exc

    def data_keys(self, s: StoreSession, space_id: str, key_ids: Iterable[str]) -> dict[str, bytes]:
        """The plain DEKs of ``key_ids`` that are neither named by a forget nor destroyed."""
        wanted = set(key_ids)
        wanted -= s.forgotten_key_ids(space_id, wanted)
        source = self.key_store if self._batch is None else self._batch
        return source.data_keys(space_id, wanted) if wanted else {}

    def seal_derived(
        self, dek: bytes, space_id: str, kind: str, item_id: str, version: int, plain: bytes
    ) -> bytes:
        """Seal data derived from one item with that item's own DEK (from ``data_keys``,
        so never a forgotten one), bound to its own ``kind``."""
        return seal_with(dek, self._random(NONCE_BYTES), plain, space_id, kind, item_id, version)

    @staticmethod
    def open_derived(
        dek: bytes, space_id: str, kind: str, item_id: str, version: int, sealed: bytes
    ) -> bytes:
        """Open what ``seal_derived`` sealed, with a DEK from ``data_keys``."""
        try:
            return open_sealed(dek, sealed, binding(space_id, kind, item_id, version))
        except SealError as exc:
            raise StoreError(
                f"{kind} {item_id} v{version} of {space_id} does not open: {exc}"
            ) from exc

    def search_key(self, space_id: str) -> bytes:
        """The key the space's search indexes blind their terms with."""
        source = self.key_store if self._batch is None else self._batch
        return source.search_key(space_id)

    def subject_token(self, space_id: str, subject_key: str) -> str:
        if self._tokens is not None:
            token = self._tokens.get((space_id, subject_key))
            if token is not None:
                return token
        source = self.key_store if self._batch is None else self._batch
        key = source.index_key(space_id)
        token = hmac.digest(key, subject_key.encode("utf-8"), "sha256").hex()
        if self._tokens is not None:
            self._tokens[space_id, subject_key] = token
        return token
