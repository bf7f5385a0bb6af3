"""bridge_lake.memory: the heavy steps' glibc malloc settings, observed through the page
faults of allocating and freeing a few megabytes over and over (what a step's batches do)."""

from __future__ import annotations

import resource

import numpy as np
import pytest

from bridge_lake.memory import release_large_frees, reuse_large_frees

BLOCK = 4 << 20
ROUNDS = 20


def faults_of_batches() -> int:
    """Minor page faults of ROUNDS blocks of BLOCK bytes, each written whole, then freed."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(ROUNDS):
        block = np.ones(BLOCK, np.uint8)
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_exports_reuse_freed_megabytes_and_the_other_steps_return_them():
    if not reuse_large_frees():
        pytest.skip("no glibc mallopt on this platform")
    try:
        faults_of_batches()  # the heap grows to hold a block once
        reused = faults_of_batches()
        assert release_large_frees()
        released = faults_of_batches()
    finally:
        release_large_frees()
    pages = ROUNDS * BLOCK // resource.getpagesize()
    assert released > pages // 4  # each block mapped anew, its pages faulted in (some in bulk)
    assert reused < pages // 20  # the same heap memory, already mapped
