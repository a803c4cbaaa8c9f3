"""Keyed, deterministic names for the consolidator's work: conversation tokens, record
ids and op ids.

Invariants:
- Every name is ``HMAC-SHA256(index key of the space, "memsync/1|<domain>|…")`` (the
  space's subject-index key from the key store, under its own domain prefix, so no
  name can equal a subject-index token), so the record store alone can neither read
  nor test a guess at what a name was made from (a conversation id, a claim's words,
  a behaviour subject).
- The same inputs always give the same name: a retried job builds the same op ids
  (a replay is a duplicate, never a second record) and the same claim from a second
  source lands on the same record id.
"""

from __future__ import annotations

from cloud.vault import Vault
from protocol.ids import make_id
from protocol.sentences import normalise

DOMAIN = "memsync/1|consolidator"
ID_BYTES = 15  # 24 base32 characters


def conversation_token(vault: Vault, space_id: str, conversation_id: str) -> str:
    """What ``work_items`` and ``ended_conversations`` keep instead of the conversation id."""
    return vault.subject_token(space_id, f"{DOMAIN}|conversation|{conversation_id}")


def keyed_id(vault: Vault, space_id: str, prefix: str, *parts: str) -> str:
    """A ``rec_…``/``op_…`` id that only this space's key store can derive from ``parts``."""
    digest = vault.subject_token(space_id, "|".join((DOMAIN, prefix, *parts)))
    return make_id(prefix, bytes.fromhex(digest)[:ID_BYTES])


def claim_key(sentence: str) -> str:
    """The normalised form of a claim: case, spacing and final punctuation ignored."""
    return normalise(sentence).casefold()


def claim_record_id(vault: Vault, space_id: str, sentence: str) -> str:
    """The record id of an external claim: the same words from any source, the same id."""
    return keyed_id(vault, space_id, "rec", "claim", claim_key(sentence))
