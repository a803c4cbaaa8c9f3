"""The export package: an open, versioned JSON schema for taking one's memory away.

``package`` holds the models (the schema is generated from them, ``schema``), ``layout``
writes and reads the package as a stream of lines, ``versions`` says which schema
versions a reader reads (writers write 2; a version-1 package reads as version 2),
``view`` renders the human-readable Markdown beside it, ``stream`` seals the package
in chunks for delivery to one device, and ``importing`` turns a package into
candidates "imported, not verified".
"""
