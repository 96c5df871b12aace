"""Typed read models the services return and the screens and `--json` output read: one module per domain area."""
