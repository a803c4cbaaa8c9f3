"""The ``memsync`` distribution's own package: only the console entry (``memsync.cli``)."""
