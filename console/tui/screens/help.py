"""`?` / F1: every key of the screen underneath, whether it can act now (and why not), and what
the words on the screens mean."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen

from widgets.safe_widgets import Static

GLOSSARY: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Approval statuses", (
        ("pending", "waiting for a human decision until it expires"),
        ("approved", "a human allowed the action; it may be carried out once"),
        ("denied", "a human refused the action (final)"),
        ("cancelled", "withdrawn before a decision (final)"),
        ("expired", "no decision in time, or approved but not carried out in time (final)"),
        ("invalidated", "an approval revoked, or no longer matching its run or authority (final)"),
        ("consumed", "the approved action was carried out (final)"),
    )),
    ("Environment lifecycle", (
        ("queued / preparing", "being created; admits no runs yet"),
        ("ready / running / stopped", "admits a new execution lease unless claimed or retiring"),
        ("retiring / cleanup_pending", "on its way out; cleanup may be retried"),
        ("retired", "gone (final)"),
        ("failed / unavailable", "broken; reset or retire it"),
    )),
    ("Operation claims", (
        ("stop / retire / reset / cleanup_retry", "an exclusive hold: no new runs while it is held"),
        ("stale", "held longer than the stale limit; someone else may take it over"),
    )),
    ("Migration safety classes", (
        ("additive", "adds tables, columns, indexes or triggers; old data untouched"),
        ("data-preserving-rebuild", "rebuilds a table and copies every row; needs a snapshot"),
        ("historical-destructive", "drops or rewrites data; needs --force and a typed confirmation"),
    )),
)


def bindings_table(screen: Screen, reasons: dict[str, str]) -> Table:
    table = Table(box=None, expand=True, show_edge=False, pad_edge=False)
    table.add_column("key", style="bold", no_wrap=True)
    table.add_column("does", ratio=2)
    table.add_column("now", ratio=3)
    # One row per action: the key the Footer shows first (q, not the ^q Textual also binds).
    rows: dict[tuple[str, str], list] = {}
    for key, active in screen.active_bindings.items():
        binding = active.binding
        if binding.system or not binding.description:
            continue
        rows.setdefault((binding.action.split(".")[-1], binding.description), []).append(active)
    for actives in rows.values():
        actives.sort(key=lambda a: not a.binding.show)
    # The Footer's keys first (at 80x24 the rest is below the fold), then the hidden ones.
    for (action, description), actives in sorted(rows.items(), key=lambda item: not item[1][0].binding.show):
        active = actives[0]
        display = ", ".join(dict.fromkeys(a.binding.key_display or screen.app.get_key_display(a.binding)
                                          for a in actives))
        why = reasons.get(action)
        now = Text(why, style="yellow") if why else (Text("ready") if active.enabled else Text("not now", style="dim"))
        table.add_row(Text(display), Text(description), now)
    return table


def glossary_table() -> Table:
    table = Table(box=None, expand=True, show_edge=False, pad_edge=False, show_header=False)
    table.add_column("word", style="bold", no_wrap=True)
    table.add_column("means", ratio=3)
    for heading, rows in GLOSSARY:
        table.add_row(Text(heading, style="bold underline"), "")
        for word, meaning in rows:
            table.add_row(Text(word), Text(meaning))
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "close", "Close", id="help.close")]

    def __init__(self, under: Screen) -> None:
        super().__init__()
        self.under = under

    def compose(self) -> ComposeResult:
        reasons = getattr(self.under, "unavailable", lambda: {})()
        title = getattr(self.under, "TITLE", "") or "console"
        notes = getattr(self.under, "HELP_NOTES", "")
        with Vertical(id="dialog", classes="wide"):
            yield Static(Text(f"Keys — {title}", style="bold"), id="dialog-title")
            with VerticalScroll(id="help-body"):
                yield Static(bindings_table(self.under, reasons))
                if notes:
                    yield Static(Text("\n" + notes))
                yield Static(Text("\nWhat the words mean", style="bold"))
                yield Static(glossary_table())
                yield Static(Text("\nKeys can be changed in ~/.config/archon-console/tui/keymap.toml "
                                  "([keys] binding-id = \"key\").", style="dim"))

    def action_close(self) -> None:
        self.dismiss(None)
