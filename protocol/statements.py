"""What one sentence the user typed says: about whom, which attribute, which value, and
the cues around it. No language model: discourse markers, contractions, possessive and
verb frames, and small lexicons.

Invariants:
- ``parse`` is a pure, deterministic function of the sentence (case, punctuation and
  curly quotes do not matter); device, cloud and consolidator read a sentence alike.
- Discourse markers ("Actually,", "No wait,", "Sorry,", "Oh and", "Correction:",
  "Scratch that,") never count as the subject: they are stripped and kept as cues.
- ``holder`` says whom the statement is about ("i" for the user, also "we"/"our");
  ``attribute`` says what about them; ``value`` is the rest, without filler words. A
  sentence with no subject of its own ("No wait, it's on the 17th.") has
  ``needs_context`` and takes holder and attribute from ``with_context``.
- Where no frame fits, ``holder`` and ``attribute`` are None: the caller must then be
  unsure, never confident (``protocol.relating``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache

USER = "i"

_CONTRACTIONS = {
    "i'm": "i am",
    "im": "i am",
    "i've": "i have",
    "i'd": "i would",
    "i'll": "i will",
    "we're": "we are",
    "we've": "we have",
    "we'll": "we will",
    "they're": "they are",
    "it's": "it is",
    "that's": "that is",
    "there's": "there is",
    "he's": "he is",
    "she's": "she is",
    "isn't": "is not",
    "aren't": "are not",
    "wasn't": "was not",
    "don't": "do not",
    "doesn't": "does not",
    "didn't": "did not",
    "can't": "cannot",
    "won't": "will not",
    "haven't": "have not",
}
_CONTRACTION_RE = re.compile(r"\b(?:" + "|".join(re.escape(c) for c in _CONTRACTIONS) + r")\b")
_POSSESSIVE_RE = re.compile(r"\b(\w+)'s\b")

# Leading discourse markers, longest first. A correction marker says "what I said before
# was wrong"; an additive one says "and also".
CORRECTION_MARKERS = (
    "no wait",
    "wait no",
    "no no",
    "scratch that",
    "let me correct that",
    "correction",
    "i meant to say",
    "i meant",
    "i mean",
    "my mistake",
    "my bad",
    "on second thought",
    "change of plans",
    "change of plan",
    "update",
    "actually",
    "sorry",
    "oops",
    "wait",
    "nope",
    "no",
)
# The ones that say plainly the user misspoke (not "actually", "sorry": those may only
# add a nuance), and "make that", which replaces the value just said.
STRONG_MARKERS = frozenset(CORRECTION_MARKERS) - {
    "on second thought",
    "change of plans",
    "change of plan",
    "update",
    "actually",
    "sorry",
} | {"make that"}
ADDITIVE_MARKERS = ("oh and also", "oh and", "and also", "oh also", "also", "plus", "and")
NEUTRAL_MARKERS = (
    "these days",
    "nowadays",
    "from now on",
    "since then",
    "lately",
    "just so you know",
    "for the record",
    "by the way",
    "please remember that",
    "remember that",
    "note that",
    "fyi",
    "btw",
    "well",
    "okay",
    "ok",
    "so",
    "hey",
    "hi",
    "hmm",
    "um",
    "uh",
    "oh",
    "anyway",
    "yes",
    "yeah",
    "right",
    "ah",
)
_ALL_MARKERS = sorted(
    {*CORRECTION_MARKERS, *ADDITIVE_MARKERS, *NEUTRAL_MARKERS}, key=lambda m: -len(m)
)
_MARKER_RE = re.compile(
    r"^(?:" + "|".join(re.escape(m) for m in _ALL_MARKERS) + r")(?:\b|(?=[,:;.!-]))[\s,:;.!\-]*"
)

# Words inside a sentence that say the value changed.
CHANGE_WORDS = frozenset(
    {
        "now",
        "anymore",
        "nowadays",
        "currently",
        "longer",  # "no longer"
        "switched",
        "changed",
        "moved",
        "instead",
        "new",
        "since",
        "lately",
    }
)
EXCEPTION_WORDS = (
    "just this once",
    "this time",
    "for today",
    "today",
    "tonight",
    "this morning",
    "this afternoon",
    "this evening",
    "for this trip",
    "this weekend",
    "just for now",
    "for once",
)
_EXCEPTION_RE = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in EXCEPTION_WORDS) + r")\b")

FILLER = frozenset(
    """a an the my our your his her their its is are was were be been am to of
    now anymore nowadays currently really actually still also too just lately these days
    any more longer new very so then at in on for with and or that this it one not never
    no last every as""".split()
)

PERSON_WORDS = frozenset(
    """
    wife husband partner spouse boyfriend girlfriend fiance fiancee friend bestie brother
    sister sibling mother father mom mum dad mama papa parent son daughter kid child baby
    cousin uncle aunt grandma grandpa grandmother grandfather granddaughter grandson
    grandparent niece nephew boss colleague coworker neighbor neighbour roommate flatmate
    mentor teammate ex stepdad stepmom stepson stepdaughter twin godson goddaughter
    mother-in-law father-in-law sister-in-law brother-in-law manager landlord landlady
    """.split()
)
# Roles a user has one of at a time ("my plumber is ..."): a new value replaces the old.
ROLE_WORDS = frozenset(
    """
    plumber dentist doctor gp therapist vet electrician hairdresser barber accountant
    lawyer landlord landlady trainer coach tutor babysitter nanny mechanic pharmacist
    optician physio physiotherapist cleaner gardener banker advisor counselor
    """.split()
)
# Attributes that can hold several values at once.
MANY_VALUED = frozenset(
    """
    allergic allergy intolerant intolerance speak language hobby interest like love enjoy
    play collect pet sibling brother sister child kid son daughter friend cousin
    instrument sport hate dislike fan grandchild grandkid niece nephew medication
    volunteer support follow watch read listen
    """.split()
)
OCCUPATIONS = frozenset(
    """
    nurse teacher engineer designer developer programmer student doctor lawyer accountant
    manager chef cook architect pharmacist dentist journalist writer artist musician
    scientist researcher consultant analyst retired retiree freelancer waiter waitress
    driver pilot farmer electrician plumber carpenter mechanic firefighter police
    officer professor lecturer librarian photographer translator editor baker barista
    cashier clerk secretary paramedic therapist vet veterinarian surgeon entrepreneur
    """.split()
)
DIETS = frozenset(
    """vegan vegetarian pescatarian carnivore keto paleo omnivore flexitarian""".split()
)
MARITAL = frozenset("""married single divorced engaged widowed separated""".split())
_NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve no zero".split()
)

_IRREGULAR = {
    "lives": "live",
    "lived": "live",
    "living": "live",
    "works": "work",
    "worked": "work",
    "working": "work",
    "grew": "grow",
    "grown": "grow",
    "moved": "move",
    "moves": "move",
    "moving": "move",
    "studied": "study",
    "studies": "study",
    "studying": "study",
    "has": "have",
    "had": "have",
    "having": "have",
    "got": "have",
    "own": "have",
    "owns": "have",
    "drinks": "drink",
    "drank": "drink",
    "eats": "eat",
    "ate": "eat",
    "likes": "like",
    "liked": "like",
    "loves": "love",
    "loved": "love",
    "enjoys": "enjoy",
    "enjoyed": "enjoy",
    "speaks": "speak",
    "spoke": "speak",
    "plays": "play",
    "played": "play",
    "drives": "drive",
    "drove": "drive",
    "goes": "go",
    "went": "go",
    "takes": "take",
    "took": "take",
    "teaches": "teach",
    "taught": "teach",
    "prefers": "prefer",
    "preferred": "prefer",
    "hates": "hate",
    "hated": "hate",
    "uses": "use",
    "used": "use",
    "wants": "want",
    "needs": "need",
    "runs": "run",
    "ran": "run",
    "children": "child",
    "kids": "kid",
    "allergies": "allergy",
    "hobbies": "hobby",
    "languages": "language",
    "people": "person",
    "wives": "wife",
    "women": "woman",
    "men": "man",
    "born": "born",
}
_MANY_VERBS = frozenset({"speak", "like", "love", "enjoy", "play", "collect", "hate", "watch"})
_VALUE_OBJECT_VERBS = frozenset({"take", "drive", "ride", "use", "wear", "prefer", "commute"})
_LOCATIVE = {
    "live": "live in",
    "stay": "live in",
    "reside": "live in",
    "move": "live in",
    "relocate": "live in",
    "work": "work at",
    "grow": "grow up in",
    "study": "study at",
}


def lemma(word: str) -> str:
    if word in _IRREGULAR:
        return _IRREGULAR[word]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@dataclass(frozen=True, slots=True)
class Statement:
    """What a sentence says, as far as frames and lexicons can tell."""

    text: str
    core: str  # lower case, contractions expanded, markers stripped, no final punctuation
    holder: str | None = None
    attribute: str | None = None
    value: tuple[str, ...] = ()
    negated: bool = False
    rejected: tuple[str, ...] = ()  # values explicitly denied: "..., not Rome"
    markers: tuple[str, ...] = ()  # leading discourse markers, as typed (folded)
    change_words: tuple[str, ...] = ()  # "now", "anymore", "switched", ...
    exception: str | None = None  # a time word that makes it a one-off ("today")
    additive: bool = False  # "also", "too", "another"
    many: bool = False  # the attribute can hold several values
    single: bool = False  # the attribute holds one value at a time
    needs_context: bool = False  # no subject of its own
    np: tuple[str, ...] = ()  # a thing's whole noun phrase ("gym membership")
    mutable: bool = False  # single-valued and ordinarily changes (where one lives)
    switch: bool = False  # "we switched plumbers": names the attribute, not the value
    follows: bool = False  # read with the subject of the sentence before it

    @property
    def framed(self) -> bool:
        return self.holder is not None and self.attribute is not None

    @property
    def strong_correction(self) -> bool:
        return any(m in STRONG_MARKERS for m in self.markers)

    @property
    def corrects(self) -> bool:
        return bool(self.markers and not self.additive) or bool(self.change_words)

    @property
    def whom(self) -> str | None:
        """The holder as one word: "brother diego" and "diego" are one person."""
        return None if self.holder is None else self.holder.split()[-1]

    @property
    def key(self) -> str | None:
        """The subject-index key of its frame (None: no frame)."""
        if not self.framed:
            return None
        assert self.attribute is not None
        # by name only: "membership" (switched) meets "membership #where", "work #as"
        # meets "work #at" (``protocol.relating`` decides whether they are one attribute)
        name = self.attribute.partition(" #")[0]
        if name.startswith("favorite"):
            name = "favorite"  # "my favourite is rooibos" meets "my favourite tea is ..."
        return f"{self.whom}|{name}"


def fold(text: str) -> str:
    """Lower case, straight quotes, contractions expanded, whitespace collapsed."""
    s = text.replace("\u2019", "'").replace("\u2018", "'").replace("`", "'").casefold()
    s = re.sub(r"[\"\u201c\u201d()\[\]]", " ", s)
    s = _CONTRACTION_RE.sub(lambda m: _CONTRACTIONS[m.group(0)], s)
    s = _POSSESSIVE_RE.sub(r"\1 's", s)
    return re.sub(r"\s+", " ", s).strip()


def strip_markers(folded: str) -> tuple[str, tuple[str, ...]]:
    """The sentence without its leading discourse markers, and the markers."""
    found: list[str] = []
    s = folded
    while True:
        m = _MARKER_RE.match(s)
        if m is None or m.end() == 0:
            break
        marker = re.sub(r"[\s,:;.!\-]+$", "", m.group(0))
        rest = s[m.end() :]
        # "no", "so", "well", "right", "yes" are markers only when punctuation follows
        # them ("No, it's ..."), so they never eat the subject of "so far" or "no one"
        punctuated = re.search(r"[,:;.!\-]", m.group(0)[len(marker) :]) is not None
        if not rest or (marker in _BARE_WORDS and not punctuated):
            break
        found.append(marker)
        s = rest
    return s, tuple(found)


# Words that judge what was said rather than say a value ("Sorry, that was wrong.")
META_WORDS = frozenset(
    """wrong right correct incorrect mistake typo true false fine ok okay good great bad
    so silly stupid confusing mess sorry oops thank thanks yes no nope please hmm wait
    actually""".split()
)
# A clause about having said something wrong, not about the world
_META_CLAUSE = re.compile(
    r"^(?:i (?:got|had) (?:that|it|this) wrong|i was wrong|i made a mistake|"
    r"i mixed (?:it|that|them) up|i misspoke|that was a typo)\b"
)
_GAVE_UP = re.compile(
    r"^(?:i|we) (?:gave up|have given up|quit|stopped|dropped|ditched|got rid of|sold|"
    r"have gone off|went off|gone off|stopped liking)\s+(.+)$"
)
_MOVED_BY_SOMEONE = re.compile(
    r"^(?:they|he|she|we|i|someone|the \w+) (?:have |has )?(?:moved|changed|rescheduled|"
    r"shifted|pushed|brought) (?:the|our|my) ([a-z' -]+?) (?:back |forward )?(?:to|until) (.+)$"
)
_HAPPENS = frozenset({"meet", "happen", "run", "take", "come", "start", "begin"})


def _singular(word: str) -> str:
    """ "gps" -> "gp", "flats" -> "flat" (a plural noun a switch names)."""
    if len(word) >= 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return lemma(word) if len(word) > 4 else word[:-1]
    return word


def _changes(clause: str) -> bool:
    """Whether a clause says its value is new ("our new landlord is ...", "... now")."""
    return bool(set(clause.split()) & CHANGE_WORDS)


_EXPLICIT_FOLLOW_UP = re.compile(r"^(?:it|that|this|which|make|change)\b")
_BARE_WORDS = frozenset({"no", "so", "well", "right", "yes", "wait"})
_FINAL = re.compile(r"[\s.!?\u2026]+$")
_CLAUSE_SPLIT = re.compile(
    r"\s*(?:[,;:]|\s-\s|\s\u2014\s|\bbut\b|\bso\b|\band\b(?=\s+(?:i|we|my|our)\b))\s*"
)
_WORD = re.compile(r"[a-z0-9][a-z0-9'\-./]*")


def _value_words(text: str) -> tuple[str, ...]:
    words = [w.strip("'.-/") for w in _WORD.findall(text)]
    out = []
    for w in words:
        if not w or w in FILLER or w == "'s":
            continue
        out.append(lemma(w) if not w[0].isdigit() else w)
    return tuple(out)


def _np_head(words: list[str]) -> tuple[str, int]:
    """The head of a short noun phrase at the start of ``words`` (skipping "new",
    "current", "favorite" kept), and how many words it spans."""
    skip = {"new", "current", "old", "usual", "regular", "main", "only", "little", "big"}
    i = 0
    while i < len(words) and words[i] in skip:
        i += 1
    if i >= len(words):
        return "", i
    if words[i] in ("favorite", "favourite") and i + 1 < len(words):
        # "favorite color", "favorite ice cream flavor": up to the verb
        j = i + 1
        while j < len(words) and words[j] not in ("is", "are", "was", "'s", "has"):
            j += 1
        return "favorite " + " ".join(lemma(w) for w in words[i + 1 : j]), j
    # "cousin lena", "best friend", "wifi password"
    j = i + 1
    if words[i] == "best" and j < len(words):
        j += 1
    while j < len(words) and j - i < 3 and not _ends_np(words, j):
        j += 1
    return " ".join(lemma(w) for w in words[i:j]), j


def _ends_np(words: list[str], j: int) -> bool:
    """Whether a noun phrase ends before ``words[j]``: a verb, a preposition, or a word in
    -s that a preposition or determiner follows ("our choir rehearses on ...")."""
    w = words[j]
    if w in _VERBISH or w in _PREPOSITIONS:
        return True
    after = words[j + 1] if j + 1 < len(words) else ""
    return w.endswith("s") and after in (_PREPOSITIONS | _DETERMINERS)


_ADVERBS = frozenset(
    """also still now actually really just currently usually no longer never not do does
    did originally basically mostly finally recently probably normally always""".split()
)
_MOVED_VERBS = frozenset("moved changed switched shifted rescheduled got moves changes".split())
_PRONOUNS = frozenset("i we you he she they me us him them".split())
_PARTICIPLES_IRREGULAR = frozenset(
    """been gone got begun left quit taken given become grown done made seen forgotten
    written eaten broken chosen known sold bought found lost met kept""".split()
)
_DETERMINERS = frozenset("the a an my our his her their every each this that".split())
_VERBISH = frozenset(
    """is are was were will 's has have had lives lived works worked live work moved
    called named does do did can could would should might must got gets just now also
    still never always usually often isn't meets met lands landed starts started begins
    ends ended opens closes renews expires leaves left arrives departs runs goes plays
    teaches costs takes needs wants likes loves hates prefers drives rides sits stays
    comes visits calls belongs happens finishes sleeps eats drinks speaks studies
    sings lies stands hangs say says said think thinks thought know knows feel feels
    seem seems look looks""".split()
)
# A thing's predicate after a copula: a participle, then where or when it is
_PARTICIPLES = frozenset(
    """booked scheduled set planned moved held parked moored kept stored located hidden
    happening due pencilled penciled arranged coming arriving visiting going leaving
    starting landing flying""".split()
)
_PREPOSITIONS = frozenset(
    "at in on under by near for from until inside behind beside next outside to into".split()
)
_TEMPORAL = re.compile(
    r"\b(?:\d{1,2}(?::\d{2})?\s*(?:am|pm)|\d{1,2}:\d{2}|\d+(?:st|nd|rd|th)|noon|midnight|"
    r"tomorrow|tonight|today|morning|afternoon|evening|weekend|weekday|week|month|year|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|mondays|tuesdays|"
    r"wednesdays|thursdays|fridays|saturdays|sundays|january|february|march|april|may|"
    r"june|july|august|september|october|november|december|o'clock|half past|quarter)\b"
)
# Heads too general to name a thing alone ("phone number" is not "employee number")
GENERIC_HEADS = frozenset(
    """number name date address day time size type color colour level code password
    email account plan place spot id""".split()
)
# Single-valued attributes whose value ordinarily changes: the newer statement replaces
# the older even with no cue. Any other single-valued attribute (a birthday, a blood
# type, where one grew up) cannot change, so two values without a cue are a conflict.
MUTABLE_ATTRIBUTES = frozenset(
    {
        "live in",
        "work #at",
        "work #as",
        "diet",
        "marital status",
        "age",
        "drive",
        "car",
        "phone",
        "email",
        "weight",
    }
)


def _frame_clause(clause: str) -> Statement | None:
    """A frame for one clause, or None."""
    w = clause.split()
    if not w:
        return None
    neg = bool(re.search(r"\b(?:not|never|no longer|nobody|none)\b", clause))
    # --- subjectless: "it is on the 17th", "make that thursday", "the 17th" ---------
    if re.match(
        r"^(?:it|that|this|which)\s+(?:is|was|will be|should be|would be|'s)\b", clause
    ) or (re.match(r"^(?:make (?:it|that)|change (?:it|that) to|it should say)\b", clause)):
        rest = re.sub(
            r"^(?:it|that|this|which)\s+(?:is|was|will be|should be|would be|'s)\s*"
            r"|^(?:make (?:it|that)|change (?:it|that) to|it should say)\s*",
            "",
            clause,
        )
        value = _value_words(rest)
        if set(value) <= META_WORDS:
            # "that was wrong", "it is fine": about what was said, no value of its own
            return Statement(text=clause, core=clause, negated=neg)
        return Statement(text=clause, core=clause, value=value, negated=neg, needs_context=True)
    # --- "allergic to kiwi too": the user's, with "i am" left out --------------------
    if re.match(r"^(?:allergic|intolerant) to\b", clause):
        return _verb_frame("am " + clause, neg, clause)
    # --- "my name is", "call me", "i go by" ------------------------------------------
    m = re.match(r"^(?:my name is|call me|i go by|i am called|my name 's)\s+(.+)$", clause)
    if m:
        return _st(clause, USER, "name", m.group(1), neg, single=True)
    # --- "my|our <np> ...", "the <np> ...": a person, or a thing of the user's -------
    m = re.match(r"^(?:my|our|the)\s+(.+)$", clause)
    if m:
        parts = m.group(1).split()
        head, n = _np_head(parts)
        tail = parts[n:]
        if head:
            first = head.split()[0]
            if first in PERSON_WORDS:
                return _person_frame(clause, head, tail, neg)
            if tail and tail[0] == "'s" and len(tail) > 1:
                # "our cat's vet is ...", "my car's insurance renews ..."
                owned, k = _np_head(tail[1:])
                if owned:
                    head, tail = f"{head} {owned}", tail[1 + k :]
            found = _thing_frame(clause, head, tail, neg)
            if found is not None:
                return found
    # --- "autumn is my favourite season", "sofie isn't my manager": value, then what --
    m = re.match(r"^(.+?)\s+(?:is|are|was)\s+(?:not\s+)?(?:my|our)\s+(.+)$", clause)
    if m and len(m.group(1).split()) <= 4 and m.group(1).split()[0] not in _NOT_NAMES:
        said = m.group(2).split()
        head, n = _np_head([w for w in said if w not in ("anymore", "now", "still")])
        if head and n >= len([w for w in said if w not in ("anymore", "now", "still")]):
            if head.split()[0] in PERSON_WORDS:
                return _st(clause, head, "is", m.group(1), neg)
            return _thing_frame(clause, head, ["is", *m.group(1).split()], neg)
    # --- "elin's swimming lessons are on tuesdays": a named person's thing -----------
    m = re.match(r"^([a-z][a-z-]+) 's\s+(.+)$", clause)
    if m and m.group(1) not in _NOT_NAMES:
        parts = m.group(2).split()
        head, n = _np_head(parts)
        if head:
            sub = _thing_frame(clause, head, parts[n:], neg)
            if sub is not None:
                return replace(sub, holder=m.group(1))
    # --- "they moved the wedding to granada": someone changed a thing's time or place -
    m = _MOVED_BY_SOMEONE.match(clause)
    if m:
        head, _n = _np_head(m.group(1).split())
        if head:
            out = _thing_frame(clause, head, ["is", "at", *m.group(2).split()], neg)
            if out is not None:
                return replace(out, change_words=("moved",))
    # --- "book club is on wednesdays now": a thing named without "the" or "my" --------
    m = re.match(r"^([a-z][a-z-]+(?: [a-z][a-z-]+)?) (is|are) (.+)$", clause)
    if m and not set(m.group(1).split()) & (_NOT_NAMES | _VERBISH | _PRONOUNS):
        head, n = _np_head(m.group(1).split())
        if head and n == len(m.group(1).split()) and head.split()[0] not in PERSON_WORDS:
            found = _thing_frame(clause, head, [m.group(2), *m.group(3).split()], neg)
            if found is not None and len(m.group(1).split()) == 2:
                return found
    # --- "<name> works as ...": someone the user named before ------------------------
    m = re.match(r"^([a-z][a-z'-]+)\s+(.+)$", clause)
    if (
        m
        and m.group(1) not in _NOT_NAMES
        and (
            m.group(2).split()[0] in _VERBISH
            or m.group(2).startswith(("no longer", "never", "now"))
        )
    ):
        sub = _verb_frame(m.group(2), neg)
        if sub is not None and sub.attribute is not None:
            return replace(sub, holder=m.group(1), text=clause, core=clause)
    # --- "i|we ..." ---------------------------------------------------------------
    m = re.match(r"^(?:i|we)\s+(.+)$", clause)
    if m:
        return _verb_frame(m.group(1), neg, clause)
    # --- a value alone: "the 5th", "at ada's house", "gate c4" -------------------------
    words = clause.split()
    if len(words) <= 4 and not (set(words) - {"'s"}) & (_VERBISH | _PRONOUNS):
        value = _value_words(clause)
        if value and not set(value) <= META_WORDS:
            return Statement(text=clause, core=clause, value=value, negated=neg, needs_context=True)
    return None


_NOT_NAMES = frozenset(
    """i we you he she they it this that there here what who when where why how a an the
    my our your his her their its no yes not so and but or if then also just please
    thanks thank ok okay sorry actually well oh hey hi is are was were do does did can
    let lets let's maybe today tomorrow yesterday everyone someone nobody""".split()
)


