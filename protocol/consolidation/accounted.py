"""Whether a candidate sentence is already accounted for: consolidation never undoes the
user (issue 17). Pure: the cloud's consolidator and the device's end-of-session
consolidation hand it what they read from their own store.

The history index. Every record version yields ``history_keys``: one "words" key per
version text (whitespace and final punctuation normalised, case-folded) and one
"episode" key per source episode. A store keeps a record under the keys of EVERY
version it ever had, whatever its lifecycle: a new version adds keys and removes none,
a lifecycle change touches none; only forgetting the record removes them (with the
record). A candidate looks up ``lookup_keys`` (its words and its episode), so the
records it must be checked against are found without opening the space, and short
sentences ("I am vegan.") are found too (the subject index has no key for them).

The rule (``accounted_for``). A candidate sentence S of episode E is accounted for by
a found record R when some version of R in the user's own words (source kind
``user_statement``: the same words from a web page or an inference are another
source's, and never stand in for the user's) has S's words and

  (a) that version names E among its source episodes: the same episode's sentence was
      already made into R (by "remember this", an earlier consolidation, or a correction
      whose old or new version it is), or
  (b) E arrived no later than R's latest decision (``RecordHistory.decided_at``: the
      position of R's latest creation, new version or lifecycle change): the user
      decided about those words after saying them again.

Then nothing is written. When R still holds S (active or candidate, current text S)
the item is finished with R (``Accounted.kept``); otherwise the user corrected S away
or retracted R and the item is dropped with a reason naming R. A sentence with S's
words from an episode that arrived AFTER R's latest decision is a new statement by the
user (a restatement after a retraction, in a later conversation or the same one) and
is not accounted for: it comes back as a record, and the relation rules take it from
there. A permanently forgotten record is never found (its keys went with it); its
source episodes are destroyed, so their candidates are dropped before this check, and
the forget drops the waiting candidates that had its words too.

Positions are opaque integers handed in by the caller: on the cloud the server order
(``seq``) of the episode's arrival and of the record's events; on the device the local
clock in microseconds. Only their order within one store is compared.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from protocol.model import LifecycleState
from protocol.sentences import normalise

WORDS = "w:"
EPISODE = "e:"


def words_of(text: str) -> str:
    """The words a history key compares: normalised (``sentences.normalise``), case-folded."""
    return normalise(text).casefold()


def history_keys(text: str, episode_ids: Iterable[str]) -> list[str]:
    """The history keys one record version is kept under (before blinding)."""
    keys = [WORDS + words_of(text)]
    keys += [EPISODE + episode_id for episode_id in episode_ids]
    return sorted(set(keys))


def lookup_keys(episode_id: str, sentence: str) -> list[str]:
    """The keys under which every record a candidate must be checked against is kept."""
    return sorted({WORDS + words_of(sentence), EPISODE + episode_id})


@dataclass(frozen=True, slots=True)
class VersionHistory:
    version: int
    text: str
    episode_ids: tuple[str, ...]
    users_words: bool = True  # source kind ``user_statement`` (else it never matches)


@dataclass(frozen=True, slots=True)
class RecordHistory:
    """What the check needs of one record: its lifecycle, every version still readable
    (in version order, the current one last) and the position of its latest decision."""

    record_id: str
    lifecycle: LifecycleState
    versions: tuple[VersionHistory, ...]
    decided_at: int | None  # None: unknown (then only rule (a) applies)


@dataclass(frozen=True, slots=True)
class CandidateSentence:
    episode_id: str
    text: str
    arrived_at: int  # the position of its episode's arrival


@dataclass(frozen=True, slots=True)
class Accounted:
    record_id: str
    kept: bool  # True: R still holds the words (finish the item with R); False: drop it
    reason: str


def accounted_for(
    candidate: CandidateSentence, histories: Sequence[RecordHistory]
) -> Accounted | None:
    """The record that already accounts for ``candidate`` (see the module rule), or None.
    A record that still holds the words is preferred; ties go to the lowest record id."""
    wanted = words_of(candidate.text)
    found: list[Accounted] = []
    for history in sorted(histories, key=lambda h: h.record_id):
        if history.lifecycle is LifecycleState.FORGOTTEN or not history.versions:
            continue
        matching = [v for v in history.versions if v.users_words and words_of(v.text) == wanted]
        if not matching:
            continue
        same_episode = any(candidate.episode_id in v.episode_ids for v in matching)
        decided_later = history.decided_at is not None and (
            candidate.arrived_at <= history.decided_at
        )
        if not (same_episode or decided_later):
            continue
        found.append(_verdict(candidate, history, same_episode))
    kept = [a for a in found if a.kept]
    best = kept or found
    return best[0] if best else None


def _verdict(candidate: CandidateSentence, history: RecordHistory, same_episode: bool) -> Accounted:
    current = history.versions[-1]
    holds = words_of(current.text) == words_of(candidate.text)
    why = (
        f"the same sentence of episode {candidate.episode_id}"
        if same_episode
        else f"the same words, said before the user's latest decision on {history.record_id}"
    )
    if history.lifecycle is LifecycleState.NOT_IN_USE:
        return Accounted(
            history.record_id,
            False,
            f"{why} is record {history.record_id}, which the user took out of use",
        )
    if not holds:
        return Accounted(
            history.record_id,
            False,
            f"{why} is record {history.record_id} v{_first_with(history, candidate)}, which "
            f"the user corrected (now v{current.version})",
        )
    return Accounted(history.record_id, True, f"{why} is kept as record {history.record_id}")


def _first_with(history: RecordHistory, candidate: CandidateSentence) -> int:
    wanted = words_of(candidate.text)
    return next(v.version for v in history.versions if v.users_words and words_of(v.text) == wanted)
