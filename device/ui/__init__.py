"""The inspector: a loopback page over the device agent (``memsync device ui``).

Invariants: served on 127.0.0.1 only, every request checked against the session (a
one-run token in the first URL, then an HttpOnly SameSite=Strict cookie) and the Host
header, every POST against a per-session CSRF token and its Origin/Referer; pages are
server-rendered with autoescape and no JavaScript (docs/inspector.md).
"""