def _person_frame(clause: str, head: str, tail: list[str], neg: bool) -> Statement | None:
    """ "my sister lives in oslo", "my cousin lena is a nurse", "my sister's name is ana"."""
    if not tail:
        return None
    if tail[0] == "'s" and len(tail) > 2 and tail[2] in ("is", "are", "was"):
        return _st(clause, head, lemma(tail[1]), " ".join(tail[3:]), neg, single=True)
    if tail[0] == "'s" and len(tail) > 1:
        # "my wife's car is a white peugeot": a thing of theirs
        owned, k = _np_head(tail[1:])
        if owned:
            sub = _thing_frame(clause, owned, tail[1 + k :], neg)
            if sub is not None:
                return replace(sub, holder=head)
    if tail[0] in ("is", "are", "was", "'s", "were"):
        # what the person is; a number is their age ("my daughter is 6")
        if tail[1:2] and (tail[1].isdigit() or tail[1] in _NUMBER_WORDS):
            return _st(clause, head, "age", tail[1], neg, single=True)
        return _st(clause, head, "is", " ".join(tail[1:]), neg)
    sub = _verb_frame(" ".join(tail), neg)
    if sub is not None and sub.attribute is None and len(tail) > 1 and tail[1] in _PREPOSITIONS:
        # "my sister ola lands at gate b12": where or when they do it
        kind = _where_or_when(tail[1:])
        return _st(clause, head, f"{lemma(tail[0])} #{kind}", " ".join(tail[2:]), neg, single=True)
    if sub is not None:
        return replace(sub, holder=head, text=clause, core=clause)
    return _st(clause, head, lemma(tail[0]), " ".join(tail[1:]), neg)


