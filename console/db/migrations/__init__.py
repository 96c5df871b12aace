"""Archon's schema history as an ordered registry of guarded migrations (see registry.py)."""
