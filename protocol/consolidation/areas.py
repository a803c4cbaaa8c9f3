"""Which life areas a sentence belongs to, from a keyword lexicon per area.

Invariants:
- ``life_areas`` returns one to three areas, none twice, in a deterministic order: most
  keyword hits first, ties by where in the sentence the area's first hit is, then by
  the order of ``LifeArea``.
- ``general`` holds name, language, address form and time zone; it is also the answer
  when nothing matches, so the list is never empty.
- The content type only adds what it implies: a relationship statement is always in
  ``relationships``.
"""

from __future__ import annotations

from protocol.consolidation.lexicon import compile_lexicon, fold
from protocol.model import ContentType, LifeArea

MAX_AREAS = 3

# fmt: off
LEXICON: dict[LifeArea, tuple[str, ...]] = {
    LifeArea.WORK: (
        "work", "working", "worked", "workplace", "job", "boss", "office", "colleague",
        "coworker", "co-worker",
        "meeting", "manager", "career", "client", "customer", "deadline", "employer",
        "employee", "retire*", "commut*", "shift", "promotion", "interview", "startup",
        "company", "team", "salary", "paycheck", "payslip", "overtime", "freelanc*",
        "business", "profession*", "trade union", "union rep", "on strike",
    ),
    LifeArea.HEALTH: (
        "health*", "doctor", "allerg*", "anaphyla*", "intoleran*", "medic*",
        "prescription", "therap*", "dentist", "dental", "hospital*", "clinic",
        "pregnan*", "sleep*", "insomnia", "diet", "vegetarian", "vegan", "gluten*",
        "lactose", "peanut", "smok*", "cigarette", "alcohol", "drink less",
        "exercis*", "gym", "workout", "fitness", "weight", "calorie", "blood",
        "diabet*", "asthma*", "migraine", "headache", "sick", "ill", "illness",
        "disease", "pain", "injur*", "surgery", "vaccin*", "covid", "mental health",
        "anxiety", "depress*", "stress*", "meditat*", "yoga", "vitamin", "symptom",
        "glasses", "contact lenses", "physio*", "genetic*", "dna", "sober",
    ),
    LifeArea.FINANCE: (
        "money", "bank*", "salary", "income", "budget*", "saving*", "invest*", "stock",
        "shares", "crypto*", "debt", "loan", "mortgage", "tax*", "credit", "pension",
        "insurance", "bill", "afford*", "expens*", "earn", "wage", "owe", "iban",
        "account number", "net worth", "overdraft", "bankrupt*", "retirement fund",
        "rent", "finance*", "financial*", "subscription*", "pay",
    ),
    LifeArea.RELATIONSHIPS: (
        "wife", "husband", "partner", "spouse", "boyfriend", "girlfriend", "fianc*",
        "friend*", "brother", "sister", "sibling", "mother", "father", "mom", "mum",
        "dad", "parent", "son", "daughter", "kid", "child", "children", "baby",
        "family", "cousin", "uncle", "aunt", "grandma", "grandpa", "grandmother",
        "grandfather", "grandparent", "niece", "nephew", "in-law*", "married",
        "marriage", "wedding", "divorc*", "dating", "date night", "anniversary",
        "relationship*", "neighbour", "neighbor", "mentor", "roommate", "flatmate",
    ),
    LifeArea.HOME: (
        "home", "house", "apartment", "flat", "garden*", "kitchen", "cook*", "clean*",
        "laundry", "landlord", "tenant", "rent", "furniture", "living room", "bedroom",
        "bathroom", "chores", "groceries", "dog", "cat", "pet", "moved to", "move to",
        "moving to", "live in", "lived in", "living in", "neighbourhood",
        "neighborhood", "repair*", "plumb*", "heating", "thermostat", "recipe",
        "dinner", "breakfast", "lunch",
    ),
    LifeArea.TRAVEL: (
        "travel*", "trip", "flight", "fly", "flying", "airport", "airline", "hotel",
        "hostel", "airbnb", "vacation", "holiday", "abroad", "passport", "visa",
        "luggage", "suitcase", "road trip", "journey", "tour*", "cruise", "beach",
        "sightseeing", "itinerary", "train ticket", "visit*", "window seat",
        "aisle seat", "jet lag", "backpack*",
    ),
    LifeArea.SHOPPING: (
        "shop*", "buy", "buying", "bought", "purchas*", "store", "order", "ordered",
        "ordering", "amazon", "grocery", "groceries", "supermarket", "brand",
        "clothes", "clothing", "shoe", "size", "deliver*", "coupon", "discount", "sale",
        "price", "cheap*", "gift", "present for", "wishlist", "wish list",
    ),
    LifeArea.LEARNING: (
        "learn*", "study*", "studied", "course", "class", "school", "university",
        "college", "degree", "lesson", "tutor*", "exam", "homework", "teacher",
        "lecture", "thesis", "phd", "master's", "certificat*", "training", "practic*",
        "duolingo", "textbook", "curriculum", "skill", "bootcamp",
    ),
    LifeArea.LEISURE: (
        "hobby", "hobbies", "game*", "gaming", "play*", "movie", "film", "cinema",
        "music", "concert", "band", "song", "sport*", "football", "soccer", "tennis",
        "golf", "basketball", "hik*", "ski", "skiing", "swim*", "running", "run",
        "marathon", "cycling", "bike", "read*", "book", "novel", "paint*", "draw*",
        "restaurant", "cafe", "coffee", "tea", "wine", "beer", "cocktail", "museum",
        "netflix", "series", "tv", "show", "podcast", "camping", "fishing", "photograph*",
        "guitar", "piano", "sing*", "danc*", "party", "parties", "festival", "theatre",
        "theater", "knit*", "chess", "puzzle", "weekend",
    ),
    LifeArea.GENERAL: (
        "my name", "name is", "call me", "i'm called", "i am called", "go by", "nickname",
        "pronoun*",
        "language", "speak", "speaks", "native tongue", "mother tongue", "address me",
        "my address", "time zone", "timezone", "born", "birthday", "years old",
        "nationality", "citizen*", "metric", "imperial", "celsius", "fahrenheit",
    ),
}
# fmt: on

_PATTERNS = {area: compile_lexicon(words) for area, words in LEXICON.items()}
_ORDER = {area: i for i, area in enumerate(LifeArea)}


def area_hits(text: str) -> dict[LifeArea, list[str]]:
    """The words that matched, per area (areas without a hit are left out)."""
    folded = fold(text)
    found: dict[LifeArea, list[str]] = {}
    for area, pattern in _PATTERNS.items():
        hits = [m.group(0) for m in pattern.finditer(folded)]
        if hits:
            found[area] = hits
    return found


def life_areas(text: str, content_type: ContentType) -> list[LifeArea]:
    """One to three life areas for ``text``; ``general`` when nothing matches."""
    folded = fold(text)
    ranked: list[tuple[int, int, int, LifeArea]] = []
    for area, pattern in _PATTERNS.items():
        hits = list(pattern.finditer(folded))
        if hits:
            ranked.append((-len(hits), hits[0].start(), _ORDER[area], area))
    ranked.sort()
    areas = [area for *_, area in ranked]
    if content_type is ContentType.RELATIONSHIP and LifeArea.RELATIONSHIPS not in areas:
        areas.insert(0, LifeArea.RELATIONSHIPS)
    return areas[:MAX_AREAS] or [LifeArea.GENERAL]