def _thing_frame(clause: str, head: str, tail: list[str], neg: bool) -> Statement | None:
    """A thing of the user's and what is said of it: its value ("our plumber is dave"),
    its name ("the boat is called ..."), where or when it is ("the play is on the 7th",
    "the key is in the lockbox"), or what it does ("the club meets on thursdays")."""
    if not tail:
        return None
    np = tuple(head.split())
    copulas = ("is", "are", "was", "were", "'s", "will")
    if tail[0] in _PREPOSITIONS:
        # "the deposit for the flat is 900 pounds": the phrase belongs to the thing
        at = next((i for i, w in enumerate(tail[:6]) if w in copulas), None)
        if at is None:
            return None
        named = np
        np = np + tuple(lemma(w) for w in tail[1:at] if w not in FILLER)
        tail = tail[at:]
        return _thing_frame_of(clause, named, np, tail, neg)
    return _thing_frame_of(clause, np, np, tail, neg)


def _thing_frame_of(
    clause: str, named: tuple[str, ...], np: tuple[str, ...], tail: list[str], neg: bool
) -> Statement | None:
    """``_thing_frame`` once the noun phrase is known: ``named`` is its head phrase (what
    the attribute is named by), ``np`` the whole of it."""
    copulas = ("is", "are", "was", "were", "'s", "will")
    verb = tail[0]
    rest = tail[1:]
    skip = {"be", "now", "still", "not", "no", "longer", "actually", "currently", "usually",
            "always", "never", "normally"}  # fmt: skip
    while rest and rest[0] in skip:
        rest = rest[1:]
    if verb in ("starts", "start", "begins", "begin", "kicks") and _where_or_when(rest) == "when":
        # "the party starts at 8": when it is
        rest = rest[1:] if rest[:1] == ["off"] else rest
        return _thing(clause, named, "when", rest, neg, single=True, whole=np)
    if verb in _MOVED_VERBS and rest:
        # "my yoga class moved to friday mornings": its time or place changed
        rest = rest[1:] if rest[0] in ("to", "into", "over") else rest
        out = _thing(clause, named, _where_or_when(["at", *rest]), rest, neg, single=True, whole=np)
        return replace(out, change_words=("moved",))
    if verb in copulas:
        if rest and rest[0] in ("called", "named"):
            return _thing(clause, named, "name", rest[1:], neg, single=True, whole=np)
        while rest and rest[0] in _PARTICIPLES:
            rest = rest[1:]
        if rest and rest[0] in _PREPOSITIONS:
            return _thing(clause, named, _where_or_when(rest), rest, neg, single=True, whole=np)
        many = any(lemma(x) in MANY_VALUED for x in np) and np[0] not in ("favorite", "best")
        return _thing(clause, named, "", rest, neg, single=not many, many=many, whole=np)
    if verb in _VERBISH or verb.endswith("s"):
        kind = lemma(verb)
        if rest and rest[0] in _PREPOSITIONS:
            where = _where_or_when(rest)
            # "the club meets on tuesdays" is when the club is
            kind = where if kind in _HAPPENS else f"{kind} {where}"
        return _thing(clause, named, kind, rest, neg, single=True, whole=np)
    return None


