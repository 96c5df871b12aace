"""The demo database: realistic archon data of any size and any historical release.

console/demo/writer.py `generate(path, ...)` is the whole API; callers import it from there.
"""
