"""The cloud's broader sensitivity lexicon: more words per class than the device's
(``protocol.consolidation.sensitivity``), which it never replaces.

Invariants:
- Pure and deterministic; it can only *raise*: ``raise_with_terms`` keeps a sensitive
  hint as it is and turns ``normal`` into the class it finds, if any.
- Matching is lowercase on word boundaries (``protocol.consolidation.lexicon``: a plain
  entry takes a plural ``s``/``es``, ``word*`` is a prefix, spaces match any
  whitespace), after the idioms (``IDIOMS`` here and the device's) are blanked out:
  "blind date", "credit union", "strike a balance" say nothing about a class.
- Structured identifiers are matched by shape (``SHAPES``): an IBAN, a card-length
  run of digits, a salary-like amount ("$85k a year").
- When several classes match, the first in ``PRIORITY`` wins, as on the device.
- Leaning cautious on purpose: a false "sensitive" only makes a record wait for the
  user's confirmation; a false "normal" writes a health or belief record unasked.
"""

from __future__ import annotations

import re

from protocol.consolidation import sensitivity as device_lexicon
from protocol.consolidation.lexicon import compile_lexicon, fold
from protocol.model import Sensitivity

PRIORITY = device_lexicon.PRIORITY

_NATIONALITIES = (
    "american", "british", "english", "scottish", "irish", "welsh", "french", "german",
    "italian", "spanish", "portuguese", "dutch", "belgian", "swiss", "austrian", "polish",
    "russian", "ukrainian", "greek", "turkish", "swedish", "norwegian", "danish", "finnish",
    "icelandic", "czech", "slovak", "hungarian", "romanian", "bulgarian", "serbian",
    "croatian", "bosnian", "albanian", "lithuanian", "latvian", "estonian", "mexican",
    "brazilian", "argentinian", "argentine", "colombian", "peruvian", "chilean",
    "venezuelan", "ecuadorian", "bolivian", "guatemalan", "salvadoran", "honduran",
    "nicaraguan", "cuban", "puerto rican", "dominican", "jamaican", "haitian", "trinidadian",
    "canadian", "nigerian", "ghanaian", "kenyan", "ethiopian", "eritrean", "somali",
    "sudanese", "ugandan", "tanzanian", "rwandan", "congolese", "cameroonian", "senegalese",
    "egyptian", "moroccan", "algerian", "tunisian", "libyan", "south african", "zimbabwean",
    "indian", "pakistani", "bangladeshi", "sri lankan", "nepali", "nepalese", "tamil",
    "punjabi", "gujarati", "bengali", "chinese", "taiwanese", "japanese", "korean",
    "vietnamese", "thai", "filipino", "filipina", "indonesian", "malaysian", "singaporean",
    "cambodian", "laotian", "burmese", "mongolian", "tibetan", "iranian", "persian",
    "iraqi", "syrian", "lebanese", "palestinian", "israeli", "jordanian", "saudi",
    "yemeni", "afghan", "armenian", "azerbaijani", "georgian", "kurdish", "uzbek",
    "kazakh", "australian", "new zealander", "samoan", "tongan", "fijian", "hawaiian",
    "arab", "black", "white", "asian", "latino", "latina", "hispanic", "jewish",
)  # fmt: skip
_NATION = (
    "(?:" + "|".join(re.escape(n) for n in sorted(_NATIONALITIES, key=len, reverse=True)) + ")"
)

