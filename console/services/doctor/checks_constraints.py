"""CHECK and NOT NULL constraints of archon's tables, verified row by row by doctor itself.

SQLite 3.40 skips CHECK constraints in a `quick_check`/`integrity_check` on a connection that cannot
write, and doctor never opens one that can: a request with `action_kind = 'rm_rf'` or a malformed
fingerprint (written with `PRAGMA ignore_check_constraints`, or by a tool that edited the schema)
passed `doctor --full` with 0 errors. This check evaluates every constraint over every row.

Why it is safe to run on a hostile file (the CREATE TABLE text in sqlite_master is the file's, and
a crafted one must not run SQL of its author's choosing in doctor's statements):

- **No SQL text from the file is ever executed.** Each CHECK clause of the file's CREATE TABLE is
  tokenized (`_tokens`: string literals, quoted names, blobs, numbers, comments, operators, as
  SQLite's tokenizer splits them) and compared, token for token (ASCII case folded outside literals,
  whitespace and comments dropped), with the CHECK clauses of the *same table* in the console's
  own schema history: every CREATE TABLE the migration registry (console/db/migrations/) produces
  at any step, replayed once in memory (`known_checks`). On a match doctor evaluates the console's
  own text of that clause, not the file's; a clause that matches nothing is never evaluated but
  reported by name and text (`constraints.unrecognised`, a warning), so "0 errors" never hides a
  constraint that was skipped. An extractor fooled by a crafted text (an unbalanced parenthesis, a
  `)` inside a comment or a literal) can only make a clause fail to match, never make the file's
  text run. The same tokenizer splits both sides, so two texts that match differ only in
  whitespace, comments and ASCII case outside literals, none of which changes an expression.
- A constraint of archon's that the file's table does not hold (dropped, or rewritten into a text
  that matches nothing) is evaluated all the same, in the console's text: each table's CHECK keys and
  NOT NULL columns are compared with every shape the registry gives that table, and what the closest
  shapes hold and the file lacks is added, labelled `ABSENT`. A row breaking archon's rule is an
  error whatever the file's own text says. The file's version, if any, stays unrecognised.
- Only archon's tables are read (names the registry creates, in any ASCII case, as SQLite resolves
  them: archon's `approval_requests` reads a table named `APPROVAL_REQUESTS`); NOT NULL constraints come from
  `PRAGMA table_info` (SQLite's own parse) and are checked as `typeof("column") = 'null'`, the
  column name passing `quote_identifier` (console/db/sql.py) like every name spliced into SQL.
  Not `"column" IS NULL`: SQLite's planner rewrites that to false for a column declared NOT NULL
  (unary `+` does not stop it), so it can never find the NULL it is looking for.
- The statements run on a read-only connection (`query_only`), under doctor's statement budget
  and the console's value-size limits (console/db/limits.py).

CHECK semantics: a row breaks a constraint only when its expression is false; NULL passes. The scan
selects `NOT (expr)`, which is true exactly then, and NULL (skipped) when the expression is NULL.

One scan per table for all of its constraints (`SELECT key, (t1), (t2), ... WHERE t1 OR t2 ...`,
the ORs as a balanced tree to stay far from SQLite's expression-depth limit; a table with more than
`TERMS_PER_SCAN` constraints, which archon's never have, takes one scan per chunk). A constraint
must hold on every row, so no index can spare the scan: it reads each table once. Memory stays flat:
per constraint a count and its first `KEPT_PER_CONSTRAINT` row keys.

The two largest tables are not scanned here when the approvals check runs too: its pass reads every
request and, by index seeks, every event (checks_approvals.py), and evaluates the same terms on each
row it reads (`row_probe`), so each table is read once for both checks, with the same findings. A
table the pass cannot vouch for (it failed, or some event belongs to no request) is scanned here.

A clean file gives no finding (the report's list of checks run names this one): an "all verified"
note could not be rebuilt from a redacted bundle's copy, whose placeholders break archon's CHECKs
on purpose (console/services/redaction.py `redacted_copy`), so the bundle would withhold it.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass, field
from functools import lru_cache

from console.db.connect import is_busy
from console.db.sql import quote_identifier, sqlite_lower, table_xinfo
from console.services.doctor.context import Ctx
from console.services.doctor.report import ROW_LIMIT, SHOWN_IDS, Finding, busy_finding
from console.text import one_line

TERMS_PER_SCAN = 200
FOLDED_TERMS = 100  # at most this many in the approvals pass: one call takes them all (SQLite: 127 arguments)
KEPT_PER_CONSTRAINT = 20
MAX_TABLE_SQL = 1_000_000  # characters of one CREATE TABLE read at all (archon's whole schema is ~40 KB)
SHOWN_CONSTRAINTS = 10
ABSENT = "(archon's, absent from this file)"
SHOWN_TEXT = 160  # cells of a constraint's text in `found`

# SQLite's token classes (tokenize.c): whitespace is only these five characters; every byte from
# 0x80 on is an identifier character; literals and quoted names run to their closing quote (a
# doubled quote inside), or to the end of an unterminated text.
_TOKEN = re.compile(
    r"""(?P<space>[ \t\n\f\r]+)
      | (?P<comment>--[^\n]*|/\*.*?(?:\*/|\Z))
      | (?P<string>'(?:[^']|'')*(?:'|\Z))
      | (?P<name>"(?:[^"]|"")*(?:"|\Z)|`(?:[^`]|``)*(?:`|\Z)|\[[^\]]*(?:\]|\Z))
      | (?P<blob>[xX]'[^']*(?:'|\Z))
      | (?P<number>0[xX][0-9A-Fa-f]+|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)
      | (?P<word>[A-Za-z_\x80-\U0010FFFF][A-Za-z0-9_$\x80-\U0010FFFF]*)
      | (?P<op>\|\||<<|>>|<=|>=|==|!=|<>|->>|->|.)""",
    re.S | re.X,
)


@dataclass(frozen=True)
class Token:
    text: str  # normalized: words ASCII-folded, everything else as written
    kind: str
    start: int
    end: int


def _tokens(sql: str) -> list[Token]:
    """`sql`'s tokens without whitespace and comments."""
    out = []
    for match in _TOKEN.finditer(sql):
        kind = match.lastgroup or "op"
        if kind in ("space", "comment"):
            continue
        text = match.group()
        out.append(Token(sqlite_lower(text) if kind in ("word", "blob") else text, kind, match.start(), match.end()))
    return out


@dataclass(frozen=True)
class Clause:
    key: tuple[str, ...]  # the normalized tokens of the expression: what two texts must share
    text: str  # the expression as written in the text it came from
    name: str | None = None  # CONSTRAINT name, as written
    note: str = ""  # said after the label: why doctor evaluates a clause the file does not hold


def check_clauses(sql: str) -> list[Clause]:
    """The CHECK clauses of a CREATE TABLE text. An unbalanced one runs to the end of the text (it
    can then match nothing the console knows). One pass over the tokens: the search resumes after
    each clause, so a text of a thousand unclosed `CHECK (` costs what its length costs."""
    tokens = _tokens(sql)
    clauses = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not (token.kind == "word" and token.text == "check" and i + 1 < len(tokens) and tokens[i + 1].text == "("):
            i += 1
            continue
        depth, j = 0, i + 1
        while j < len(tokens):
            if tokens[j].kind == "op" and tokens[j].text == "(":
                depth += 1
            elif tokens[j].kind == "op" and tokens[j].text == ")":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        start = tokens[i + 1].end
        end = tokens[j].start if j < len(tokens) else len(sql)
        named = i >= 2 and tokens[i - 2].kind == "word" and tokens[i - 2].text == "constraint"
        name = sql[tokens[i - 1].start:tokens[i - 1].end] if named else None
        clauses.append(Clause(tuple(t.text for t in tokens[i + 2:j]), sql[start:end].strip(), name))
        i = j + 1
    return clauses


# The CHECK clauses archon writes inline when it *creates* a database at 1.8.22 or 1.10.0 (its
# CREATE TABLE lists the columns that its upgrade path, and so the registry's steps, add by
# `ensureColumn`, without a CHECK): archon's own text, as tests/reference/data/archon_1.8.22.json and
# archon_1.10.0.json show it (tests/test_doctor_constraints.py holds this list to those files).
_FINGERPRINT = "{0} IS NULL OR (length({0}) = 64 AND {0} NOT GLOB '*[^0-9a-f]*')"
ARCHON_CREATE_CHECKS: dict[str, tuple[str, ...]] = {
    "execution_environments": (
        "(execution_profile_revision_id IS NULL) = (execution_profile_fingerprint IS NULL)",
        "(execution_profile_fingerprint IS NULL) = (credential_requirements_fingerprint IS NULL)",
        _FINGERPRINT.format("execution_profile_fingerprint"),
        _FINGERPRINT.format("credential_requirements_fingerprint"),
        "(operation_claim_id IS NULL) = (operation_kind IS NULL)",
        "(operation_claim_id IS NULL) = (operation_claimed_at IS NULL)",
        "operation_kind IS NULL OR operation_kind IN ('stop', 'retire', 'reset', 'cleanup_retry')",
    ),
    "execution_environment_run_bindings": (_FINGERPRINT.format("execution_profile_fingerprint"),),
}


@lru_cache(maxsize=1)
def known_checks() -> dict[str, dict[tuple[str, ...], str]]:
    """table -> {normalized CHECK expression -> the console's text of it}, for every CREATE TABLE
    the migration registry produces at any step (archon's schema in every release the console knows,
    and every state an upgrade passes through), and `ARCHON_CREATE_CHECKS`. A table without CHECKs
    maps to {}."""
    return _archon()[0]


@dataclass(frozen=True)
class Shape:
    """One state of an archon table: its CHECK keys, NOT NULL columns and columns (ASCII-folded)."""
    checks: frozenset
    not_null: frozenset
    columns: frozenset


@lru_cache(maxsize=1)
def _archon() -> tuple[dict[str, dict[tuple[str, ...], str]], dict[str, list[Shape]]]:
    """`known_checks`, and per table every `Shape` it has at some registry step. A file's table that
    holds none of these shapes whole lacks one of archon's constraints, which doctor then evaluates
    itself (`_plan_table`)."""
    from console.db.connection import scratch_connection
    from console.db.migrations.registry import MIGRATIONS
    from console.db.migrations.runner import apply_migration

    known: dict[str, dict[tuple[str, ...], str]] = {}
    shapes: dict[str, list[Shape]] = {}
    read: set[tuple[str, str]] = set()  # most steps leave most tables' text as it was
    conn = scratch_connection()
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        for migration in MIGRATIONS:
            apply_migration(conn, migration)
            for name, sql in conn.execute(
                    "SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"):
                found = known.setdefault(name, {})
                if (name, sql or "") in read:
                    continue
                read.add((name, sql or ""))
                clauses = check_clauses(sql or "")
                for clause in clauses:
                    found.setdefault(clause.key, clause.text)
                xinfo = table_xinfo(conn, name)
                shapes.setdefault(name, []).append(Shape(frozenset(c.key for c in clauses),
                                                         frozenset(sqlite_lower(r[1]) for r in xinfo if r[3]),
                                                         frozenset(sqlite_lower(r[1]) for r in xinfo)))
    finally:
        conn.close()
    for name, texts in ARCHON_CREATE_CHECKS.items():
        for text in texts:
            known.setdefault(name, {}).setdefault(check_clauses(f"CHECK ({text})")[0].key, text)
    return known, shapes


# --- the plan: what each table is checked for ---------------------------------------------------


@dataclass
class Constraint:
    table: str
    kind: str  # "check" or "not_null"
    label: str  # what a person reads: `CHECK (...)` (as the file writes it) or `NOT NULL column`
    term: str  # SQL true exactly for a row that breaks it (the console's text, or a quoted name)
    count: int = 0
    kept: list[str] = field(default_factory=list)


@dataclass
class TablePlan:
    table: str
    keys: list[str]  # SQL of the columns naming a row (a single primary key, else rowid, else the key columns)
    key_label: str  # "" for a primary key value, "rowid " for a rowid
    constraints: list[Constraint]


@dataclass
class Plan:
    tables: list[TablePlan] = field(default_factory=list)
    unrecognised: list[tuple[str, str]] = field(default_factory=list)  # (table, label)
    unchecked: list[tuple[str, str]] = field(default_factory=list)  # (table or label, SQLite's message)
    checks: int = 0
    not_nulls: int = 0


def _label(clause: Clause) -> str:
    text = f"CHECK ({' '.join(clause.text.split())})" + (f" {clause.note}" if clause.note else "")
    return f"CONSTRAINT {clause.name} {text}" if clause.name else text


def make_plan(conn: sqlite3.Connection) -> Plan:
    """Which constraints of which archon tables to evaluate, read from the file's schema (module
    docstring: only the console's text of a CHECK is ever run). A table whose shape SQLite cannot
    report (a virtual table of a missing module) is named in `unchecked`; the others still plan."""
    known = known_checks()
    plan = Plan()
    rows = conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('table', 'view') ORDER BY rowid")
    for kind, name, sql in rows.fetchall():
        archon = sqlite_lower(name)  # SQLite's names are ASCII case-blind: APPROVAL_REQUESTS is archon's
        if archon not in known:
            continue  # not archon's table
        if kind == "view":  # archon reads its rows as the table's, and nothing holds them to a constraint
            plan.unchecked.append((name, "a view where archon has a table: none of archon's constraints hold its rows"))
            continue
        try:
            _plan_table(conn, plan, name, sql if isinstance(sql, str) else "", known[archon], _archon()[1].get(archon, []))
        except sqlite3.DatabaseError as exc:
            if is_busy(exc) or "interrupt" in str(exc):
                raise
            plan.unchecked.append((name, str(exc)))
    return plan


def _plan_table(conn: sqlite3.Connection, plan: Plan, name: str, text: str,
                known: dict[tuple[str, ...], str], shapes: list[Shape]) -> None:
    table = quote_identifier(name)
    # A generated column is computed at every read from an expression the file's author chose
    # (console/db/sql.py): a CHECK that names one is not evaluated, so its expression never runs.
    xinfo = table_xinfo(conn, name)
    generated = {sqlite_lower(r[1]) for r in xinfo if r[6] in (2, 3)}
    constraints: list[Constraint] = []
    if len(text) > MAX_TABLE_SQL:
        plan.unrecognised.append((name, f"its CREATE TABLE text ({len(text):,} characters, not read)"))
        clauses: list[Clause] = []
    else:
        clauses = check_clauses(text)
    # A constraint of archon's that the file's table lacks (dropped, or rewritten into a text doctor
    # does not know) is still archon's rule: the shapes of this table that the file comes closest to
    # holding whole name what is absent, and doctor evaluates it too (its own text, like the others).
    stored = {sqlite_lower(r[1]): r[1] for r in xinfo if r[6] == 0}
    # A column the shape does not share with the file counts as a difference too: else a file that
    # dropped the NOT NULL of a column a later step added came closest to the step before it.
    has = Shape(frozenset(c.key for c in clauses), frozenset(sqlite_lower(r[1]) for r in xinfo if r[3]),
                frozenset(sqlite_lower(r[1]) for r in xinfo))
    gaps = [(s.checks - has.checks, s.not_null - has.not_null, len(s.columns ^ has.columns)) for s in shapes]
    fewest = min((len(c) + len(n) + d for c, n, d in gaps), default=0)
    closest = [(c, n) for c, n, d in gaps if len(c) + len(n) + d == fewest]
    absent_checks = sorted(set().union(*(c for c, _ in closest)))
    absent_nulls = sorted(set().union(*(n for _, n in closest)))
    clauses = clauses + [Clause(key, known[key], note=ABSENT) for key in absent_checks]
    seen: set[tuple[str, ...]] = set()
    for clause in clauses:
        if clause.key in seen:
            continue
        seen.add(clause.key)
        ours = known.get(clause.key)
        reads = sorted(generated & {_unquoted(t) for t in clause.key})
        if ours is None:
            plan.unrecognised.append((name, _label(clause)))
        elif reads:
            plan.unrecognised.append((name, f"{_label(clause)} (reads the generated column {', '.join(reads)})"))
        else:
            constraints.append(Constraint(name, "check", _label(clause), f"NOT ({ours})"))
    # NOT NULL as SQLite's own parse reports it, and archon's absent ones; a generated column is
    # named, not read (its value is the file's expression), a column the file lacks is the schema check's
    own = [(r[1], "") for r in xinfo if r[3] and r[6] in (0, 2, 3)]
    for column, note in own + [(stored.get(c) or c, f" {ABSENT}") for c in absent_nulls]:
        if sqlite_lower(column) in generated:
            plan.unrecognised.append((name, f"NOT NULL {column}{note} (a generated column here)"))
        elif sqlite_lower(column) in stored:
            constraints.append(Constraint(name, "not_null", f"NOT NULL {column}{note}",
                                          f"typeof({quote_identifier(column)}) = 'null'"))
    usable = []
    for constraint in constraints:  # each term alone first: one that SQLite cannot prepare is named
        try:
            conn.execute(f"SELECT 1 FROM {table} WHERE {constraint.term} LIMIT 0").fetchall()
            usable.append(constraint)
        except sqlite3.OperationalError as exc:
            if "interrupt" in str(exc):
                raise
            plan.unchecked.append((f"{name} {constraint.label}", str(exc)))
    if usable:
        plan.checks += sum(1 for c in usable if c.kind == "check")
        plan.not_nulls += sum(1 for c in usable if c.kind == "not_null")
        keys, key_label = _row_key(conn, name)
        plan.tables.append(TablePlan(name, keys, key_label, usable))


def _unquoted(token: str) -> str:
    """A name token as the name it spells, ASCII-folded (`"A""b"` -> `a"b`)."""
    if token[:1] in ('"', "`") and len(token) >= 2:
        return sqlite_lower(token[1:-1].replace(token[0] * 2, token[0]))
    if token[:1] == "[":
        return sqlite_lower(token[1:-1])
    return token


def _row_key(conn: sqlite3.Connection, name: str) -> tuple[list[str], str]:
    table = quote_identifier(name)
    pk = sorted((r[5], r[1]) for r in conn.execute(f"PRAGMA table_info({table})") if r[5])
    if len(pk) == 1:
        return [quote_identifier(pk[0][1])], ""
    try:
        conn.execute(f"SELECT rowid FROM {table} LIMIT 0").fetchall()
        return ["rowid"], "rowid "
    except sqlite3.OperationalError:  # WITHOUT ROWID: its primary key columns
        return [quote_identifier(c) for _, c in pk], ""


# --- the scan -----------------------------------------------------------------------------------


def _any(terms: list[str]) -> str:
    """`(t1) OR (t2) OR ...` as a balanced tree (depth log2 n, not n)."""
    if len(terms) == 1:
        return f"({terms[0]})"
    middle = len(terms) // 2
    return f"({_any(terms[:middle])} OR {_any(terms[middle:])})"


def key_text(table: TablePlan, values) -> str:
    """How a finding names a row, from the values of `table.keys`."""
    return table.key_label + (str(values[0]) if len(values) == 1 else "(" + ", ".join(map(str, values)) + ")")


def scan(conn: sqlite3.Connection, plan: Plan) -> Plan:
    """Count and sample the rows breaking each planned constraint; a table SQLite cannot read is
    noted in `plan.unchecked` and the others still run."""
    for table in plan.tables:
        width = len(table.keys)
        try:
            for start in range(0, len(table.constraints), TERMS_PER_SCAN):
                chunk = table.constraints[start:start + TERMS_PER_SCAN]
                terms = [c.term for c in chunk]
                # Each term as a condition (`CASE WHEN`), as SQLite evaluates a CHECK: it stops at
                # the first false operand of an AND. As a value both operands are computed, and
                # `json_valid(p) AND json_type(p) = 'object'` raised on text that is not JSON.
                sql = (f"SELECT {', '.join(table.keys)}, {', '.join(f'CASE WHEN ({t}) THEN 1 END' for t in terms)} "
                       f"FROM {quote_identifier(table.table)} WHERE {_any(terms)}")
                for row in conn.execute(sql):
                    key = key_text(table, row[:width])
                    for constraint, broken in zip(chunk, row[width:]):
                        if broken:
                            constraint.count += 1
                            if len(constraint.kept) < KEPT_PER_CONSTRAINT:
                                constraint.kept.append(key)
        except sqlite3.DatabaseError as exc:
            if is_busy(exc) or "interrupt" in str(exc):
                raise
            plan.unchecked.append((table.table, str(exc)))
    return plan


def constraint_plan(ctx: Ctx) -> Plan:
    """The plan, made once per run on the main connection (the schema: quick)."""
    if ctx.constraint_plan is None:
        ctx.constraint_plan = make_plan(ctx.conn)
    return ctx.constraint_plan


def foldable(ctx: Ctx, name: str) -> TablePlan | None:
    """The plan of `name` when this check runs and the approvals pass can evaluate it for it."""
    if "constraints" not in ctx.names:
        return None
    table = next((t for t in constraint_plan(ctx).tables if t.table == name), None)
    return table if table is not None and len(table.constraints) <= FOLDED_TERMS else None


def row_probe(table: TablePlan, tag: int, rowid: str) -> str:
    """SQL evaluating `table`'s planned terms on its row `rowid` (an expression of the caller's
    query): 0, or for a row breaking one, `doctor_broken(tag, rowid, keys..., terms...)`'s value.
    A scalar subquery over `table` alone, never flattened into the caller's join: each term is
    compiled as in `scan` (the same names, the same NOT NULL shortcuts: folded into a join, a
    NULL in a NOT NULL column gave `IN` another answer), on the page the caller has just read."""
    terms = [c.term for c in table.constraints]
    return (f"(SELECT CASE WHEN {_any(terms)} THEN doctor_broken({tag}, rowid, {', '.join(table.keys)}, "
            f"{', '.join(f'CASE WHEN ({t}) THEN 1 END' for t in terms)}) ELSE 0 END "
            f"FROM {quote_identifier(table.table)} WHERE rowid = {rowid})")


def prefetch_constraints(ctx: Ctx) -> None:
    """Scan, on a connection of its own, every planned table the approvals pass does not read."""
    plan = constraint_plan(ctx)
    rest = Plan(tables=[t for t in plan.tables if t.table not in ctx.folded])
    ctx.start("constraints", lambda conn: scan(conn, rest))


def _take_folded(ctx: Ctx) -> list[TablePlan]:
    """Copy the approvals pass's tallies (checks_approvals.py `Tally`) into the folded tables'
    constraints; the folded tables it could not vouch for, to be scanned here."""
    if not ctx.folded:
        return []
    try:
        tallies = ctx.fold_tallies() if ctx.fold_tallies is not None else {}
    except sqlite3.DatabaseError as exc:
        if is_busy(exc) or "interrupt" in str(exc):
            raise
        tallies = {}  # the approvals check reports its failure; the scan says what it can
    again = []
    for name, table in ctx.folded.items():
        if name not in tallies:
            again.append(table)
            continue
        for constraint, tally in zip(table.constraints, tallies[name]):
            constraint.count = tally.count
            constraint.kept = [key for _rowid, key in tally.kept]
    return again


# --- the findings -------------------------------------------------------------------------------


def check_constraints(ctx: Ctx) -> list[Finding]:
    if not ctx.started("constraints"):
        prefetch_constraints(ctx)
    try:
        scanned: Plan = ctx.wait("constraints")
        again = _take_folded(ctx)
        if again:
            ctx.start("constraints_again", lambda conn: scan(conn, Plan(tables=again)))
            scanned.unchecked += ctx.wait("constraints_again").unchecked
    except sqlite3.DatabaseError as exc:
        if is_busy(exc):
            return [busy_finding("The constraint scan", exc)]
        raise
    plan = constraint_plan(ctx)
    order = {t.table: i for i, t in enumerate(plan.tables)}  # the scan's failures in table order
    plan.unchecked += sorted(scanned.unchecked, key=lambda u: order.get(u[0], len(order)))
    findings = []
    broken = [c for t in plan.tables for c in t.constraints if c.count]
    checks = [c for c in broken if c.kind == "check"]
    nulls = [c for c in broken if c.kind == "not_null"]
    if checks:
        findings.append(_broken(
            "constraints.check_failed", "Rows that break a CHECK constraint of their table", checks,
            "SQLite refuses such a row when it writes it: it got in through a write with CHECK constraints "
            "off (PRAGMA ignore_check_constraints), a hand-edited schema or a damaged page. Archon's code "
            "relies on these constraints (an unknown action kind, a malformed fingerprint, an impossible "
            "state), and a read-only quick_check or integrity_check does not see them.",
            "Keep this file as evidence and find the tool that wrote the rows; restore a snapshot, or correct "
            "the rows with archon stopped (any later UPDATE of such a row fails on the same constraint)."))
    if nulls:
        findings.append(_broken(
            "constraints.not_null_failed", "NULL in columns declared NOT NULL", nulls,
            "SQLite never writes a NULL into a NOT NULL column: the row got in through an edited schema or a "
            "damaged page, and archon's code reading the column expects a value.",
            "Keep this file as evidence; restore a snapshot, or set the values with archon stopped."))
    if plan.unrecognised:
        shown = "; ".join(f"{one_line(t, 60)} {one_line(label, SHOWN_TEXT)}" for t, label in plan.unrecognised[:SHOWN_CONSTRAINTS])
        more = len(plan.unrecognised) - SHOWN_CONSTRAINTS
        findings.append(Finding(
            "constraints.unrecognised", "warning", "CHECK constraints doctor did not evaluate",
            f"{len(plan.unrecognised)} constraint(s): {shown}" + (f" and {more} more" if more > 0 else "") + ".",
            "Doctor evaluates only constraint text from the console's own copy of archon's schema, never SQL "
            "taken from the file (a crafted schema could make such text do anything a query can), and never "
            "reads a generated column (its expression is the file's). These constraints were added or changed "
            "by something other than an archon release the console knows; rows breaking them are not seen here.",
            "Compare the table with archon's schema (doctor's schema check); to check them anyway, run "
            "`PRAGMA quick_check` in the sqlite3 shell on a copy of the file opened read-write.",
            rows=[{"table": t, "id": "", "constraint": label} for t, label in plan.unrecognised[:ROW_LIMIT]],
            count=len(plan.unrecognised)))
    if plan.unchecked:
        shown = "; ".join(f"{one_line(what, SHOWN_TEXT)} ({one_line(why, 120)})" for what, why in plan.unchecked[:SHOWN_CONSTRAINTS])
        findings.append(Finding(
            "constraints.unchecked", "error", "Constraints that could not be checked",
            f"{len(plan.unchecked)}: {shown}.",
            "SQLite could not evaluate them over the rows, so rows breaking them may be there.",
            "Usually damaged pages (see integrity.failed); restore a good copy.",
            count=len(plan.unchecked)))
    return findings


def _broken(fid: str, title: str, constraints: list[Constraint], why: str, todo: str) -> Finding:
    parts = []
    for c in constraints[:SHOWN_CONSTRAINTS]:
        shown = ", ".join(one_line(k, 80) for k in c.kept[:SHOWN_IDS])
        more = c.count - min(len(c.kept), SHOWN_IDS)
        parts.append(f"{one_line(c.table, 60)} {one_line(c.label, SHOWN_TEXT)}: {c.count} row(s) ({shown}"
                     + (f" and {more} more" if more > 0 else "") + ")")
    more = len(constraints) - SHOWN_CONSTRAINTS
    rows: list[dict[str, str]] = []
    for c in constraints:
        for key in c.kept:
            if len(rows) < ROW_LIMIT:
                rows.append({"table": c.table, "id": key, "constraint": c.label})
    total = sum(c.count for c in constraints)
    return Finding(
        fid, "error", title,
        f"{total} violation(s) of {len(constraints)} constraint(s): " + "; ".join(parts)
        + (f"; and {more} more constraint(s)" if more > 0 else "") + ".",
        why, todo, rows=rows, count=total)


__all__ = ["ARCHON_CREATE_CHECKS", "check_clauses", "check_constraints", "foldable", "key_text", "known_checks",
           "make_plan", "prefetch_constraints", "row_probe", "scan"]
