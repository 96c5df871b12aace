"""archon-console: a guarded administration console for archon's SQLite database."""

import os as _os

__version__ = "0.2.0"

if _os.environ.get("ARCHON_CONSOLE_AUDIT_FILES"):  # set by the test suite only (console/db/file_guard.py)
    from console.db.file_guard import install_from_environment

    install_from_environment()