def _where_or_when(rest: list[str]) -> str:
    """ "when" if the phrase after the preposition names a time, else "where" ("at Tobi's
    house this month" is a place)."""
    return "when" if _TEMPORAL.search(" ".join(rest[:4])) else "where"


def _thing(
    clause: str,
    np: tuple[str, ...],
    kind: str,
    rest: list[str],
    neg: bool,
    *,
    single: bool = False,
    many: bool = False,
    whole: tuple[str, ...] = (),
) -> Statement:
    """The frame of a thing: the attribute is its head noun (two words when the head is
    generic) and what is said of it; the statement keeps the whole noun phrase
    (``whole``, else ``np``)."""
    # the head noun names it ("phone number" and "my number" meet; the whole noun
    # phrase, kept on the statement, keeps "phone number" from "employee number")
    name = np[-1] if not np[0].startswith("favorite") else " ".join(np)
    attribute = f"{name} #{kind}" if kind else name
    out = _st(clause, USER, attribute, " ".join(rest), neg, single=single, many=many)
    mutable = np[0] == "favorite" or bool(set(np) & ROLE_WORDS) or np[-1] in MUTABLE_ATTRIBUTES
    return replace(out, np=whole or np, mutable=mutable and not out.many)


def _st(
    clause: str,
    holder: str,
    attribute: str,
    value: str,
    neg: bool,
    *,
    single: bool = False,
    many: bool = False,
) -> Statement:
    attribute = attribute.strip()
    if not many and not single:
        many = any(lemma(a) in MANY_VALUED for a in attribute.split())
        if many and attribute.startswith(("favorite", "name", "best")):
            many = False  # one's favourite, one's best friend
    single = single and not many
    return Statement(
        text=clause,
        core=clause,
        holder=holder,
        attribute=attribute,
        value=_value_words(value),
        negated=neg,
        many=many and not single,
        single=single,
        mutable=single and (attribute in MUTABLE_ATTRIBUTES or attribute.startswith("number of")),
    )


