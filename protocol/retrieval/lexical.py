"""Lexical terms: what a text contributes to the full-text index, on device and cloud.

Invariants:
- One normaliser for both sides and for index and query alike: Unicode words,
  case-folded, stop words dropped, irregular forms mapped to their base word
  (grew -> grow), then the Snowball English stemmer, then -ize verbs and -y nouns
  joined (summarize and summary share "summar").
- Relation terms (people, project, source episodes) start with "@" and never come
  out of a query, so a user's words can only ever match words.
- Blinded terms are a keyed HMAC of the term: an index holds no word in the clear,
  and one space's index key says nothing about another's.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

import snowballstemmer

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)
_STEMMER = snowballstemmer.stemmer("english")

STOP_WORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in
    into is it its itself just me more most my myself no nor not now of off on once only
    or other our ours ourselves out over own same she should so some such than that the
    their theirs them themselves then there these they this those through to too under
    until up very was we were what when where which while who whom why will with would
    you your yours yourself yourselves s t don doesn didn isn aren wasn weren ll ve re d m
    o y also still really tell know remember please
    """.split()
)

# Irregular forms the stemmer cannot join to their base word.
IRREGULAR: dict[str, str] = {
    "grew": "grow", "grown": "grow", "ran": "run", "bought": "buy", "brought": "bring",
    "went": "go", "gone": "go", "ate": "eat", "eaten": "eat", "drank": "drink",
    "drunk": "drink", "flew": "fly", "flown": "fly", "wrote": "write", "written": "write",
    "taught": "teach", "thought": "think", "caught": "catch", "sold": "sell",
    "told": "tell", "felt": "feel", "kept": "keep", "left": "leave", "met": "meet",
    "paid": "pay", "said": "say", "sent": "send", "spent": "spend", "slept": "sleep",
    "stood": "stand", "swam": "swim", "swum": "swim", "sang": "sing", "sung": "sing",
    "began": "begin", "begun": "begin", "broke": "break", "broken": "break",
    "chose": "choose", "chosen": "choose", "drove": "drive", "driven": "drive",
    "fell": "fall", "fallen": "fall", "forgot": "forget", "forgotten": "forget",
    "froze": "freeze", "frozen": "freeze", "gave": "give", "given": "give",
    "got": "get", "gotten": "get", "hid": "hide", "hidden": "hide", "knew": "know",
    "known": "know", "lost": "lose", "made": "make", "meant": "mean", "rode": "ride",
    "ridden": "ride", "rang": "ring", "rung": "ring", "rose": "rise", "risen": "rise",
    "saw": "see", "seen": "see", "shook": "shake", "shaken": "shake", "spoke": "speak",
    "spoken": "speak", "stole": "steal", "stolen": "steal", "took": "take",
    "taken": "take", "threw": "throw", "thrown": "throw", "understood": "understand",
    "woke": "wake", "woken": "wake", "wore": "wear", "worn": "wear", "won": "win",
    "built": "build", "bent": "bend", "lent": "lend", "heard": "hear", "held": "hold",
    "found": "find", "fought": "fight", "ground": "grind", "led": "lead", "lit": "light",
    "sought": "seek", "struck": "strike", "became": "become", "came": "come",
    "dug": "dig", "fed": "feed", "fled": "flee", "hung": "hang", "laid": "lay",
    "lay": "lie", "lain": "lie", "shot": "shoot", "shut": "shut", "slid": "slide",
    "spun": "spin", "stuck": "stick", "stung": "sting", "swore": "swear",
    "sworn": "swear", "swept": "sweep", "tore": "tear", "torn": "tear", "wept": "weep",
    "children": "child", "men": "man", "women": "woman", "people": "person",
    "feet": "foot", "teeth": "tooth", "mice": "mouse", "geese": "goose",
    "better": "good", "best": "good", "worse": "bad", "worst": "bad",
    "mom": "mother", "mum": "mother", "mommy": "mother", "dad": "father",
    "daddy": "father", "kids": "child", "kid": "child",
}  # fmt: skip

_VERB_SUFFIXES = ("ize", "ise", "izes", "ises", "ized", "ised", "izing", "ising")
_NOUN_SUFFIXES = ("ization", "isation", "izations", "isations")

RELATION_MARK = "@"


def words(text: str) -> list[str]:
    """Case-folded words, with a possessive or contraction tail dropped."""
    out = []
    for raw in _WORD.findall(text):
        word = raw.casefold()
        if "'" in word:
            word = word.split("'", 1)[0]
        out.append(word)
    return out


@lru_cache(maxsize=65_536)
def stem(word: str) -> str:
    """The index form of one case-folded word."""
    base = IRREGULAR.get(word, word)
    stemmed: str = _STEMMER.stemWord(base)
    if base.endswith(_VERB_SUFFIXES + _NOUN_SUFFIXES) and stemmed.endswith(("iz", "is")):
        stemmed = stemmed[:-2]  # organize, organization -> organ
    if stemmed.endswith("i") and len(stemmed) > 3 and not base.endswith(("i", "iing")):
        stemmed = stemmed[:-1]  # summary, happiness -> summar, happ (taxi stays taxi)
    return stemmed


def terms(text: str) -> list[str]:
    """The lexical terms of a text, in order, stop words dropped."""
    return [stem(w) for w in words(text) if w not in STOP_WORDS]


def relation_term(kind: str, value: str) -> str:
    """A term that links records (a person, a project, a source episode)."""
    return f"{RELATION_MARK}{kind}:{value.casefold()}"


def blind(term: str, key: bytes) -> str:
    """A keyed, index-safe stand-in for a term: 16 lower-case base32 characters."""
    digest = hmac.new(key, term.encode("utf-8"), hashlib.sha256).digest()[:10]
    return base64.b32encode(digest).decode("ascii").lower()


def blind_all(items: Iterable[str], key: bytes) -> list[str]:
    return [blind(t, key) for t in items]


def document(items: Sequence[str]) -> str:
    """Blinded terms as one space-separated document for a full-text index."""
    return " ".join(items)


def any_of(items: Iterable[str]) -> str:
    """A full-text query matching any of the blinded terms (FTS5 and tsquery alike)."""
    unique = sorted(set(items))
    return " OR ".join(unique)
