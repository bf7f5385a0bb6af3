"""Typed errors: one hierarchy so callers can catch everything bridge_lake raises on bad input.

Every error about a file names the file and, where it makes sense, the byte offset or line,
because "invalid file" without a position is useless on a 20 GB recording.
"""

from __future__ import annotations


class BridgeLakeError(Exception):
    """Base of every error bridge_lake raises deliberately."""


class FormatError(BridgeLakeError):
    """A file does not follow its format. Carries the path and the byte offset (or line)."""

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        line: int | None = None,
    ) -> None:
        self.path = path
        self.offset = offset
        self.line = line
        where = []
        if path is not None:
            where.append(str(path))
        if offset is not None:
            where.append(f"offset {offset}")
        if line is not None:
            where.append(f"line {line}")
        super().__init__(f"{': '.join([', '.join(where), message]) if where else message}")
        self.reason = message


class TruncatedFileError(FormatError):
    """The file ends before a structure it announces is complete."""


class DriveIdError(BridgeLakeError, ValueError):
    """A drive id that could escape its root or break partition keys and Hive paths."""


class DriveMetadataError(BridgeLakeError):
    """A drive.yaml that is missing, unparsable or has fields of the wrong type."""


class LakePathError(BridgeLakeError, ValueError):
    """A lake path component (layer, table, file) that would leave the lake root."""


class SettingsError(BridgeLakeError, ValueError):
    """An environment setting bridge_lake cannot use; names the variable and what it allows."""
