"""Sentences a simulated user types, generated from a seed.

Invariants: the same seed gives the same sentences in the same order; every sentence
is unique within a generator and begins with words no other sentence shares ("My
friend <Name> ..."), so no two of them are ever "the same subject" (which would make
the newer one supersede the older) and each is a needle that can only match itself.
"""

from __future__ import annotations

import random

_SYLLABLES = (
    "ka", "lo", "mi", "ru", "te", "vo", "sa", "ne", "bi", "do",
    "fu", "ga", "hi", "jo", "pe", "qui", "ze", "wa", "yo", "xi",
)  # fmt: skip
_PLACES = (
    "Lima", "Oslo", "Quito", "Perth", "Tartu", "Bergen", "Porto", "Cork", "Graz", "Nara",
)  # fmt: skip
_PREDICATES = (
    "lives in {place}",
    "moved to {place} last spring",
    "teaches chess in {place}",
    "runs a bakery in {place}",
    "keeps bees near {place}",
    "plays the cello in {place}",
    "grows tomatoes outside {place}",
    "repairs bicycles in {place}",
)


class SentenceMaker:
    """A stream of unique, typed-looking statements drawn from ``seed``."""

    def __init__(self, seed: int | str) -> None:
        self._rng = random.Random(f"memsync sentences {seed}")
        self._names: set[str] = set()

    def _name(self) -> str:
        while True:
            parts = self._rng.randint(2, 4)
            name = "".join(self._rng.choice(_SYLLABLES) for _ in range(parts)).capitalize()
            if name not in self._names:
                self._names.add(name)
                return name

    def statement(self) -> str:
        predicate = self._rng.choice(_PREDICATES).format(place=self._rng.choice(_PLACES))
        return f"My friend {self._name()} {predicate}."
