"""`archon-console query SQL`: one read-only statement, its first rows as a table, JSON or CSV.

Module-level imports stay light (argparse only); see `commands/approvals.py`.
What makes it safe on a live production file (read-only connection, authorizer, one statement,
deadline, bounded rows and bytes) is console/db/adhoc.py and console/services/query.py; the TUI's
`:sql` runs the same service. Reads only, so it runs in `--read-only` mode and on `inspect` snapshots.
The rows are read before anything is printed: the statement, and its read transaction, end before
a slow reader (`| less`) can hold them open. Every line passes the one sanitiser (the CLI's stdout is
a `SafeStream`); a BLOB prints as `<blob N bytes>`; CSV cells a spreadsheet would run as a formula
get a leading `'` (console/cli/output.py `csv_cell`).
"""

from __future__ import annotations

import argparse

from console.cli.options import whole_number

HELP = "run one read-only SQL statement (SELECT, WITH, VALUES, EXPLAIN, a schema PRAGMA) and print its rows"
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "query", help=HELP, parents=parents,
        description="Runs ONE statement that only reads on a read-only connection that SQLite itself "
        "keeps from writing: every write, ATTACH, transaction, PRAGMA that sets something, and "
        "load_extension() is refused before it runs, as is a second statement. The statement has "
        "the console's deadline (ARCHON_CONSOLE_STATEMENT_SECONDS) and length limit. Prints the first "
        "--limit rows and says when more were cut. Works in --read-only mode and on `inspect` snapshots.",
    )
    p.add_argument("sql", metavar="SQL", help="the statement, quoted as one word; '-' reads it from stdin")
    p.add_argument("--limit", type=whole_number("rows", minimum=1, maximum=MAX_LIMIT), default=DEFAULT_LIMIT,
                   metavar="N", help=f"print at most N rows (default {DEFAULT_LIMIT:,}, at most {MAX_LIMIT:,})")
    p.add_argument("--csv", action="store_true", help="CSV with a header row instead of a table")
    p.set_defaults(handler=run_query)


def _statement(text: str) -> str:
    """The SQL argument, or stdin's for '-' (read up to just past the length limit, so a huge input
    is refused by the same sentence, never read whole)."""
    if text != "-":
        return text
    import sys

    from console.db.adhoc import MAX_STATEMENT_BYTES

    from console.errors import UsageError

    data = sys.stdin.buffer.read(MAX_STATEMENT_BYTES + 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        if len(data) > MAX_STATEMENT_BYTES:  # cut inside a character: the length is what is wrong
            return data.decode("utf-8", "ignore")
        raise UsageError("The statement on stdin is not valid UTF-8 text; nothing was run.") from None


def _cut_note(page, limit: int) -> str | None:
    if not page.more:
        return None
    if page.cut_by_size:
        return (f"Only the first {len(page.rows):,} rows are shown: the result is larger than the console reads "
                "at once. Select fewer columns or narrower values.")
    return f"Only the first {len(page.rows):,} rows are shown; more were cut (--limit N shows up to {MAX_LIMIT:,})."


def run_query(ctx) -> int:
    from console.errors import UsageError
    from console.services.query import open_queries

    args = ctx.args
    if args.json and args.csv:
        raise UsageError("--json and --csv are two formats; give one of them.")
    sql = _statement(args.sql)
    with open_queries(ctx.db_path, busy_timeout_ms=ctx.busy_timeout_ms) as queries:
        page = queries.run(sql, limit=args.limit)
    note = _cut_note(page, args.limit)
    from console.cli.output import emit_json, say

    if args.json:
        emit_json({"columns": page.columns, "rows": [list(r) for r in page.rows], "row_count": len(page.rows),
                   "cut": page.more, "note": note})
        return 0
    if args.csv:
        import csv
        import sys

        from console.cli.output import csv_cell

        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow([csv_cell(c) for c in page.columns])
        writer.writerows([csv_cell(v) for v in row] for row in page.rows)
    elif page.columns:
        from console.cli.output import table

        print(table(([("NULL" if v is None else v) for v in row] for row in page.rows), page.columns))
    if note:
        say(note, err=True)
    elif not args.csv:
        say("The statement returned nothing." if not page.columns else
            f"{len(page.rows):,} row{'s' if len(page.rows) != 1 else ''}.", err=True)
    return 0
