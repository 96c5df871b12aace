"""Copy archon's SQL out of the seed diffs into tests/reference/data/, with its source lines.

`.venv/bin/python tests/reference/extract.py tests/reference/seeds [OUT_DIR]` (from the repository
root) writes `archon_<release>.json`; tests/test_reference_extract.py runs it on the committed seeds
and requires its output to equal tests/reference/data byte for byte, so the data cannot drift from
the seeds. `borrowed_1.8.20.json` is not written here: it is frozen data (README.md here).

A seed is a unified diff of archon's `db.js`. Each side of it (old = the earlier release, new =
the later one) is rebuilt hunk by hunk from its context and changed lines; every string literal
passed to `db.exec(...)` or `db.prepare(...)` becomes an entry. A literal cut by a hunk boundary
is kept as a `fragment` (only part of its text is in the seed); a complete literal is split into
single SQL statements. Each entry records the seed file, its side, and the seed's line numbers.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

SEEDS = {
    # seed file prefix -> (old release, new release)
    "001_": ("1.8.20", "1.8.22"),
    "000_": ("1.8.23", "1.10.0"),
}
HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@ ?(.*)$")
OPEN = re.compile(r"(?:(?:const|let)\s+(\w+)\s*=\s*)?db\.(exec|prepare)\((`|'|\")")
FUNC = re.compile(r"^\s*const (\w+) = \(\) => \{")
CREATE = re.compile(
    r"^\s*CREATE\s+(?:UNIQUE\s+)?(TABLE|INDEX|TRIGGER)\s+(?:IF NOT EXISTS\s+)?([\w\"]+)", re.I
)
DROP = re.compile(r"^\s*DROP\s+(TABLE|INDEX|TRIGGER)\s+(?:IF EXISTS\s+)?([\w\"]+)", re.I)


def hunks(lines: list[str]):
    """Yield (header_context, [(seed_line_no, marker, text)]) for every hunk."""
    current = None
    for number, line in enumerate(lines, 1):
        m = HUNK.match(line)
        if m:
            if current:
                yield current
            current = (m.group(3), [])
            continue
        if current is None or not line or line[0] not in " +-":
            if current is not None and line == "":
                current[1].append((number, " ", ""))
            continue
        current[1].append((number, line[0], line[1:]))
    if current:
        yield current


def side_lines(body, side: str):
    keep = " -" if side == "old" else " +"
    return [(n, text) for n, marker, text in body if marker in keep]


def literals(header: str, rows: list[tuple[int, str]]):
    """String literals given to db.exec/db.prepare in one hunk side: (meta, [(line, text)])."""
    function = None
    fm = FUNC.match(header)
    if fm:
        function = fm.group(1)
    out = []
    inside = None  # (var, call, quote, start_line, collected)
    # A hunk may begin inside a template literal: lines up to a closing backtick with no opener.
    first_open = next((i for i, (_, t) in enumerate(rows) if OPEN.search(t)), len(rows))
    first_close = next((i for i, (_, t) in enumerate(rows) if t.lstrip().startswith("`")), None)
    start = 0
    if first_close is not None and first_close < first_open:
        collected = rows[:first_close]
        if any(t.strip() for _, t in collected):
            out.append(({"call": "exec", "var": None, "function": function, "complete": False,
                         "cut": "start"}, collected))
        start = first_close + 1
    elif first_close is None and (header.rstrip().endswith("(`") or header.startswith("if (")):
        # The whole hunk (up to any opener) lies inside a literal opened before it.
        collected = rows[:first_open]
        if any(t.strip() for _, t in collected):
            out.append(({"call": "exec", "var": None, "function": function, "complete": False,
                         "cut": "both"}, collected))
        start = first_open
    for index in range(start, len(rows)):
        n, text = rows[index]
        if inside is None:
            fm = FUNC.match(text)
            if fm:
                function = fm.group(1)
            m = OPEN.search(text)
            if not m:
                continue
            var, call, quote = m.group(1), m.group(2), m.group(3)
            rest = text[m.end():]
            end = rest.find(quote)
            if end >= 0:
                out.append(({"call": call, "var": var, "function": function, "complete": True},
                            [(n, rest[:end])]))
                continue
            inside = (var, call, quote, [(n, rest)] if rest.strip() else [])
            continue
        var, call, quote, collected = inside
        end = text.find(quote)
        if end >= 0:
            if text[:end].strip():
                collected.append((n, text[:end]))
            out.append(({"call": call, "var": var, "function": function, "complete": True}, collected))
            inside = None
        else:
            collected.append((n, text))
    if inside is not None:
        var, call, quote, collected = inside
        out.append(({"call": call, "var": var, "function": function, "complete": False, "cut": "end"},
                    collected))
    return out


def split_statements(rows: list[tuple[int, str]]):
    """Split a complete literal into SQL statements, each with its first and last seed line."""
    statements, buffer, first = [], [], None
    for n, text in rows:
        if not buffer and not text.strip():
            continue
        if first is None:
            first = n
        buffer.append(text)
        joined = "\n".join(buffer)
        if sqlite3.complete_statement(joined):
            statements.append((first, n, joined.strip().rstrip(";").rstrip()))
            buffer, first = [], None
    if buffer and "\n".join(buffer).strip():
        statements.append((first, rows[-1][0], "\n".join(buffer).strip()))
    return statements


def whole_creates(rows: list[tuple[int, str]]):
    """Complete CREATE statements lying wholly inside a fragment (a literal cut by hunk edges)."""
    found = []
    for index, (n, text) in enumerate(rows):
        if not CREATE.match(text):
            continue
        buffer = []
        for m, more in rows[index:]:
            buffer.append(more)
            joined = "\n".join(buffer)
            if sqlite3.complete_statement(joined):
                found.append((n, m, joined.strip().rstrip(";").rstrip()))
                break
    return found


def name_of(sql: str, meta: dict) -> str:
    m = CREATE.match(sql)
    if m:
        return f"create {m.group(1).lower()} {m.group(2).strip(chr(34))}"
    m = DROP.match(sql)
    if m:
        return f"drop {m.group(1).lower()} {m.group(2).strip(chr(34))}"
    head = " ".join(sql.split()[:3])
    where = meta.get("var") or meta.get("function") or "top level"
    return f"{meta['call']} {where}: {head}"


def extract(seed: Path) -> dict[str, list[dict]]:
    old_release, new_release = next(v for k, v in SEEDS.items() if seed.name.startswith(k))
    lines = seed.read_text(encoding="utf-8").split("\n")
    result: dict[str, list[dict]] = {old_release: [], new_release: []}
    for header, body in hunks(lines):
        for side, release in (("old", old_release), ("new", new_release)):
            for meta, rows in literals(header, side_lines(body, side)):
                changed = {n for n, marker, _ in body if marker != " "}
                base = {"seed": seed.name, "side": side, "release": release, **meta}
                if not meta["complete"] or meta["call"] == "prepare":
                    text = "\n".join(t for _, t in rows)
                    pieces = [(rows[0][0], rows[-1][0], text.strip("\n"))] if rows else []
                else:
                    pieces = split_statements(rows)
                if not meta["complete"]:
                    pieces += [(f, l, q) for f, l, q in whole_creates(rows)]
                for first, last, sql in pieces:
                    entry = {
                        **base,
                        "name": name_of(sql, meta) if meta["complete"] or CREATE.match(sql) else "fragment",
                        "lines": [first, last],
                        "changed_in_seed": any(first <= n <= last for n in changed),
                        "sql": sql,
                    }
                    result[release].append(entry)
    return result


def main(seed_dir: str, out_dir: str | None = None) -> None:
    out = Path(out_dir) if out_dir else Path(__file__).resolve().parent / "data"
    out.mkdir(exist_ok=True)
    merged: dict[str, list[dict]] = {}
    for seed in sorted(Path(seed_dir).glob("*.txt")):
        if not any(seed.name.startswith(k) for k in SEEDS):
            continue
        for release, entries in extract(seed).items():
            merged.setdefault(release, []).extend(entries)
    for release, entries in merged.items():
        path = out / f"archon_{release}.json"
        path.write_text(json.dumps(entries, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{path.name}: {len(entries)} entries")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: extract.py SEED_DIR [OUT_DIR]")
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else None)
