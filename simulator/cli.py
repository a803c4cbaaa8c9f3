"""Placeholder; replaced below."""


def main() -> None:
    raise SystemExit("not yet")
