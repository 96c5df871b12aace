"""The README's benchmark table, rendered from results.json (`python -m bench --table`)."""

from __future__ import annotations

import re
from pathlib import Path

from bench.harness import ratio_text, spread

START, END = "<!-- bench-table -->", "<!-- /bench-table -->"


def render(results: dict) -> str:
    meta = results.get("meta", {})
    took = f", {meta['seconds'] / 60:.1f} min in all" if meta.get("seconds") else ""
    quick = " (QUICK smoke run: the figures mean nothing)" if meta.get("quick") else ""
    lines = [
        f"Run of {meta.get('finished', '?')}: {meta.get('requests', 0):,} requests "
        f"({meta.get('bytes', 0) / 1e9:.2f} GB), {meta.get('cpus')} CPUs, load average "
        f"{'/'.join(f'{x:.1f}' for x in meta.get('loadavg', []))} at the end, SQLite {meta.get('sqlite')}"
        f"{took}{quick}.",
        "",
        f"Console as installed: {meta.get('install') or 'not recorded'}.",
        "",
        "| item | figure | state | console | baseline | ratio (median, min-max, IQR) | target | |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for f in results.get("figures", []):
        unit = f["unit"]
        if f.get("console_stats") is None:  # harness.not_measured: the row says why
            cells = [f["item"], f["what"], f["state"], f.get("note") or "not measured", "-", "-",
                     f["target"] or "-", "-"]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
            continue
        console = f"{f['console']}: {spread(f['console_stats'], unit)}"
        extra = f.get("extra", {})
        if "p99_ms" in extra:
            console += f"; p50 {extra['p50_ms']:.1f} ms, p99 {extra['p99_ms']:.1f} ms"
        if extra.get("note"):
            console += f" ({extra['note']})"
        baseline = "-"
        if f.get("baseline_stats"):
            baseline = f"{f['baseline']}: {spread(f['baseline_stats'], unit)}"
            if "baseline_p99_ms" in extra:
                baseline += f"; p50 {extra['baseline_p50_ms']:.1f} ms, p99 {extra['baseline_p99_ms']:.1f} ms"
        ratio = ratio_text(f["ratio_stats"]) if f.get("ratio_stats") else "-"
        verdict = {True: "met", False: "**missed**", None: "-"}[f.get("met")]
        cells = [f["item"], f["what"], f["state"], console, baseline, ratio, f["target"] or "-", verdict]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    if meta.get("failed"):
        lines.append("")
        lines.append(f"Modules that failed in this run: {', '.join(meta['failed'])}.")
    return "\n".join(lines)


def write_readme(path: str | Path, table: str) -> None:
    path = Path(path)
    text = path.read_text()
    pattern = re.compile(re.escape(START) + ".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{path} has no {START} ... {END} markers")
    path.write_text(pattern.sub(lambda _: f"{START}\n{table}\n{END}", text))
