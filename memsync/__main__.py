"""``python -m memsync``: the console entry."""

from memsync.cli import main

raise SystemExit(main())
