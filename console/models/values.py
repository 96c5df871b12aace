"""The two kinds of value a read model carries as it was read, named once so every field says which.

`Stored` is a column's value as the console's connections return it. Archon declares its columns
TEXT or INTEGER, but a database file is hostile (SECURITY.md): a file's own `CREATE TABLE` decides
the affinity, any column without STRICT holds any storage class, and a column a release lacks is
None in the model. The read paths keep the value as stored (the `--json` output prints it as
stored, but for instants, which console/clock.py `json_times` prints in one form) and never coerce it; stored text is always `str` (console/db/connect.py `_TEXT` decodes
even invalid UTF-8), so these five are all a field can hold.

`Json` is what the bounded reader (widgets/safe_json.py `read_json`) returns for a stored JSON
column: strict JSON, objects with string keys.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import TypeAlias

Stored: TypeAlias = str | int | float | bytes | None
Json: TypeAlias = str | int | float | bool | None | list["Json"] | dict[str, "Json"]

__all__ = ["Json", "Stored"]
