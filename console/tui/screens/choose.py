"""Several things match what was typed (`:project atl` with two atlas projects): pick one, as
k9s offers namespaces. Enter opens the highlighted one; Escape leaves you where you were."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList
from textual.widgets.option_list import Option

from widgets.safe_text import safe_text
from widgets.safe_widgets import Static


class ChooseModal(ModalScreen[str | None]):
    """Returns the chosen value, or None. Labels are database text: shown through the sanitiser,
    never parsed as markup."""

    AUTO_FOCUS = "#choices"
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="choose.cancel")]

    def __init__(self, title: str, choices: tuple[tuple[str, str], ...]) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(safe_text(self.title_text, "bold", one_line=True), id="dialog-title")
            yield OptionList(*(Option(safe_text(label, one_line=True), id=str(i))
                               for i, (label, _) in enumerate(self.choices)), id="choices")
            yield Static(Text("Enter opens it · Esc stays here", style="dim"))

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(self.choices[int(event.option.id or 0)][1])

    def action_cancel(self) -> None:
        self.dismiss(None)
