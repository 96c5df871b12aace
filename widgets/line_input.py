"""The console's one-line text box: every `Input` in the console is a `LineInput`.

Textual's `Input` keeps only the first line of a paste and drops the rest without a word: a SQL
statement pasted over three lines ran as its first line, an id pasted after a blank line arrived as
nothing. A `LineInput` keeps every line of a paste, joined by one space (what a line break means
between words, ids and SQL tokens), and says so when it joined any; whitespace around the paste is
dropped, so a pasted id arrives as the id. A box whose text is a language with line comments
(the SQL prompt) says how to drop them first (`drop_line_comments`), since joined lines would make a
comment swallow the lines after it.
"""

from __future__ import annotations

from textual import events
from textual.widgets import Input


class LineInput(Input):
    def joined(self, text: str) -> str:
        """The paste as one line: its non-blank lines, stripped, joined by one space."""
        return " ".join(line.strip() for line in text.splitlines() if line.strip())

    def _on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()  # Input's own handler would insert the first line again
        self._insert_paste(event.text)

    def action_paste(self) -> None:
        """Ctrl+V: the console's own clipboard (`y` copied it), pasted the same way."""
        self._insert_paste(self.app.clipboard)

    def _insert_paste(self, text: str) -> None:
        if not text:
            return
        line = self.joined(text)
        if len([part for part in text.splitlines() if part.strip()]) > 1:
            self.notify("The paste's lines were joined into one line (this box holds one line).",
                        markup=False, timeout=4)
        start, end = self.selection
        self.replace(line, start, end)


def drop_line_comments(sql: str) -> str:
    """`sql` without its `-- ...` comments (outside quotes and brackets), line breaks kept: what a
    statement means once its lines are joined into one."""
    out: list[str] = []
    closing = {"'": "'", '"': '"', "`": "`", "[": "]"}
    i, n = 0, len(sql)
    while i < n:
        ch = sql[i]
        if ch in closing:
            end = sql.find(closing[ch], i + 1)
            end = n if end < 0 else end + 1
            out.append(sql[i:end])
            i = end
        elif sql.startswith("/*", i):
            end = sql.find("*/", i + 2)
            end = n if end < 0 else end + 2
            out.append(sql[i:end])
            i = end
        elif sql.startswith("--", i):
            end = sql.find("\n", i)
            i = n if end < 0 else end
        else:
            out.append(ch)
            i += 1
    return "".join(out)


class SqlInput(LineInput):
    """The SQL prompt: a pasted statement's line comments go before its lines are joined."""

    def joined(self, text: str) -> str:
        return super().joined(drop_line_comments(text))


__all__ = ["LineInput", "SqlInput", "drop_line_comments"]
