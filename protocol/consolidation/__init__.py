"""The pure extraction and merging code the consolidator runs (cloud worker, and the
device for classes kept device-only): time expressions, life areas, sensitivity,
content type (``extract``), and behaviour observations merged into evidence
(``observations``). Rules and thresholds: docs/consolidation-rules.md."""
