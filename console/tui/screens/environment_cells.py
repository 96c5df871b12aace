"""The environment list's cells that must say more than their width holds (console/tui/screens/environments.py)."""

from __future__ import annotations

from rich.text import Text

from console.models.environments import EnvironmentView
from widgets.humane import age
from widgets.safe_text import clean

CLAIM_WIDTH = 28
SEP = " · "


def claim_cell(row: EnvironmentView) -> Text:
    """`stop · archon-worker:42 · 29d STALE` in CLAIM_WIDTH cells: the holder gives way (its head
    goes first, the distinguishing tail stays), never the operation, the age or STALE."""
    if not row.operation_claim_id:
        return Text("—", style="dim")
    op = clean(row.operation_kind, one_line=True)
    holder = clean(row.claimed_by, one_line=True)
    how_old = age(row.claim_age_seconds)
    stale = " STALE" if row.stale else ""
    sep = SEP
    room = CLAIM_WIDTH - len(op) - 2 * len(sep) - len(how_old) - len(stale)
    if len(holder) > room and room < 8:  # tight (cleanup_retry): plain spaces leave the holder more
        sep = " "
        room += 2 * (len(SEP) - len(sep))
    if len(holder) > room:
        holder = "…" + holder[-(room - 1):] if room > 1 else "…"
    text = Text(f"{op}{sep}{holder}{sep}{how_old}", no_wrap=True, end="")
    if stale:
        text.append(stale, style="bold yellow")
    return text


__all__ = ["CLAIM_WIDTH", "claim_cell"]
