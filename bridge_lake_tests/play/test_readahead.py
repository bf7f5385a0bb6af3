"""The read-ahead's batches: every item once, in order; with a key, a batch is not cut
between items of one key (messages due together), up to twice the batch limits."""

from __future__ import annotations

import itertools

from bridge_lake.play.readahead import BATCH_MESSAGES, ReadAhead


def _batches(items: list[tuple[int, int]], key) -> list[list[tuple[int, int]]]:
    reader = ReadAhead(lambda: iter(items), lambda item: 1, key=key)
    out = []
    while (batch := reader.get(timeout=10)) is not None:
        assert batch is not False, "the reader stalled"
        out.append(batch)
    reader.stop()
    return out


def test_batches_are_cut_between_keys_only():
    # runs of 3 items per key, so a cut at every BATCH_MESSAGES items would split runs
    items = [(i // 3, i) for i in range(10 * BATCH_MESSAGES + 1)]
    batches = _batches(items, key=lambda item: item[0])
    assert [x for b in batches for x in b] == items
    for before, after in itertools.pairwise(batches):
        assert before[-1][0] != after[0][0]
        assert BATCH_MESSAGES <= len(before) < BATCH_MESSAGES + 3


def test_one_key_longer_than_twice_a_batch_is_cut_anyway():
    items = [(0, i) for i in range(5 * BATCH_MESSAGES)]
    batches = _batches(items, key=lambda item: item[0])
    assert [x for b in batches for x in b] == items
    assert max(map(len, batches)) == 2 * BATCH_MESSAGES


def test_without_a_key_batches_are_cut_at_the_limit():
    items = [(i // 3, i) for i in range(3 * BATCH_MESSAGES)]
    batches = _batches(items, key=None)
    assert [len(b) for b in batches] == [BATCH_MESSAGES] * 3
