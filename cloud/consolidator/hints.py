"""The device's sensitivity label of a candidate, kept sealed with its work item.

Invariants:
- A label is sealed with the data key of the episode it is about, bound to its own kind
  (``candidate_hint``) and the item (``<episode>#<sentence>``), so it is never in the
  clear and it dies with the episode: once the episode's key is forgotten or destroyed
  it never opens (``open_hint`` answers None), exactly like the words.
- Every label is padded to ``HINT_BYTES`` before sealing, so a ciphertext's length says
  nothing about the class, and a ``normal`` label is sealed like any other.
- An opened label is only ever a hint that can raise (``cloud.sensitivity.union``):
  a missing or unreadable one means "the device said nothing", never "normal".
"""

from __future__ import annotations

from cloud.errors import StoreError
from cloud.store.base import StoreSession
from cloud.vault import Vault
from protocol.model import Sensitivity

HINT_KIND = "candidate_hint"
HINT_BYTES = 32


def _item(episode_id: str, sentence: int) -> str:
    return f"{episode_id}#{sentence}"


def _episode_dek(vault: Vault, s: StoreSession, space_id: str, episode_id: str) -> bytes | None:
    """The data key of the episode's content, or None when the episode or its key is gone."""
    row = s.episodes(space_id, [episode_id]).get(episode_id)
    if row is None:
        return None
    return vault.data_keys(s, space_id, [row.key_id]).get(row.key_id)


def seal_hint(
    vault: Vault,
    s: StoreSession,
    space_id: str,
    episode_id: str,
    sentence: int,
    sensitivity: Sensitivity,
) -> bytes | None:
    """The sealed label, or None when the episode or its key is gone."""
    dek = _episode_dek(vault, s, space_id, episode_id)
    if dek is None:
        return None
    plain = sensitivity.value.encode().ljust(HINT_BYTES)
    return vault.seal_derived(dek, space_id, HINT_KIND, _item(episode_id, sentence), 1, plain)


def open_hint(
    vault: Vault, s: StoreSession, space_id: str, episode_id: str, sentence: int
) -> Sensitivity | None:
    """The device's label of a waiting candidate, or None (none kept, or its key is gone)."""
    sealed = s.work_item_hint(space_id, episode_id, sentence)
    if sealed is None:
        return None
    dek = _episode_dek(vault, s, space_id, episode_id)
    if dek is None:
        return None
    item = _item(episode_id, sentence)
    value = vault.open_derived(dek, space_id, HINT_KIND, item, 1, sealed).decode().strip()
    try:
        return Sensitivity(value)
    except ValueError as exc:
        raise StoreError(
            f"candidate {item} of {space_id}: sealed device label {value!r} is not a class"
        ) from exc
