"""Retrieval: the eight fixed steps (``steps``, ``block``), composed once (``pipeline``),
with the lexical normaliser and relations both sides index with."""
