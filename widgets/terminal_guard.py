"""Where the TUI meets the terminal: nothing built from database text reaches it unsanitised.

Cleaning each string where it is shown fails one caller at a time (a toast that quotes a table
name, a copied id). So the app closes every door Textual has to the terminal, whatever its caller
did, with the one sanitiser (`widgets/safe_text.py` `clean`):

- `GuardedApp.notify`: every toast's message and title are cleaned and never parsed as markup;
- `SafeTitles`: the app's and every console screen's `title` and `sub_title` are cleaned when set;
- `CleanFilter`: every painted line (tables, panes, toasts, the palette, the header) has any
  control character left in it pictured before the compositor sends it, at the same width;
- `GuardedApp.copy_to_clipboard` and `widgets/clipboard.py`: the clipboard refuses text that
  carries a control character, so a pasted id cannot end a shell's bracketed paste or run a line.

Rich markup is the one thing a filter cannot undo (it is acted on before painting): the console's
Static and DataTable (`widgets/safe_widgets.py`) never parse it, and
`tests/adversarial/test_terminal_doors.py` forbids Textual's own, `markup=` other than False, a
markup string built for a widget, a palette hit's `help=` and any other way to the clipboard.
"""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from textual.color import Color
from textual.filter import LineFilter

from widgets.clipboard import copy_refusal
from widgets.safe_text import clean, first_unsafe


class CleanFilter(LineFilter):
    """Pictures what a caller forgot to clean; a line keeps its width (pictures of zero-width
    controls that would widen it are cut at its end), so the layout does not shift."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(first_unsafe(segment.text) for segment in segments if segment.control is None):
            return segments
        width = Segment.get_line_length(segments)
        cleaned = [segment if segment.control is not None or not first_unsafe(segment.text)
                   else Segment(clean(segment.text), segment.style) for segment in segments]
        return Segment.adjust_line_length(cleaned, width)


class SafeTitles:
    """`title` and `sub_title` cleaned on assignment (Textual calls `validate_<name>` for reactives)."""

    def validate_title(self, value: Any) -> Any:
        return None if value is None else clean(value, one_line=True)

    def validate_sub_title(self, value: Any) -> Any:
        return None if value is None else clean(value, one_line=True)


class GuardedApp(SafeTitles):
    """Mixed into the Textual `App` before it: the toast and clipboard doors."""

    def install_clean_filter(self) -> None:
        filters = getattr(self, "_filters")
        if not any(isinstance(f, CleanFilter) for f in filters):
            filters.insert(0, CleanFilter())

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:
        super().notify(clean(message), title=clean(title, one_line=True),  # type: ignore[misc]
                       severity=severity, timeout=timeout, markup=False)

    def action_help_quit(self) -> None:
        """Textual's ctrl+c hint is its one toast written in markup, which `notify` no longer
        parses: the same words, plain."""
        for key, active in getattr(self, "active_bindings").items():
            if active.binding.action in ("quit", "app.quit"):
                self.notify(f"Press {key} to quit the app.", title="Do you want to quit?")
                return

    def copy_to_clipboard(self, text: str) -> None:
        """Textual's OSC 52 copy (also used by its own text selection): unsafe text is refused."""
        why = copy_refusal(text, structural_lines=True)
        if why is not None:
            self.notify(f"Nothing was copied: {why}.", severity="warning")
            return
        super().copy_to_clipboard(text)  # type: ignore[misc]


__all__ = ["CleanFilter", "GuardedApp", "SafeTitles"]
