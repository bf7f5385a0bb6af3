"""Run an iterator one step ahead on a background thread.

Reading a lane from the lake (Parquet decoding, H.264 decoding) releases the GIL, so while
the main thread serializes and hands the previous batch to the writer, the next batch is
already being read: with the writer's compression threads this keeps both cores busy on
point-cloud exports. At most `depth` items wait, so memory stays bounded.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import TypeVar

T = TypeVar("T")
_END = object()


def prefetch(items: Iterator[T], depth: int = 1) -> Iterator[T]:
    """Yield what `items` yields, computing the next `depth` items ahead on a thread; its
    exceptions are raised here, and closing this iterator stops the thread."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put(item):
                    return
            put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            put(exc)

    thread = threading.Thread(target=run, name="export-prefetch", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
