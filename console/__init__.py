"""archon-console: a guarded administration console for archon's SQLite database."""

__version__ = "0.1.0"
