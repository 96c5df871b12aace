"""Typed read models the services return and the screens and `--json` read."""
