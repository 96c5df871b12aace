"""Item 6: decisions per second through the service layer against the raw SQL loop.

On the 1M database (idle and live), in WAL mode with `synchronous = NORMAL` and `FULL`: chunks of
`CHUNK` approvals alternate between `console.services.approvals.approve` and the raw loop
(bench/harness.py `raw_decide`: per request one BEGIN IMMEDIATE with the same UPDATE and event
INSERT the service writes), both on the one connection `open_database` gives the console, so that
the connection's settings are the same. Each chunk decides requests no one has decided yet
(chosen before its timing starts). The ratio is service/raw per pair: >= 0.8x is the target.
"""

from __future__ import annotations

import time

from bench import harness as h

CHUNK = 100


def main() -> None:
    from console.clock import parse_time
    from console.db.connect import open_database
    from console.services.approvals import approve

    d = h.data()
    now = parse_time(d.now)
    # Each state decides 2 syncs x (pairs + warm-up) x 2 sides chunks: fewer per chunk on a small file.
    per_state = 4 * (h.pairs(8) + 1)
    chunk = 4 if h.quick() else max(4, min(CHUNK, (d.pending - h.holder_writes()) // per_state))
    for state, path, info in h.states(d):
        for sync in ("NORMAL", "FULL"):
            handle = open_database(path)
            try:
                handle.conn.execute(f"PRAGMA synchronous = {sync}")

                def service() -> float:
                    ids = h.pending_ids(path, chunk, d.now)
                    started = time.perf_counter()
                    for request_id in ids:
                        approve(handle, request_id, actor="bench-service", now=now)
                    return chunk / (time.perf_counter() - started)

                def raw() -> float:
                    ids = h.pending_ids(path, chunk, d.now)
                    started = time.perf_counter()
                    h.raw_decide(handle.conn, ids, d.now)
                    return chunk / (time.perf_counter() - started)

                c, b = h.paired(service, raw, h.pairs(8))
            finally:
                handle.close()
            h.record(f"writes-{sync.lower()}-{state}", "6", f"decisions/s, WAL/{sync}, chunks of {chunk}",
                     state=state, console="service approve", values=c, unit="/s", baseline="raw SQL loop",
                     base_values=b, target=">= 0.8x", check=lambda r: r >= 0.8,
                     extra={"holder": info} if info else {})
        if state == "idle":
            h.remove_sidecars(path)
