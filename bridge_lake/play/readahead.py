"""Bounded read-ahead: a thread reads the source into batches, a queue holds a few of them.

Decompressing a chunk (zstd, lz4, bz2) releases the GIL, so the thread reads while the
player waits for its next deadline; `gate` keeps the thread's Python work out of the
player's last stretch before a deadline (see `clock`), as far as it can: the gate is looked
at between items (one message: the MCAP reader walks a chunk's records one at a time, see
`formats.ros.mcap_scan.chunk_records`). Memory is bounded by
MAX_BATCHES batches of at most twice BATCH_BYTES (plus one message larger than that): with a
`key`, a batch that is full is cut only between items of different keys (messages due
together are handed over together), unless it reached twice the limits.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from typing import Any

BATCH_MESSAGES = 256
BATCH_BYTES = 4 << 20
MAX_BATCHES = 8


class _End:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


class ReadAhead:
    """Items of `make()`'s iterator, in order, in batches (lists); `None` at the end; the
    reader's error is raised by `get`. `stop()` ends the thread without reading on."""

    def __init__(
        self,
        make: Callable[[], Iterator[Any]],
        size_of: Callable[[Any], int],
        gate: threading.Event | None = None,
        priority: int = 0,
        key: Callable[[Any], Any] | None = None,
    ) -> None:
        self._queue: queue.Queue = queue.Queue(MAX_BATCHES)
        self._stop = threading.Event()
        self._gate = gate
        self._make, self._size_of, self._key = make, size_of, key
        self._head: Any = None
        self._priority = priority
        self._thread = threading.Thread(target=self._run, name="play-readahead", daemon=True)
        self._thread.start()

    def _put(self, item: Any) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        from bridge_lake.play.clock import normal_priority, realtime_priority

        if self._priority:  # below the pacer's, above every ordinary process: a reader
            realtime_priority(self._priority)  # holding the GIL is not preempted by them
        else:
            normal_priority()
        batch: list[Any] = []
        nbytes = 0
        try:
            it = self._make()
            for item in it:
                if self._stop.is_set():
                    return
                if self._full(batch, nbytes, item):
                    if not self._put(batch):
                        return
                    batch, nbytes = [], 0
                if self._gate is not None:
                    self._gate.wait()
                batch.append(item)
                nbytes += self._size_of(item)
            if batch and not self._put(batch):
                return
            self._put(_End())
        except BaseException as exc:  # handed to the player, which reports it
            self._put(_End(exc))

    def _full(self, batch: list[Any], nbytes: int, item: Any) -> bool:
        """Whether `batch` goes to the queue before `item`."""
        if len(batch) < BATCH_MESSAGES and nbytes < BATCH_BYTES:
            return False
        if self._key is None or len(batch) >= 2 * BATCH_MESSAGES or nbytes >= 2 * BATCH_BYTES:
            return True
        return self._key(item) != self._key(batch[-1])

    def peek(self, timeout: float) -> Any:
        """The first item without taking it (None at the end or after `timeout` s)."""
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return None
        self._head = item
        if isinstance(item, _End):
            return None
        return item[0]

    def get_nowait(self) -> list[Any] | bool | None:
        """A batch, None at the end, False when nothing is ready yet."""
        if self._head is not None:
            item, self._head = self._head, None
            return self._unwrap(item)
        try:
            item = self._queue.get_nowait()
        except queue.Empty:
            return False
        return self._unwrap(item)

    def wants(self) -> bool:
        """Whether the thread has room to read into (the queue is not full)."""
        return self._queue.qsize() < MAX_BATCHES

    def get(self, timeout: float | None = None) -> list[Any] | bool | None:
        if self._head is not None:
            item, self._head = self._head, None
            return self._unwrap(item)
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return False
        return self._unwrap(item)

    @staticmethod
    def _unwrap(item: Any) -> list[Any] | None:
        if isinstance(item, _End):
            if item.error is not None:
                raise item.error
            return None
        return item

    def stop(self) -> None:
        self._stop.set()
        if self._gate is not None:
            self._gate.set()
        self._thread.join(timeout=5)
