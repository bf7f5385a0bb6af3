"""bridge_lake.memory: the heavy steps' glibc malloc settings, observed through the page
faults of allocating and freeing a few megabytes over and over (what a step's batches do),
each in a fresh process (the settings and the heap are the process's)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from bridge_lake.memory import reuse_large_frees

BLOCK = 4 << 20
ROUNDS = 20
PROBE = f"""
import resource, sys
import numpy as np
from bridge_lake import memory

def faults():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range({ROUNDS}):
        block = np.ones({BLOCK}, np.uint8)  # every page written
        del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

assert getattr(memory, sys.argv[1])()
faults()  # the heap grows to hold a block once
print(faults(), resource.getpagesize())
"""


def faults_under(setting: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, setting], check=True, capture_output=True, text=True
    )
    faults, page = out.stdout.split()
    return int(faults), int(page)


def test_exports_reuse_freed_megabytes_and_the_other_steps_return_them():
    if not reuse_large_frees():
        pytest.skip("no glibc mallopt on this platform")
    reused, page = faults_under("reuse_large_frees")
    released, _ = faults_under("release_large_frees")
    pages = ROUNDS * BLOCK // page
    assert released > pages // 4  # each block mapped anew, its pages faulted in (some in bulk)
    assert reused < pages // 20  # the same heap memory, already mapped
