"""The subject index keys are bounded per sentence (issue 21 item 2), and the bounded
lookup still finds every record the unbounded one found, including records stored
before the bound (their rows keep the longer prefixes)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from protocol import subjects
from protocol.subjects import MAX_KEY_WORDS, MIN_SHARED_WORDS, lookup_keys, stored_keys, words

LONG = (
    "I keep a note about the garden, the bikes and the long trip north and so on and so "
    "on and so on and so on and so on and so on and so on and so on and so on."
)


def _unbounded_stored(text: str) -> list[str]:
    """``stored_keys`` as it was before the bound (no subject, no frame)."""
    tokens = words(text)
    if len(tokens) <= MIN_SHARED_WORDS:
        return []
    own = max(MIN_SHARED_WORDS, -(-len(tokens) // 2))
    keys = [f"u{k}:" + " ".join(tokens[:k]) for k in range(MIN_SHARED_WORDS, own + 1)]
    return [*keys, f"o{own}:" + " ".join(tokens[:own])]


def _unbounded_lookup(text: str) -> list[str]:
    tokens = words(text)
    if len(tokens) <= MIN_SHARED_WORDS:
        return []
    need = max(MIN_SHARED_WORDS, -(-len(tokens) // 2))
    return [
        f"u{need}:" + " ".join(tokens[:need]),
        *(f"o{k}:" + " ".join(tokens[:k]) for k in range(MIN_SHARED_WORDS, need)),
    ]


def _prefix_keys(keys: list[str]) -> list[str]:
    return [k for k in keys if k[0] in "uo"]


def test_a_long_sentence_is_kept_under_a_bounded_number_of_keys() -> None:
    assert len(words(LONG)) > 36
    assert len(_unbounded_stored(LONG)) > 18  # what it was
    assert len(_prefix_keys(stored_keys(LONG, None))) == MAX_KEY_WORDS - 1
    assert len(_prefix_keys(lookup_keys(LONG, None))) == MAX_KEY_WORDS - 2
    assert max(int(k[1 : k.index(":")]) for k in _prefix_keys(stored_keys(LONG, None))) == (
        MAX_KEY_WORDS
    )


def test_short_sentences_keep_the_keys_they_had() -> None:
    for text in ("I drink my coffee iced.", "My favorite number is not 1729.", "I like tea."):
        assert _prefix_keys(stored_keys(text, None)) == _unbounded_stored(text)
        assert _prefix_keys(lookup_keys(text, None)) == _unbounded_lookup(text)


vocabulary = st.sampled_from(["i", "my", "coffee", "drink", "hot", "now", "tea", "like", "the"])
sentences = st.lists(vocabulary, max_size=30)


@settings(max_examples=400)
@given(sentences, sentences)
def test_the_bounded_lookup_finds_all_the_unbounded_one_found(a: list[str], b: list[str]) -> None:
    new, old = " ".join(a), " ".join(b)
    if set(_unbounded_lookup(new)) & set(_unbounded_stored(old)):
        # a record kept under the bounded keys, and one kept before the bound
        assert set(lookup_keys(new, None)) & set(stored_keys(old, None))
        assert set(lookup_keys(new, None)) & set(_unbounded_stored(old))
    if subjects.same_subject(new, None, old, None):
        assert set(lookup_keys(new, None)) & set(stored_keys(old, None))
        assert set(lookup_keys(new, None)) & set(_unbounded_stored(old))
