"""Reusable Textual widgets that know nothing of archon: paged tables, JSON, diffs, timelines."""