def _verb_frame(rest: str, neg: bool, clause: str | None = None) -> Statement | None:
    """The frame of "<verb> ..." after "i"/"we" (or a person: "lives in oslo")."""
    clause = clause or rest
    w = [x for x in rest.split() if x not in _ADVERBS]
    if (
        len(w) > 1
        and w[0] in ("have", "has", "had", "'ve")
        and (w[1].endswith("ed") or w[1] in _PARTICIPLES_IRREGULAR)
    ):
        w = w[1:]  # "we've moved to ...": the verb is the participle
    if not w:
        return None
    # "am/is/are ..."
    if w[0] in ("am", "is", "are", "was", "were", "'s"):
        tail = w[1:]
        text = " ".join(tail)
        if set(tail) & {"kilos", "kg", "kilograms", "pounds", "lbs", "stone"} and (
            not tail or tail[0] in ("down", "up", "at") or tail[0][0].isdigit()
        ):
            return _st(clause, USER, "weight", " ".join(tail), neg, single=True)
        if "tall" in tail[1:3]:
            return _st(clause, USER, "height", " ".join(tail), neg, single=True)
        if tail and tail[0] in ("allergic", "intolerant"):
            return _st(clause, USER, "allergic to", " ".join(tail[2:]), neg, many=True)
        if (
            tail
            and (tail[0].isdigit() or tail[0] in _NUMBER_WORDS)
            and (len(tail) == 1 or tail[1] in ("years", "year"))
        ):
            return _st(clause, USER, "age", tail[0], neg, single=True)
        words = set(tail)
        if words & DIETS:
            return _st(clause, USER, "diet", text, neg, single=True)
        if words & MARITAL:
            return _st(clause, USER, "marital status", text, neg, single=True)
        if tail and tail[0] in ("a", "an") and len(tail) > 1:
            noun = tail[-1] if len(tail) <= 3 else tail[1]
            if set(tail[1:]) & OCCUPATIONS:
                return _st(clause, USER, "work #as", text, neg, single=True)
            return _st(clause, USER, "is a " + lemma(noun), text, neg, many=True)
        if tail and tail[0] in OCCUPATIONS:
            return _st(clause, USER, "work #as", text, neg, single=True)
        if tail and tail[0] in ("from",):
            return _st(clause, USER, "from", " ".join(tail[1:]), neg, single=True)
        if tail and tail[0] in ("based", "living", "staying"):
            return _st(clause, USER, "live in", " ".join(tail[2:]), neg, single=True)
        if tail and tail[0] == "working":
            return _st(clause, USER, "work #at", " ".join(tail[1:]), neg, single=True)
        if tail and tail[0] in ("learning", "studying", "reading", "watching", "training"):
            return _st(clause, USER, lemma(tail[0].removesuffix("ing")), " ".join(tail[1:]), neg,
                       many=True)  # fmt: skip
        if tail:
            return _st(clause, USER, "is " + tail[0], " ".join(tail[1:]), neg)
        return None
    verb = lemma(w[0])
    tail = w[1:]
    if verb in ("turn", "turned") and tail and (tail[0].isdigit() or tail[0] in _NUMBER_WORDS):
        return _st(clause, USER, "age", tail[0], neg, single=True)  # "i turned 35"
    if set(tail) & MARITAL and verb in ("have", "get", "got", "become", "became"):
        # "i got engaged in june"
        return _st(clause, USER, "marital status", " ".join(x for x in tail if x in MARITAL),
                   neg, single=True)  # fmt: skip
    if set(tail) & DIETS and verb in ("go", "become", "turn", "went", "became", "turned"):
        # "i went vegan in the spring"
        return _st(clause, USER, "diet", " ".join(x for x in tail if x in DIETS), neg,
                   single=True)  # fmt: skip
    if verb == "was" and tail and tail[0] == "born":
        prep = tail[1] if len(tail) > 1 else ""
        return _st(clause, USER, f"born {prep}".strip(), " ".join(tail[2:]), neg, single=True)
    if verb in ("weigh", "weighed"):
        return _st(clause, USER, "weight", " ".join(tail), neg, single=True)
    moved_thing = (
        verb == "move"
        and bool(tail)
        and tail[0]
        not in _PREPOSITIONS | {"back", "out", "in", "away", "abroad", "here", "there", "home"}
    )
    if moved_thing or verb in ("switch", "switched", "change", "changed", "swap", "swapped",
                "replace", "replaced", "fire", "fired", "dump", "dumped", "got", "find",
                "found", "hire", "hired"):  # fmt: skip
        # "we switched plumbers", "i changed dentists", "we got a new vet"
        objs = [x for x in tail if x not in ("our", "my", "a", "an", "the", "new")]
        named, k = _np_head(objs)
        if named and objs[0] not in _NOT_NAMES:
            # the attribute it names, whatever it is ("we switched hiding places", "we
            # changed the wifi password to ...")
            np = tuple(_singular(w) for w in named.split())
            head = "work" if np[-1] in ("job", "employer", "company") else np[-1]
            head = "live in" if head in ("house", "home") and verb == "move" else head
            after = objs[k:]
            after = after[1:] if after[:1] == ["to"] else after
            return Statement(
                text=clause, core=clause, holder=USER, attribute=head,
                value=_value_words(" ".join(after)), negated=neg, single=True,
                change_words=("switched",), switch=True, mutable=True, np=np,
            )  # fmt: skip
    if verb in _LOCATIVE:
        preps = ("in", "at", "for", "near", "on", "to", "into", "back", "up", "out", "from", "with")
        i = 0
        while i < len(tail) and tail[i] in preps:
            i += 1
        attribute = _LOCATIVE[verb]
        if verb == "work":
            # where one works, or as what ("i work as a radiographer")
            kind = "#as" if tail[:1] == ["as"] else "#at"
            return _st(clause, USER, f"work {kind}", " ".join(tail[i:]), neg, single=True)
        if verb == "study" and tail[:1] not in (["at"], ["in"]):
            return _st(clause, USER, "study", " ".join(tail), neg, many=True)
        out = _st(clause, USER, attribute, " ".join(tail[i:]), neg, single=True)
        if verb in ("move", "relocate"):
            out = replace(out, change_words=("moved",))
        return out
    if verb == "have" and tail:
        det = tail[0]
        if det.isdigit() or det in _NUMBER_WORDS:
            noun = lemma(tail[1]) if len(tail) > 1 else ""
            return _st(clause, USER, f"number of {noun}", det, neg, single=True)
        objs = [x for x in tail if x not in ("a", "an", "the", "another", "some", "new")]
        if objs:
            if objs[0] in ("allergy", "allergies") and "to" in objs:
                return _st(clause, USER, "allergic to", " ".join(objs[objs.index("to") + 1 :]),
                           neg, many=True)  # fmt: skip
            return _st(clause, USER, "have " + lemma(objs[0]), " ".join(objs[1:]), neg,
                       many=True)  # fmt: skip
    if verb in _MANY_VERBS:
        return _st(clause, USER, verb, " ".join(tail), neg, many=True)
    if verb in ("keep", "leave", "store", "park", "put", "hide") and tail:
        # "we keep the spare key under the flowerpot": where that thing is
        objs = [x for x in tail if x not in ("my", "our", "a", "an", "the")]
        at = next((i for i, x in enumerate(objs) if x in _PREPOSITIONS), None)
        if at:
            head, _n = _np_head(objs[:at])
            if head:
                return _thing(clause, tuple(head.split()), "where", objs[at:], neg, single=True)
    if verb == "drive" and tail and tail[0] not in ("to", "into", "home", "back"):
        # "i drive an old saab": what car one has
        objs = [x for x in tail if x not in ("a", "an", "the", "my", "our")]
        return _thing(clause, ("car",), "", objs, neg, single=True)
    if verb in ("drink", "eat", "take", "drive", "ride", "use", "prefer", "go", "wear",
                "bike", "walk", "run", "commute", "cook", "sleep", "wake", "get"):  # fmt: skip
        # "i drink my coffee iced", "i go swimming every tuesday": verb + object head;
        # "i take the bus", "i drive a honda": the object is the value
        objs = [x for x in tail if x not in ("my", "our", "a", "an", "the", "to")]
        if verb in _VALUE_OBJECT_VERBS and not (tail and tail[0] in ("my", "our")):
            return _st(clause, USER, verb, " ".join(objs), neg)
        if objs:
            return _st(clause, USER, f"{verb} {lemma(objs[0])}", " ".join(objs[1:]), neg)
        return _st(clause, USER, verb, "", neg)
    if tail and tail[0] in ("with", "at", "for", "to", "from", "by") and len(tail) > 1:
        # "i bank with monzo", "i shop at lidl": the verb and its preposition
        return _st(clause, USER, f"{verb} {tail[0]}", " ".join(tail[1:]), neg)
    # any other verb: who it is about is known, the attribute is not (the generic
    # same-beginning rule of ``protocol.subjects`` decides)
    return Statement(text=clause, core=clause, holder=USER, value=_value_words(rest), negated=neg)