# fmt: off
LEXICON: dict[Sensitivity, tuple[str, ...]] = {
    Sensitivity.GENETIC: (
        "genetic*", "gene", "genome*", "genotyp*", "dna", "23andme", "ancestry dna",
        "hereditary", "inherited", "heredit*", "brca*", "carrier of",
        "huntington's", "huntingtons", "cystic fibrosis", "sickle cell", "tay-sachs",
        "haemophilia", "hemophilia", "down syndrome", "down's syndrome", "chromosom*",
        "family history of", "runs in my family", "runs in the family", "mutation",
    ),
    Sensitivity.BIOMETRIC: (
        "biometric*", "fingerprint*", "thumbprint*", "face id", "touch id",
        "facial recognition", "face scan*", "face unlock", "iris scan*", "retina scan*",
        "retinal scan*", "voiceprint*", "voice print", "voice id", "palm print*",
        "palm scan*", "gait recognition", "my iris", "my retina",
    ),
    Sensitivity.HEALTH: (
        # medication
        "medication*", "medicine", "meds", "pill", "pills", "tablets", "prescription*",
        "prescribed", "dosage", "dose", "ibuprofen", "paracetamol", "acetaminophen",
        "tylenol", "advil", "aspirin", "metformin", "insulin", "prozac", "zoloft",
        "sertraline", "fluoxetine", "citalopram", "escitalopram", "lexapro", "xanax",
        "valium", "diazepam", "adderall", "ritalin", "methylphenidate", "vyvanse",
        "concerta", "strattera", "elvanse", "atomoxetine",
        "lithium", "statin*", "lipitor", "levothyroxine", "prednisone", "steroid*",
        "antibiotic*", "amoxicillin", "penicillin", "inhaler", "ventolin", "albuterol",
        "epipen", "methadone", "suboxone", "chemotherapy", "chemo", "radiotherapy",
        "radiation therapy", "dialysis", "birth control", "on the pill", "prep",
        "truvada", "hormone therapy", "hormone replacement", "hrt", "testosterone",
        "estrogen", "oestrogen", "antihistamine*", "opioid*", "opiate*", "morphine",
        "oxycodone", "oxycontin", "codeine", "tramadol", "gabapentin", "wellbutrin",
        "bupropion", "seroquel", "quetiapine", "abilify", "ozempic", "wegovy",
        "semaglutide", "mounjaro", "viagra", "cialis", "painkiller*", "antidepressant*",
        "anti-depressant*", "antipsychotic*", "sleeping pill*", "injection*", "jab",
        # conditions
        "arthritis", "osteoporosis", "fibromyalgia", "lupus", "crohn's", "crohns",
        "colitis", "ibs", "irritable bowel", "multiple sclerosis", "parkinson's",
        "parkinsons", "alzheimer's", "alzheimers", "dementia", "hypertension",
        "high blood pressure", "low blood pressure", "thyroid", "hypothyroid*",
        "hyperthyroid*", "eczema", "psoriasis", "insomnia", "sleep apnea",
        "sleep apnoea", "tinnitus", "glaucoma", "cataract*", "scoliosis", "hernia",
        "kidney stone*", "gout", "anemia", "anaemia", "anemic", "anaemic",
        "endometriosis", "pcos", "herpes", "chlamydia", "gonorrh*", "syphilis", "hpv",
        "concussion", "cerebral palsy", "deaf", "hard of hearing", "blind", "amputee",
        "amputat*", "prosthe*", "paraly*", "stutter*", "stammer*", "tourette*", "bpd",
        "borderline personality", "personality disorder", "obese", "obesity",
        "overweight", "underweight", "suicid*", "self-harm*", "self harm*",
        "overdos*", "alcoholics anonymous", "narcotics anonymous", "in recovery",
        "recovering addict", "recovering alcoholic", "clean for", "sober for",
        "quit smoking", "quit drinking", "pregnant", "pregnancy", "expecting a baby",
        "due date", "abortion", "vasectomy", "hysterectomy", "mastectomy", "biopsy",
        "mri", "x-ray", "xray", "ultrasound", "ct scan", "physical therapy",
        "blood sugar", "pacemaker", "transplant", "heart surgery",
        "infection", "virus", "flu", "cold sore*", "fever", "nausea", "vomit*",
        "dizzy", "dizziness", "fatigue", "burnout", "burned out", "burnt out",
        "mental illness", "mentally ill", "breakdown", "trauma", "traumatic",
        "grief counsel*", "psychologist", "psychiatrist", "counsellor", "counselor",
        "therapist", "specialist", "oncologist", "cardiologist",
        "neurologist", "dermatologist", "gynaecologist", "gynecologist", "urologist",
        "optician", "a&e", "emergency room", "the er", "icu", "ward", "nhs", "my gp",
        "condition", "chronic*", "terminal", "remission", "relapse*", "flare-up*",
        "flare up*", "wheelchair", "crutches", "walking stick", "cane", "hearing aid*",
        "glasses", "contact lens*", "braces", "my weight", "i weigh", "bmi",
        "blood type", "blood group", "cholesterol", "diabet*", "asthma*", "allerg*",
        "intoleran*", "coeliac", "celiac", "disorder", "disease", "syndrome",
        "diagnos*", "symptom*", "sick", "illness", "ill", "unwell", "injur*",
        "disabilit*", "disabled", "cancer", "tumor", "tumour", "stroke", "heart attack",
        "seizure*", "epilep*", "migraine*", "adhd", "autis*", "asperger*",
        "dyslexi*", "dyspraxi*", "depression", "depressed", "anxiety", "anxious",
        "panic attack*", "bipolar", "schizophreni*", "psychosis", "ptsd", "ocd",
        "eating disorder", "anorexi*", "bulimi*", "hiv", "aids", "std", "sti",
        "hepatitis", "covid", "long covid", "surgery", "surgeon",
        "my doctor", "the doctor", "see a doctor", "saw a doctor",
        "seeing a doctor", "doctor's", "doctors",
        "gp", "hospital*", "clinic", "physio*", "vaccin*", "pain",
        "ache", "aches", "sore", "rehab", "addict*", "alcoholi*", "sober", "sobriety",
        "therap*", "psychiatri*", "counsel*", "mental health",
        "miscarriage", "ivf", "fertility", "infertil*", "menopaus*", "menstrua*",
        "period pain*", "contracepti*", "dentist", "dental", "root canal", "fracture*",
        "broke my", "broken bone*", "sprain*",
    ),
    Sensitivity.SEX_LIFE: (
        "gay", "lesbian", "bisexual", "queer", "homosexual*", "heterosexual*",
        "asexual*", "aromantic", "pansexual*", "demisexual*", "transgender", "trans",
        "transition*", "nonbinary", "non-binary", "enby", "genderqueer", "genderfluid",
        "gender fluid", "agender", "intersex", "cisgender", "cis", "my pronouns",
        "pronouns are", "they/them", "she/her", "he/him", "deadname", "dead name",
        "gender identity", "gender dysphoria", "sexual orientation", "sexuality",
        "sex life", "sex", "sexual*", "libido", "erectile", "celibate", "virgin",
        "porn*", "kink*", "fetish*", "bdsm", "polyamor*", "open relationship",
        "swinger*", "hookup*", "hook up", "hooked up", "one night stand", "came out",
        "came out as", "coming out as", "came out to", "come out to",
        "lgbt*", "pride parade", "pride march",
        "pride month", "drag queen", "drag king", "grindr", "tinder", "hinge", "bumble",
        "closeted", "in the closet",
        "my same-sex", "same-sex", "same sex",
    ),
    Sensitivity.ETHNIC_ORIGIN: (
        "ethnic*", "my race", "racial*", "racis*", "mixed race", "mixed-race", "biracial",
        "multiracial", "heritage", "descent", "ancestry", "ancestors", "ancestral",
        "my roots", "my background", "indigenous", "aboriginal", "first nations",
        "native american", "maori", "inuit", "roma", "romani", "gypsy", "traveller",
        "latinx", "chicano", "chicana", "african-american", "african american",
        "asian-american", "asian american", "person of colour", "person of color",
        "people of colour", "people of color", "poc", "bipoc", "caucasian",
        "originally from", "immigrant*", "immigrat*",
        "emigrat*", "migrant", "refugee*", "asylum", "citizenship",
        "green card", "visa", "undocumented", "dual nationality", "nationality",
        "mother tongue", "native language", "first language", "native speaker",
        "second generation", "first generation", "diaspora", "my people", "tribe",
        "caste",
    ),
    Sensitivity.RELIGIOUS_BELIEF: (
        "religio*", "church*", "mosque", "synagogue", "temple", "gurdwara", "chapel",
        "cathedral", "shrine", "pray*", "worship*", "god", "allah", "jesus", "christ",
        "lord", "holy", "buddha", "christian*", "catholic*", "protestant*", "orthodox",
        "lutheran*", "methodist*", "baptist*", "presbyterian*", "anglican*",
        "episcopal*", "pentecostal*", "evangelical*", "mormon*", "lds", "jehovah*",
        "quaker*", "amish", "adventist*", "muslim*", "islam*", "sunni", "shia",
        "shiite", "sufi*", "jewish", "jew", "jews", "judaism", "rabbi", "imam", "priest",
        "pastor", "vicar", "nun", "monk", "hindu*", "buddhis*", "sikh*", "jain*",
        "taoist*", "shinto", "pagan*", "wicca*", "atheis*", "agnostic*", "scientolog*",
        "bible", "quran", "koran", "torah", "talmud", "gospel", "scripture*", "rosary",
        "holy communion", "first communion", "confession", "baptis*", "christen*",
        "confirmation class*", "bar mitzvah", "bat mitzvah", "hajj", "umrah", "ramadan",
        "eid", "iftar", "suhoor", "diwali", "navratri", "vaisakhi", "hanukkah",
        "chanukah", "passover", "yom kippur", "rosh hashanah", "lent", "sabbath",
        "shabbat", "kosher", "halal", "hijab", "niqab", "burqa", "turban", "kirpan",
        "yarmulke", "kippah", "bible study", "sunday school", "youth group", "mass",
        "sermon", "faith", "spiritual*", "born again", "converted", "convert to",
        "reincarnation", "afterlife", "heaven", "hell", "sin", "sins", "blessed",
        "ministry", "missionary", "congregation", "parish", "fasting", "i fast",
        "the prophet", "saint", "saints",
    ),
    Sensitivity.POLITICAL_OPINION: (
        "politic*", "vote for", "voted for", "voting for", "vote against", "voted against",
        "i vote", "i voted", "my vote", "to vote", "postal vote", "voting", "voter*",
        "ballot*", "election*", "elect",
        "polling station", "referendum", "campaign*", "canvass*", "democrat*",
        "republican*", "gop", "maga", "labour", "labor party", "tory", "tories",
        "conservative*", "lib dem*", "liberal*", "green party", "the greens", "snp",
        "ukip", "reform uk", "socialis*", "communis*", "marxis*", "anarchis*",
        "libertarian*", "capitalis*", "fascis*", "nationalis*", "progressive*",
        "leftist*", "left-wing", "left wing", "right-wing", "right wing", "far-right",
        "far right", "far-left", "far left", "centrist*", "populis*", "feminis*",
        "activis*", "activist*", "protest*", "demonstrat*", "march for", "rally",
        "rallies", "petition*", "pro-life", "pro-choice", "gun control", "gun rights",
        "second amendment", "nra", "immigration", "brexit*", "remainer*", "leaver*",
        "trump", "biden", "obama", "harris", "starmer", "sunak",
        "prime minister", "parliament", "congress", "senator", "mp", "councillor",
        "council election*", "party member*", "member of the party", "my party",
        "the party", "politician*", "government", "policy", "policies", "taxation",
        "climate action", "extinction rebellion", "black lives matter", "blm",
        "woke", "conservatism", "liberalism", "zionis*", "anti-war", "pacifis*",
    ),
    Sensitivity.TRADE_UNION: (
        "union", "unions", "unionis*", "unioniz*", "trade union*", "labor union*",
        "labour union*", "teachers union", "teachers' union", "union member*",
        "union rep*", "union dues", "union meeting*", "union card", "shop steward*",
        "collective bargaining", "collective agreement", "bargaining unit",
        "on strike", "went on strike", "go on strike", "strike action", "the strike",
        "picket*", "walkout*", "walk out",
        "industrial action", "work to rule", "teamster*", "unite union", "gmb",
        "afl-cio", "seiu", "uaw", "labor organiz*", "labour organis*",
        "syndicat*", "rmt", "unison", "usdaw", "nurses union", "ufcw", "ibew",
        "union job", "union shop",
    ),
    Sensitivity.FINANCIAL_DETAIL: (
        "salary", "salaries", "wage*", "income", "earn", "earns", "earned", "earning*",
        "paycheck*", "paycheque*", "payslip*", "pay rise", "pay raise", "pay cut",
        "bonus", "debt*", "owe", "owes", "owed", "loan*", "mortgage*", "remortgag*",
        "credit score", "credit rating", "credit card*", "card number", "account number",
        "bank account", "bank details", "sort code", "routing number", "iban", "swift code",
        "bic", "pin number", "pin code", "password", "social security number",
        "ssn", "national insurance number", "tax*", "irs", "hmrc", "bankrupt*",
        "insolven*", "foreclos*", "repossess*", "evict*", "overdraft", "overdrawn",
        "in the red", "savings", "401k", "401(k)", "ira", "isa", "pension*",
        "retirement fund", "retirement savings", "portfolio", "my investments",
        "my stocks", "my shares", "crypto", "bitcoin", "net worth", "inheritance",
        "my will", "in my will", "estate planning", "life insurance",
        "inherit", "alimony", "child support", "welfare", "benefits", "universal credit",
        "food stamps", "unemployment", "payday loan*", "broke", "can't afford",
        "cannot afford", "couldn't afford", "afford", "money problems",
        "money troubles", "financial*", "finances", "paid off", "pay off",
        "interest rate", "apr", "credit limit", "collections", "debt collector*",
        "rent arrears", "arrears", "my budget", "budget", "budgeting",

        "six figures", "minimum wage", "raise",
    ),
}
# fmt: on

