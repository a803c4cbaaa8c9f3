"""Retrieval: the eight fixed steps (``steps``, ``block``), composed once (``pipeline``),
with the lexical normaliser, the searchable text and the relations both sides index with."""

from protocol.retrieval.text import searchable_text

__all__ = ["searchable_text"]
