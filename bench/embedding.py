"""Sentence-embedding throughput on one core (``measure``; ``smoke`` shrinks it).

Invariant: nothing here asserts a timing. The shipped model (``make model``) is loaded
through the device's loader with one intra-op thread, the device's budget, and run on
a fixed mix of short first-person sentences, one at a time (batch 1, what the device
does as the user types), in lists of 32 (a pulled page) and in one long list (a
re-index, which the embedder batches by sorted length).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from device.embedder import MODEL_FILE, load_embedder, model_dir
from protocol.embedding import Embedder

_SUBJECTS = [
    "I grew up in Duluth",
    "my sister lives in Lisbon",
    "I'm allergic to peanuts",
    "I drive an old blue Volvo",
    "my daughter starts school in September",
    "I work night shifts at the hospital",
    "we have two cats called Miso and Tofu",
    "I don't eat meat",
    "my dentist is Dr. Okafor",
    "I cycle to work",
    "I prefer window seats",
    "my partner hates cilantro",
    "I'm learning Portuguese",
    "my mother's birthday is on the third of March",
    "I'm saving for a house",
    "I play the cello",
]
_TAILS = [
    ".",
    ", so keep that in mind.",
    " and I have for years.",
    ", please remember that.",
    " since last spring.",
    ", not my brother.",
    "!",
    ", at least for now.",
]
_QUESTIONS = [
    "Where did I grow up?",
    "What's my sister's name?",
    "Do I have any allergies?",
    "What car do I drive?",
    "When is Mum's birthday?",
    "Which seat do I like on planes?",
]


def sentences(n: int) -> list[str]:
    """``n`` short first-person sentences, a fixed mix with about one question in eight."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        if i % 8 == 7:
            out.append(_QUESTIONS[(i // 8) % len(_QUESTIONS)])
        else:
            subject = _SUBJECTS[i % len(_SUBJECTS)]
            text = subject + _TAILS[(i // len(_SUBJECTS) + i) % len(_TAILS)]
            out.append(text[0].upper() + text[1:])
        i += 1
    return out


def _rate(embedder: Embedder, texts: Sequence[str], batch: int) -> float:
    embedder.embed(texts[: min(batch, 32)])  # warm-up: first-run allocations
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        embedder.embed(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - start)


def measure(smoke: bool = False) -> dict[str, float]:
    """Sentences per second at batch 1 and 32 on one thread, and the model's size."""
    folder = model_dir()
    embedder = load_embedder(folder, threads=1)
    n_single, n_batched = (16, 64) if smoke else (500, 1280)
    batched = sentences(n_batched)
    return {
        "embed_batch1_sentences_per_s": round(_rate(embedder, sentences(n_single), 1), 1),
        # Lists of 32 as they come: each list is padded to its longest sentence.
        "embed_batch32_sentences_per_s": round(_rate(embedder, batched, 32), 1),
        # One call with every sentence: the embedder sorts by length, so little padding.
        "embed_bulk_sentences_per_s": round(_rate(embedder, batched, len(batched)), 1),
        "embed_model_bytes": float((folder / MODEL_FILE).stat().st_size),
    }


if __name__ == "__main__":
    for key, value in measure().items():
        print(f"{key}: {value:,.1f}")