# Idioms and look-alikes blanked out before matching (beside the device's own).
IDIOMS: tuple[str, ...] = (
    *device_lexicon.IDIOMS,
    r"blind (?:date|spot|taste|faith)",
    r"(?:window |roller |venetian )?blinds",
    r"turn(?:ed|ing|s)? a blind eye",
    r"(?:extra |extra-)?virgin (?:olive oil|oil|mojito|cocktail|atlantic|mary)",
    r"(?:european|soviet|student|students'?|credit|civil) union",
    r"state of the union",
    r"union (?:station|square|jack|street)",
    r"strike(?:s|d)? (?:a|the) (?:balance|deal|pose|chord|match|bargain|nerve)",
    r"(?:lucky|bowling|lightning) strikes?",
    r"strikes me",
    r"(?:it |that )?struck me",
    r"broke (?:up|down|even|the ice|the record|the news|into|in)",
    r"broke (?:my|the|his|her) (?:phone|laptop|screen|glasses|record|promise)",
    r"i'm not sick",
    r"sick (?:beat|trick|move|skills?|day at the)",
    r"(?:that's|that is|so|pretty|really) sick",
    r"(?:killing|killed) (?:it|me)",
    r"(?:going|went|drive me|drives me|driving me) (?:crazy|nuts|mad)",
    r"eric church",
    r"(?:work|works|worked|working|job|jobs|volunteer|volunteers|volunteered) (?:at|in|for) "
    r"(?:a|the|our|my) (?:local )?(?:hospital|clinic)",
    r"temple run",
    r"(?:shirley )?temple (?:bar|street)",
    r"mass (?:effect|market|production|produced|transit|of)",
    r"critical mass",
    r"body mass",
    r"(?:the |a )?party (?:hat|games?|food|planning|animal|tonight|this weekend)",
    r"(?:birthday|dinner|house|office|christmas|holiday|tea|pool|garden|surprise|"
    r"bachelor|bachelorette|hen|stag|after|block|pyjama|pajama|slumber|costume) part(?:y|ies)",
    r"liberal (?:arts?|amount|use|helping|dose|sprinkling)",
    r"conservative (?:estimate|side|guess|approach|dress|outfit)",
    r"vote (?:of thanks|of confidence)",
    r"(?:voted|vote) (?:best|most|the best|my favou?rite|for my favou?rite)",
    r"campaign (?:mode|level|mission)",
    r"(?:game|story|single-player|co-op) campaign",
    r"rally (?:car|driving|racing|cross)",
    r"tennis rally",
    r"(?:cross|crossing|crossed) (?:the )?(?:border|road)",
    r"(?:hell|heaven) (?:of a|yeah|no|knows)",
    r"what the hell",
    r"(?:to|from|like|go to|went to|bloody) hell",
    r"heavens?",
    r"(?:my |the )?lord of the rings",
    r"holy (?:cow|moly|crap|smokes|grail|shit)",
    r"(?:good|oh|dear) lord",
    r"saint (?:bernard|patrick's day|valentine's day)",
    r"(?:fasting|fast) (?:food|lane|car|forward|track|paced)",
    r"(?:intermittent )?fasting (?:diet)",
    r"raise (?:my|your|a|the) (?:hand|voice|glass|kids|children|family|son|daughter|"
    r"question|flag|bar|issue|point|money for)",
    r"raised (?:by|in|on)",
    r"(?:a|per|an|each|every|once|twice|three times|four times) (?:a )?(?:year|month) "
    r"(?:ago|later|old|older)",
    r"(?:a|one|last|next|this) year (?:ago|old|later)",
    r"years? old",
    r"bills? (?:murray|gates|nye)",
    r"(?:fit|fits|fitting) the bill",
    r"pin(?:ned|s)? (?:it|down|the tail)",
    r"interest(?:ed|ing)? in",
    r"(?:the )?flu (?:shot|jab) clinic",
    r"cold (?:weather|brew|water|day|outside|shower|feet)",
    r"(?:computer|phone) virus",
    r"in (?:the )?(?:good|great|perfect|bad) condition",
    r"(?:on |under )?(?:the )?condition that",
    r"(?:game|board|card) (?:sick|pain)",
    r"(?:race|racing) (?:car|track|day|against|horse)",
    r"(?:horse|car|bike|boat|sack|relay|fun|5k|10k|charity) race",
    r"add (?:it|some|a|an|more|salt|sugar|to|the|that|this|me)",
    r"(?:the )?ward(?:robe)?",
    r"glasses of",
    r"(?:wine|beer|pint) glasses",
    r"(?:my |a )?(?:pain|sore) loser",
    r"(?:grow|grew|growing) (?:on|out of)",
    r"tax(?:i|is|icab)",
    r"afford(?:able|ably)? (?:to wait|housing)",
    r"(?:free|open) to (?:the )?public",
    r"(?:brush|swimming|golf|back|breast|paddle|pen) strokes?",
    r"trans (?:fats?|atlantic|siberian)",
    r"(?:is|so|very|really|super|quite|too) addictive",
    r"addicted to (?:love island|netflix|tiktok|coffee|chocolate|this|that|the show|"
    r"the game|[a-z]+ (?:show|series|season|game|podcast))",
    r"(?:nearly |almost |practically )?(?:had|have|gave me|give me|giving me|gives me) a "
    r"heart attack",
    r"(?:is|are|was|so|looks|sounds) sick",
    r"god of war",
    r"^(?:jesus|christ|jeez|oh god|god),?",
    r"(?:a |an )?religious experience",
    r"loan officer",
    r"gene's",
    r"fingerprints (?:all )?(?:over|on)",
    r"president of (?:our|the|my) (?:[a-z]+ )?(?:club|society|committee|association|board)",
)
_IDIOM = re.compile(r"(?<![\w'-])(?:" + "|".join(IDIOMS) + r")(?![\w-])")
_PATTERNS: dict[Sensitivity, re.Pattern[str]] = {
    cls: compile_lexicon(words) for cls, words in LEXICON.items()
}

