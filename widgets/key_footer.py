"""The Footer, fitted to the terminal: the keys that matter most are never the ones cut off.

Textual's Footer lays every shown binding out in order and lets the line cut whatever does not
fit; at 80 columns that was `? Help` and `q Quit`. This footer ranks the bindings (help and quit
first, then search and the command line, then what can act now, then Back, then what cannot act,
then Copy), keeps the best-ranked that fit the width, and shows them in their usual order. Below
`COMPACT_BELOW` columns it uses Textual's compact style and leaves out the palette key (Ctrl+P
still opens the palette; `?` lists every key).
"""

from __future__ import annotations

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

COMPACT_BELOW = 120
PALETTE_WIDTH = 14  # "▏ ^p palette " with its border
# binding id -> rank (lower is kept first); ids not listed rank by whether they can act now
RANK = {
    "app.help": 0, "app.quit": 0,
    "approvals.search": 1, "envs.search": 1, "fleet.search": 1, "app.command_line": 1,
    "nav.back": 3, "copy.id": 5,
}
CAN_ACT, CANNOT_ACT = 2, 4


def rank(binding: Binding, enabled: bool) -> int:
    if binding.id in RANK:
        return RANK[binding.id]
    return CAN_ACT if enabled else CANNOT_ACT


class KeyFooter(Footer):
    """A Footer that drops its least important keys, not its last ones, when the line is short."""

    def key_width(self, binding: Binding, enabled: bool = True) -> int:
        """Cells one key takes: its key, its description, and the padding or margin around them."""
        marks = 2 if not enabled and self.app.no_color else 0  # "(Approve)"
        return (cell_len(self.app.get_key_display(binding)) + cell_len(binding.description) + marks
                + (2 if self.compact else 3))

    def fitting(self, width: int) -> tuple[list[tuple[Binding, bool, str]], bool]:
        """The bindings to show, in their order, and whether the palette key fits too."""
        seen: set[str] = set()
        shown: list[tuple[Binding, bool, str]] = []
        for _, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.show and binding.action not in seen:
                seen.add(binding.action)
                shown.append((binding, enabled, tooltip))
        palette = self.show_command_palette and self.app.ENABLE_COMMAND_PALETTE and not self.compact
        budget = width - (PALETTE_WIDTH if palette else 0)
        order = sorted(range(len(shown)), key=lambda i: (rank(shown[i][0], shown[i][1]), i))
        keep: set[int] = set()
        used = 0
        for i in order:
            cost = self.key_width(shown[i][0], shown[i][1])
            if used + cost <= budget:
                keep.add(i)
                used += cost
        return [item for i, item in enumerate(shown) if i in keep], palette

    def compose(self) -> ComposeResult:
        if not self._bindings_ready:
            return
        width = self.app.size.width
        self.compact = width < COMPACT_BELOW
        bindings, palette = self.fitting(width)
        for binding, enabled, tooltip in bindings:
            description = binding.description
            if not enabled and self.app.no_color:  # greyed means dim, which NO_COLOR drops: say it
                description = f"({description})"
            yield FooterKey(binding.key, self.app.get_key_display(binding), description, binding.action,
                            disabled=not enabled, tooltip=tooltip).data_bind(compact=Footer.compact)
        if palette:
            try:
                _node, binding, enabled, tooltip = self.screen.active_bindings[self.app.COMMAND_PALETTE_BINDING]
            except KeyError:
                return
            yield FooterKey(binding.key, self.app.get_key_display(binding), binding.description, binding.action,
                            classes="-command-palette", disabled=not enabled,
                            tooltip=binding.tooltip or binding.description)

    def on_resize(self) -> None:
        self.call_after_refresh(self.recompose)


__all__ = ["KeyFooter"]
