"""A stop signal whose handler runs inside a statement (SQLite's progress callback, or one of the
console's SQL functions) reaches the caller as the stop, never as a database error.

SQLite swallows what a callback raises: the statement fails with "interrupted" or "user-defined
function raised exception", and code that ends cleanly on KeyboardInterrupt (a watch: exit 0)
would report an error instead. The CI run of stop 28 met it: `approvals watch` stopped by SIGTERM
during a poll exited 143 instead of 0. Here the signal is sent once the statement has provably
entered SQLite (its function ran), so the handler can only run inside it.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest

from console.db.connection import scratch_connection
from console.signals import Stopped, stop_signals_unwind

EVERY_ROW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE tick()) SELECT count(*) FROM c"
FIRST_ROW = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x > 100 OR tick()) "
             "SELECT count(*) FROM c")


@pytest.mark.parametrize(("how", "sql"), [("execute", EVERY_ROW), ("execute", FIRST_ROW), ("fetch", EVERY_ROW)],
                         ids=["execute-in-a-function", "execute-in-the-progress-handler", "fetch"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_inside_a_statement_is_the_stop(how, sql, signum):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signal handlers are the main thread's")
    entered = threading.Event()
    main = threading.main_thread().ident

    calls = []

    def tick() -> int:
        calls.append(1)
        if len(calls) >= 100:  # rows are being returned: a fetch is under way
            entered.set()
        return 1

    def send() -> None:
        assert entered.wait(60)
        signal.pthread_kill(main, signum)

    conn = scratch_connection()
    conn.create_function("tick", 0, tick)
    sender = threading.Thread(target=send)
    try:
        with stop_signals_unwind():
            sender.start()
            with pytest.raises(KeyboardInterrupt) as raised:
                cursor = conn.cursor()
                if how == "execute":
                    cursor.execute(sql)
                else:  # the statement runs in the first fetch of a cursor that was only prepared
                    cursor.execute(EVERY_ROW.replace("count(*)", "x"))
                    cursor.fetchall()
    finally:
        sender.join()
        conn.close()
    if signum == signal.SIGINT:
        assert type(raised.value) is KeyboardInterrupt
    else:
        assert isinstance(raised.value, Stopped) and raised.value.signum == signum
    assert os.getpid()  # the process is still here: the stop was raised, not delivered by default
