"""Building rows on a producer thread while the caller inserts the previous chunk.

`sqlite3` releases the GIL inside SQLite, so on two cores most of the Python work of building
rows hides behind the inserts. Only the producer touches the random generator, in a fixed order,
so output stays deterministic.
"""

from __future__ import annotations

import threading
from queue import Full, Queue
from typing import Iterator


def in_background(chunks: Iterator, depth: int = 2) -> Iterator:
    """Iterate `chunks` on a producer thread, at most `depth` chunks ahead."""
    queue: Queue = Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def produce() -> None:
        try:
            for chunk in chunks:
                while not stop.is_set():
                    try:
                        queue.put(chunk, timeout=0.1)
                        break
                    except Full:
                        continue
                if stop.is_set():
                    return
            queue.put(end)
        except BaseException as exc:  # handed to the consumer, raised there
            queue.put(exc)

    worker = threading.Thread(target=produce, name="demo-rows", daemon=True)
    worker.start()
    try:
        while True:
            item = queue.get()
            if item is end:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        worker.join()