# Phrasings and identifiers matched by shape, on the folded text (an IBAN's letters are
# lowercase by then).
SHAPES: tuple[tuple[Sensitivity, re.Pattern[str]], ...] = (
    (
        Sensitivity.ETHNIC_ORIGIN,
        re.compile(
            r"\b(?:i'm|i am|im|we're|we are|my (?:family|parents|mum|mom|dad|father|mother|"
            r"grandparents|grandma|grandpa|grandmother|grandfather|husband|wife|partner) "
            r"(?:is|are|was|were))\s+(?:half|part|a quarter|mixed|fully|proudly|100%)?\s*"
            rf"{_NATION}\b(?!\s+(?:food|cuisine|restaurant|dish|dishes|film|films|movie|"
            r"movies|show|shows|music|song|songs|wine|beer|coffee|tea|cooking|shepherd|"
            r"breakfast|style|car|cars|language|class|lessons))"
        ),
    ),
    (
        Sensitivity.ETHNIC_ORIGIN,
        re.compile(
            rf"\b{_NATION}[- ](?:american|british|canadian|australian|descent|heritage|"
            r"roots|background|ancestry|origin|blood|family|side)\b"
        ),
    ),
    (
        Sensitivity.ETHNIC_ORIGIN,
        re.compile(
            rf"\bmy {_NATION} (?:grandmother|grandfather|grandma|grandpa|"
            r"grandparents|family|relatives|ancestors|side|heritage|roots|mum|mom|"
            r"dad|father|mother|parents)\b"
        ),
    ),
    (Sensitivity.TRADE_UNION, re.compile(r"\b(?:local|lodge) (?:no\.? ?)?\d{1,4}\b")),
    (
        Sensitivity.FINANCIAL_DETAIL,
        re.compile(r"\b[a-z]{2}\d{2}(?: ?[a-z0-9]{4}){2,7}(?: ?[a-z0-9]{1,4})?\b"),
    ),
    (Sensitivity.FINANCIAL_DETAIL, re.compile(r"(?<![\w.])(?:\d[ -]?){12,18}\d(?![\w.])")),
    (
        Sensitivity.FINANCIAL_DETAIL,
        re.compile(
            r"(?:[$£€]\s?\d[\d,.]*\s?(?:k|m|grand|thousand|million)?|\b\d[\d,.]*\s?(?:k|grand|"
            r"thousand|dollars|pounds|euros|bucks|quid))\b(?:\s+(?:a|per|an|each|every)\s+"
            r"(?:year|month|week|hour|annum)|\s+(?:in debt|of debt|debt|overdrawn|salary|"
            r"in savings|saved|savings|loan|mortgage|owed|on my card|credit card))"
        ),
    ),
)


def find_terms(text: str) -> list[device_lexicon.SensitiveMatch]:
    """Every sensitive class the broader lexicon finds in ``text``, in ``PRIORITY`` order."""
    folded = _IDIOM.sub(" ", fold(text))
    hits: dict[Sensitivity, str] = {}
    for cls, pattern in _PATTERNS.items():
        hit = pattern.search(folded)
        if hit is not None:
            hits[cls] = hit.group(0)
    for cls, shape in SHAPES:
        if cls not in hits and (hit := shape.search(folded)) is not None:
            hits[cls] = hit.group(0)
    return [device_lexicon.SensitiveMatch(cls, hits[cls]) for cls in PRIORITY if cls in hits]


def terms_class(text: str) -> Sensitivity:
    """The class the broader lexicon finds first (``PRIORITY``), else normal."""
    found = find_terms(text)
    return found[0].sensitivity if found else Sensitivity.NORMAL


def raise_with_terms(text: str, hint: Sensitivity | None) -> Sensitivity:
    """The hint if it names a sensitive class, else the lexicon's class, else normal."""
    if hint is not None and hint is not Sensitivity.NORMAL:
        return hint
    return terms_class(text)