@lru_cache(maxsize=8192)
def parse(text: str) -> Statement:
    """What ``text`` says (see the module's invariants). Cached: it is pure, and a
    write reads the same sentences for its keys, its lookup and its relations."""
    folded = _FINAL.sub("", fold(text))
    core, markers = strip_markers(folded)
    core = re.sub(r"\b(?:actually|honestly|really)\b\s*,?\s*", "", core).strip()
    inner_markers = tuple(
        m for m in ("actually", "i meant") if re.search(rf"\b{m}\b", folded) and m not in markers
    )
    markers = markers + inner_markers
    if re.match(r"^(?:make (?:it|that)|change (?:it|that) to)\b", core) and not (
        _EXCEPTION_RE.search(core)
    ):
        # "make that thursday" replaces; "make it decaf today" is a one-off
        markers = (*markers, "make that")
    change = tuple(
        sorted(
            {w for w in re.findall(r"[a-z]+", core) if w in CHANGE_WORDS}
            | ({"anymore"} if "any more" in core else set())
            | ({"used to"} if re.search(r"\bused to\b", core) else set())
        )
    )
    additive = bool(
        any(m in ADDITIVE_MARKERS for m in markers)
        or re.search(r"\b(?:also|too|as well|another|as well as|besides)\b", core)
    )
    exc = _EXCEPTION_RE.search(core)
    clauses = [c for c in _CLAUSE_SPLIT.split(core) if c and not _META_CLAUSE.match(c)]
    rejected: list[str] = []
    frames: list[Statement] = []
    for clause in clauses:
        m = re.match(r"^(?:and\s+)?(?:not|rather than|instead of)\s+(.+)$", clause)
        if m and frames:
            rejected.extend(_value_words(m.group(1)))
            continue
        m = _GAVE_UP.match(clause)
        if m:
            # "i gave up spanish, i'm learning italian now": what is no longer so
            rejected.extend(_value_words(m.group(1)))
            continue
        inner = re.search(r"\b(?:instead of|rather than)\s+(.+)$", clause)
        if inner:
            rejected.extend(_value_words(inner.group(1)))
            clause = clause[: inner.start()].strip()
        frame = _frame_clause(clause)
        if frame is not None:
            frames.append(frame)
    framed = [f for f in frames if f.framed]
    opens_with_value = (
        clauses
        and frames
        and frames[0].text == clauses[0]
        and frames[0].needs_context
        and (bool(markers) or clauses[0].startswith(("it ", "that ", "make ", "change ")))
    )
    if opens_with_value:
        # it opens with a value and no subject ("no, the 5th, the garage called back"):
        # a follow-up of what was just said; the clauses after it explain it
        framed = []
    # the clause that says a value of its own wins over one that only names what changed
    # ("we switched plumbers, our plumber is rita now")
    chosen: Statement | None = next(
        (f for f in framed if f.value and not f.negated and _changes(f.text)),
        next(
            (f for f in framed if f.value and not f.negated),
            next((f for f in framed if f.value), framed[0] if framed else None),
        ),
    )
    switched = next((f for f in framed if f.switch), None)
    if switched is not None and not switched.value:
        # "i changed cars, i drive a skoda now": what changed is the switch's attribute,
        # its new value the next clause's
        said = next((f.value for f in frames if f is not switched and f.value), ())
        chosen = replace(switched, value=said) if said else switched
    if chosen is not None and not chosen.negated:
        # "sofie isn't my manager anymore, my manager is erik": the denied value
        for f in framed:
            if f.negated and f.key == chosen.key:
                rejected.extend(f.value)
    later = [f for f in frames if f.needs_context and f.value]
    if chosen is not None and not chosen.value and later:
        # "we switched plumbers, it is rita osei now": the value from a subjectless clause
        chosen = replace(chosen, value=later[0].value)
    elif chosen is not None and chosen.negated and later:
        # "the boat is not at långedrag anymore, it is in the dry dock": denied, then said
        rejected.extend(chosen.value)
        chosen = replace(chosen, value=later[0].value, negated=False)
    if chosen is None:
        sub = next((f for f in frames if f.needs_context), None)
        if sub is not None and not (markers or _EXPLICIT_FOLLOW_UP.match(sub.text)):
            # a bare value with no cue ("Keep this other one.", "Thanks!") follows nothing
            sub = replace(sub, needs_context=False)
        if sub is not None:
            chosen = sub
        elif not frames:
            # a bare value: "the 17th", "thursday", "oslo, not rome"
            bare = _value_words(clauses[0] if clauses else core)
            chosen = Statement(
                text=text, core=core, value=bare,
                needs_context=bool(markers) and not set(bare) <= META_WORDS,
            )  # fmt: skip
        else:
            chosen = frames[0]
    negated = chosen.negated
    value = chosen.value
    # "... in oslo, not rome" / "... not rome but oslo": split the affirmed from the denied
    m = re.search(r"\bnot\s+([a-z0-9' -]+?)\s+but\s+(.+)$", core)
    if m:
        rejected.extend(_value_words(m.group(1)))
        negated = False
    if rejected and negated and not m:
        negated = bool(re.search(r"\b(?:not|never|no longer)\b", clauses[0] if clauses else ""))
    return replace(
        chosen,
        text=text,
        core=core,
        value=tuple(v for v in value if v not in rejected),
        negated=negated,
        rejected=tuple(rejected),
        markers=markers,
        change_words=tuple(sorted({*change, *chosen.change_words})),
        exception=exc.group(0) if exc else None,
        additive=additive and not (set(markers) & STRONG_MARKERS),
    )


def with_context(statement: Statement, context: Statement) -> Statement:
    """A subjectless statement read with the subject of the sentence before it."""
    if not statement.needs_context or not context.framed:
        return statement
    return replace(
        statement,
        holder=context.holder,
        attribute=context.attribute,
        many=context.many,
        single=context.single,
        mutable=context.mutable,
        np=context.np,
        needs_context=False,
        follows=True,
    )


def needs_context(text: str) -> bool:
    """Whether ``text`` has no subject of its own (it takes the previous sentence's)."""
    return parse(text).needs_context
