"""ADTF-specific typed errors.

They subclass the project's `FormatError` / `TruncatedFileError`, so a caller that only knows
`bridge_lake.errors` still catches them, while tests and tools can tell the failure kinds apart.
Every instance carries the file path and the byte offset of the offending structure.
"""

from __future__ import annotations

from bridge_lake.errors import FormatError, TruncatedFileError


class AdtfError(FormatError):
    """Base of every error about an ADTF/IFHD file."""


class HeaderError(AdtfError):
    """The 2048-byte file header is unusable (magic, byte order, version)."""


class TruncatedHeaderError(HeaderError, TruncatedFileError):
    """The file is shorter than its header."""


class ExtensionError(AdtfError):
    """The extension table or an extension payload lies outside the file or is malformed."""


class StreamIndexError(ExtensionError):
    """An `index<N>` stream description is malformed (sizes that do not fit, bad strings)."""


class ChunkError(AdtfError):
    """A chunk header is corrupt: size below 32, a size that runs past the data area, ..."""


class TruncatedChunkError(ChunkError, TruncatedFileError):
    """The file ends inside a chunk (a recording cut off by a crash or a copy)."""


class CountMismatchError(AdtfError):
    """A count in the header or an index disagrees with what the chunk walk found."""


class SampleError(AdtfError):
    """A sample envelope inside a chunk is inconsistent with the chunk's size."""


class DDLError(AdtfError):
    """A DDL description is malformed or cannot describe the bytes it is applied to."""
