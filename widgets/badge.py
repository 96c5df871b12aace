"""A short label with a variant (`warning`, `error`, `success`, `info`), styled by the app's CSS."""

from __future__ import annotations

from rich.text import Text

from widgets.safe_text import clean
from widgets.safe_widgets import Static


class Badge(Static):
    DEFAULT_CSS = """
    Badge { width: auto; height: 1; padding: 0 1; margin-right: 1; text-style: bold; }
    Badge.warning { background: $warning; color: $text; }
    Badge.error { background: $error; color: $text; }
    Badge.success { background: $success; color: $text; }
    Badge.info { background: $primary; color: $text; }
    Badge.muted { color: $text-muted; }
    """

    def __init__(self, label: str, variant: str = "info", *, id: str | None = None) -> None:
        super().__init__(Text(clean(label, one_line=True)), id=id, classes=variant)
