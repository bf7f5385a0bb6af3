"""One module per fuzz target. Each defines:

- `seeds(work: Path) -> dict[str, bytes]`: its seed inputs (see `fuzz.corpus`);
- `one_input(data: bytes) -> None`: feed one input to the reader, exercising everything a
  caller would (iterate, decode, render); it may raise only `BridgeLakeError`s;
- `MAX_LEN`: the largest input libFuzzer should build.

`TARGETS` maps each name to the top-level packages whose code is instrumented for coverage:
bridge_lake always, plus the parsers our readers hand bytes to (yaml, mcap, rosbags, ...).
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import tempfile
from pathlib import Path
from types import ModuleType

TARGETS: dict[str, tuple[str, ...]] = {
    "adtf_dat": ("bridge_lake",),
    "adtf_samples": ("bridge_lake",),
    "ddl_parse": ("bridge_lake", "defusedxml"),
    "ddl_decode": ("bridge_lake",),
    "nclt_csv": ("bridge_lake",),
    "velodyne_hits": ("bridge_lake",),
    "velodyne_sync": ("bridge_lake",),
    "hokuyo": ("bridge_lake",),
    "lb3_tiff": ("bridge_lake",),
    "nclt_archive": ("bridge_lake", "tarfile"),
    "drive_yaml": ("bridge_lake", "yaml"),
    "adtf_mapping": ("bridge_lake", "yaml"),
    "export_mapping": ("bridge_lake", "yaml"),
    "rig": ("bridge_lake", "yaml"),
    "health": ("bridge_lake", "mcap", "mcap_ros2", "rosbags"),
    "replay_check": ("bridge_lake", "mcap", "mcap_ros2"),
    "recover": ("bridge_lake", "mcap", "rosbags"),
}


def load(name: str) -> ModuleType:
    if name not in TARGETS:
        raise SystemExit(f"unknown fuzz target {name!r}; known: {', '.join(TARGETS)}")
    return importlib.import_module(f"fuzz.targets.{name}")


_SCRATCH: Path | None = None
SCRATCH_ENV = "BRIDGE_LAKE_FUZZ_SCRATCH"
"""Set by fuzz.run for its children: libFuzzer ends a child with C's exit(), which skips
Python's atexit, so the parent removes the folder."""


def new_scratch_dir() -> Path:
    shm = "/dev/shm"  # noqa: S108 - a private mkdtemp folder inside it
    base = shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="bridge-lake-fuzz-", dir=base))


def scratch_file(name: str, data: bytes) -> Path:
    """Write one input to a file named `name` in this process's scratch folder (tmpfs when
    there is one): most readers take paths and memory-map them."""
    global _SCRATCH
    if _SCRATCH is None and os.environ.get(SCRATCH_ENV):
        _SCRATCH = Path(os.environ[SCRATCH_ENV])  # the runner's, removed when the child ends
    if _SCRATCH is None:
        _SCRATCH = new_scratch_dir()
        atexit.register(shutil.rmtree, _SCRATCH, True)
    path = _SCRATCH / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path
