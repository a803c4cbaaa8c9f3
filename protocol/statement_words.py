"""The tables of words behind reading a statement: contractions, discourse markers,
change and exception cues, filler, people and roles, many- and single-valued
attributes, verbs, prepositions and the patterns built from them; and ``lemma``.

Invariants:
- Data only (and ``lemma``, a pure function of one word): nothing here reads a
  sentence; ``protocol.statement_frames`` and ``protocol.statements`` do.
- Every word is lower case and folded as ``statements.fold`` folds a sentence
  (straight quotes, contractions expanded), so a table is matched as it stands.
"""

from __future__ import annotations

import re

USER = "i"

CONTRACTIONS = {
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

CONTRACTION_RE = re.compile(r"\b(?:" + "|".join(re.escape(c) for c in CONTRACTIONS) + r")\b")

POSSESSIVE_RE = re.compile(r"\b(\w+)'s\b")

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

ALL_MARKERS = sorted(
    {*CORRECTION_MARKERS, *ADDITIVE_MARKERS, *NEUTRAL_MARKERS}, key=lambda m: -len(m)
)

MARKER_RE = re.compile(
    r"^(?:" + "|".join(re.escape(m) for m in ALL_MARKERS) + r")(?:\b|(?=[,:;.!-]))[\s,:;.!\-]*"
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

# a change that starts now and lasts ("from today on", "as of today", "starting tonight"):
# never a one-off, whatever time word it names
LASTING_FROM = re.compile(
    r"\b(?:from|as of|starting(?: from)?|beginning)\s+(?:today|tonight|now|this \w+)(?:\s+on)?\b"
)

EXCEPTION_RE = re.compile(r"\b(?:" + "|".join(re.escape(w) for w in EXCEPTION_WORDS) + r")\b")

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

NUMBER_WORDS = frozenset(
    "one two three four five six seven eight nine ten eleven twelve no zero".split()
)

IRREGULAR = {
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

MANY_VERBS = frozenset({"speak", "like", "love", "enjoy", "play", "collect", "hate", "watch"})

VALUE_OBJECT_VERBS = frozenset({"take", "drive", "ride", "use", "wear", "prefer", "commute"})

LOCATIVE = {
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
    if word in IRREGULAR:
        return IRREGULAR[word]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


# Words that judge what was said rather than say a value ("Sorry, that was wrong.")
META_WORDS = frozenset(
    """wrong right correct incorrect mistake typo true false fine ok okay good great bad
    so silly stupid confusing mess sorry oops thank thanks yes no nope please hmm wait
    actually""".split()
)

# A clause about having said something wrong, not about the world
META_CLAUSE = re.compile(
    r"^(?:i (?:got|had) (?:that|it|this) wrong|i was wrong|i made a mistake|"
    r"i mixed (?:it|that|them) up|i misspoke|that was a typo)\b"
)

GAVE_UP = re.compile(
    r"^(?:i|we) (?:gave up|have given up|quit|stopped|dropped|ditched|got rid of|sold|"
    r"have gone off|went off|gone off|stopped liking)\s+(.+)$"
)

MOVED_BY_SOMEONE = re.compile(
    r"^(?:they|he|she|we|i|someone|the \w+) (?:have |has )?(?:moved|changed|rescheduled|"
    r"shifted|pushed|brought) (?:the|our|my) ([a-z' -]+?) (?:back |forward )?(?:to|until) (.+)$"
)

HAPPENS = frozenset({"meet", "happen", "run", "take", "come", "start", "begin"})

EXPLICIT_FOLLOW_UP = re.compile(r"^(?:it|that|this|which|make|change)\b")

BARE_WORDS = frozenset({"no", "so", "well", "right", "yes", "wait"})

FINAL = re.compile(r"[\s.!?\u2026]+$")

CLAUSE_SPLIT = re.compile(
    r"\s*(?:[,;:]|\s-\s|\s\u2014\s|\bbut\b|\bso\b|\band\b(?=\s+(?:i|we|my|our)\b))\s*"
)

WORD = re.compile(r"[a-z0-9][a-z0-9'\-./]*")

ADVERBS = frozenset(
    """also still now actually really just currently usually no longer never not do does
    did originally basically mostly finally recently probably normally always""".split()
)

MOVED_VERBS = frozenset("moved changed switched shifted rescheduled got moves changes".split())

PRONOUNS = frozenset("i we you he she they me us him them".split())

PARTICIPLES_IRREGULAR = frozenset(
    """been gone got begun left quit taken given become grown done made seen forgotten
    written eaten broken chosen known sold bought found lost met kept""".split()
)

DETERMINERS = frozenset("the a an my our his her their every each this that".split())

VERBISH = frozenset(
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
PARTICIPLES = frozenset(
    """booked scheduled set planned moved held parked moored kept stored located hidden
    happening due pencilled penciled arranged coming arriving visiting going leaving
    starting landing flying""".split()
)

PREPOSITIONS = frozenset(
    "at in on under by near for from until inside behind beside next outside to into "
    "over during after before since through throughout around across within".split()
)

TEMPORAL = re.compile(
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

NOT_NAMES = frozenset(
    """i we you he she they it this that there here what who when where why how a an the
    my our your his her their its no yes not so and but or if then also just please
    thanks thank ok okay sorry actually well oh hey hi is are was were do does did can
    let lets let's maybe today tomorrow yesterday everyone someone nobody""".split()
)
