"""What kind of ROS recording a path is, and a file object safe against lying length fields."""

from __future__ import annotations

import os
from pathlib import Path

from bridge_lake.errors import BridgeLakeError

MCAP_MAGIC = b"\x89MCAP0\r\n"
BAG1_MAGIC = b"#ROSBAG V2.0"
KINDS = ("mcap", "bag1", "bag2")


class RecordingError(BridgeLakeError):
    """A path that is not a bag or MCAP, cannot be read, or is damaged (path and offset)."""


def recording_kind(path: str | os.PathLike) -> str:
    """mcap | bag1 | bag2, by content (a ROS 2 bag is a folder with metadata.yaml)."""
    path = Path(path)
    if path.is_dir():
        if (path / "metadata.yaml").is_file():
            return "bag2"
        raise RecordingError(f"{path}: a folder without metadata.yaml is not a ROS 2 bag")
    try:
        with path.open("rb") as f:
            head = f.read(len(BAG1_MAGIC))
    except FileNotFoundError as exc:
        raise RecordingError(f"{path}: no such file or folder") from exc
    except OSError as exc:
        raise RecordingError(f"{path}: cannot be read: {exc.strerror or exc}") from exc
    if head.startswith(MCAP_MAGIC):
        return "mcap"
    if head.startswith(BAG1_MAGIC):
        return "bag1"
    raise RecordingError(f"{path}: neither an MCAP file, a ROS 1 bag nor a ROS 2 bag folder")


class BoundedFile:
    """A read-only binary file whose `read(n)` asks for at most the bytes left in the file.

    The mcap library reads a record's length field and then `read(length)`; a plain file
    object allocates `length` bytes before reading, so a 1 KB file claiming a 4 GB string
    made a 4 GB allocation. Here the request is cut to what the file holds."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._f = open(path, "rb")  # noqa: SIM115 - closed in close()
        self._size = os.fstat(self._f.fileno()).st_size

    def read(self, n: int | None = -1) -> bytes:
        if n is None or n < 0:
            return self._f.read()
        return self._f.read(max(0, min(n, self._size - self._f.tell())))

    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        return getattr(self._f, name)  # seek, tell, readline, ...: as the file does them

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> BoundedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class BoundedPath(type(Path())):  # type: ignore[misc]
    """A path whose binary `open` is a `BoundedFile`: rosbags' ROS 1 reader opens the path
    it is given and reads a record's length, then `read(length)` (a 5.7 KB bag claiming a
    512 MiB header made that allocation)."""

    def open(self, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        return BoundedFile(self) if mode == "rb" else super().open(mode, *args, **kwargs)
