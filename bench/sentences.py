"""Varied first-person sentences for the latency bench: a small grammar over a large
vocabulary (people, places, foods, activities, objects, times, numbers), so a big
store's FTS5 postings and vectors look like a person's memory, not a 50-word salad.

Invariant: deterministic for a given ``random.Random``; every sentence begins with a
different subject phrase often enough that a new one rarely supersedes an older one.
"""

from __future__ import annotations

import random

PEOPLE = (
    "sister brother mother father aunt uncle cousin niece nephew grandmother grandfather "
    "wife husband partner daughter son boss colleague neighbour landlord dentist doctor "
    "therapist coach teacher tutor mentor roommate friend accountant lawyer plumber "
    "barber trainer pharmacist vet babysitter godmother stepbrother"
).split()
NAMES = (
    "Anna Ben Carla Dmitri Elena Farid Greta Hiro Ines Jonas Kemal Lena Marco Nadia "
    "Omar Priya Quentin Rosa Sven Tariq Uma Viktor Wen Ximena Yusuf Zoe Amara Bruno "
    "Chiara Diego Esra Felix Gita Hamid Ilse Joao Kaito Leila Mateo Noor Otto Paula "
    "Rafael Sofia Tomas Ulla Vera Wilhelm Yara Zaid Ayla Bodhi Celine Dario"
).split()
PLACES = (
    "Lisbon Oslo Duluth Kyoto Lima Porto Krakow Tbilisi Hanoi Quito Bergen Seville Tunis "
    "Dakar Cusco Riga Tallinn Ghent Leipzig Bilbao Bologna Split Izmir Busan Taipei Osaka "
    "Perth Hobart Halifax Tucson Boise Asheville Savannah Nantes Lyon Graz Brno Cork "
    "Galway Aarhus Malmo Turku Tromso Reykjavik Marrakesh Cairo Nairobi Accra Zanzibar "
    "Cartagena Montevideo Valparaiso Oaxaca Merida Havana"
).split()
FOODS = (
    "sourdough ramen paella tacos dumplings risotto falafel hummus kimchi pho gnocchi "
    "lasagna curry biryani ceviche tempura goulash pierogi borscht moussaka tagine "
    "shakshuka croissants bagels pancakes waffles granola oatmeal lentils chickpeas "
    "tofu tempeh salmon sardines mussels oysters brisket meatballs pesto tiramisu "
    "baklava cheesecake sorbet espresso matcha kombucha chai lemonade cider"
).split()
ACTIVITIES = (
    "running swimming cycling climbing rowing hiking skiing surfing sailing kayaking "
    "fencing boxing judo yoga pilates dancing salsa tango knitting sewing pottery "
    "woodworking painting sketching photography birdwatching gardening baking brewing "
    "chess bridge poker sudoku crosswords journaling meditation volunteering tutoring "
    "singing drumming piano violin cello guitar ukulele trumpet saxophone archery"
).split()
OBJECTS = (
    "bicycle laptop passport umbrella backpack camera telescope kettle blender toaster "
    "sofa wardrobe bookshelf mattress headphones keyboard monitor printer router "
    "thermostat vacuum lawnmower ladder drill wrench tent sleeping-bag kayak skateboard "
    "scooter watch necklace ring wallet suitcase notebook fountain-pen sunglasses "
    "raincoat boots sneakers scarf gloves helmet charger tablet phone radio"
).split()
DAYS = "Monday Tuesday Wednesday Thursday Friday Saturday Sunday weekend morning evening".split()
MONTHS = (
    "January February March April May June July August September October November December"
).split()
ADJECTIVES = (
    "favourite old new cheap expensive broken shiny quiet noisy spicy sweet bitter "
    "tiny huge heavy light blue green red yellow wooden metal leather vintage"
).split()
FEELINGS = "love hate enjoy dislike prefer avoid miss crave tolerate adore".split()
JOBS = (
    "engineer nurse architect translator librarian chef pilot paramedic designer "
    "journalist electrician carpenter pharmacist economist geologist surveyor"
).split()

TEMPLATES = (
    "My {person} {name} lives in {place}.",
    "I {feeling} {food}, especially on {day}.",
    "My {person} works as a {job} in {place}.",
    "I bought a {adjective} {object} for {number} euros in {month}.",
    "I go {activity} with {name} every {day}.",
    "My {person} {name} is allergic to {food}.",
    "I flew to {place} in {month} and tried the {food}.",
    "My {adjective} {object} is kept in the {room}.",
    "{name} taught me {activity} when I lived in {place}.",
    "The code for the {room} door is {number}.",
    "I have been {activity} since {year}.",
    "My {person} {name} was born in {year} in {place}.",
    "I lent my {object} to {name} in {month}.",
    "I pay {number} euros a month for the {object} insurance.",
    "{name} recommended a {job} in {place} to me.",
    "I want to learn {activity} before {year}.",
    "My {person}'s birthday is on {month} {date}.",
    "I usually order {food} and {drink} at the cafe near {place}.",
)
ROOMS = "kitchen garage basement attic office bedroom hallway shed balcony cellar".split()
DRINKS = "espresso matcha kombucha chai lemonade cider tea juice water".split()


def sentence(rng: random.Random) -> str:
    """One varied first-person sentence."""
    template = rng.choice(TEMPLATES)
    return template.format(
        person=rng.choice(PEOPLE),
        name=rng.choice(NAMES),
        place=rng.choice(PLACES),
        food=rng.choice(FOODS),
        activity=rng.choice(ACTIVITIES),
        object=rng.choice(OBJECTS).replace("-", " "),
        day=rng.choice(DAYS),
        month=rng.choice(MONTHS),
        adjective=rng.choice(ADJECTIVES),
        feeling=rng.choice(FEELINGS),
        job=rng.choice(JOBS),
        number=rng.randrange(10, 10_000),
        year=rng.randrange(1950, 2030),
        date=rng.randrange(1, 29),
        room=rng.choice(ROOMS),
        drink=rng.choice(DRINKS),
    )


def vocabulary() -> int:
    """How many distinct words the grammar can use (reported beside the latency)."""
    lists = (PEOPLE, NAMES, PLACES, FOODS, ACTIVITIES, OBJECTS, DAYS, MONTHS, ADJECTIVES)
    words = {w.lower() for group in (*lists, FEELINGS, JOBS, ROOMS, DRINKS) for w in group}
    words |= {w.lower().strip(".,'s") for t in TEMPLATES for w in t.split() if "{" not in w}
    return len(words)
