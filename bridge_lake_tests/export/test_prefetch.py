"""prefetch: same items in order, errors raised at the consumer, closing stops the thread."""

import threading
import time

import pytest

from bridge_lake.export.prefetch import prefetch


def test_items_in_order_and_bounded_lookahead():
    made = []

    def gen():
        for i in range(10):
            made.append(i)
            yield i

    it = prefetch(gen(), depth=2)
    assert next(it) == 0
    time.sleep(0.05)
    assert len(made) <= 4  # one handed out, two queued, one waiting to be put
    assert list(it) == list(range(1, 10))


def test_errors_surface_in_the_consumer():
    def gen():
        yield 1
        raise ValueError("bad batch")

    it = prefetch(gen())
    assert next(it) == 1
    with pytest.raises(ValueError, match="bad batch"):
        next(it)


def test_closing_early_stops_the_thread():
    before = threading.active_count()
    it = prefetch(iter(range(1_000_000)), depth=1)
    assert next(it) == 0
    it.close()
    assert threading.active_count() == before
