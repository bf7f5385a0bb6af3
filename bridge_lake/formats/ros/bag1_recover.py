"""Rewrite a damaged ROS 1 bag as a valid, indexed one (what `rosbag reindex` does), in the
same single pass as its scan.

Whole chunks are copied byte for byte, each followed by its index-data records (one per
connection: time and offset of each message in the chunk) built from the chunk's records.
The whole records of a chunk cut by the end of the file become a new chunk in its
compression. At the end come the connection records and one chunk-info record per chunk,
and the bag header is rewritten with the index position and counts. The layout is the one
rosbag and rosbags write (field order included), so a bag written by rosbags comes out of a
recovery byte for byte as it went in, and a recovered bag recovered again does too.
"""

from __future__ import annotations

import os
import struct

from bridge_lake.formats.ros import compression as comp
from bridge_lake.formats.ros.bag1_scan import (
    OP_BAGHEADER,
    OP_CHUNK,
    OP_CHUNK_INFO,
    OP_IDXDATA,
    VERSION_LINE,
    Bag1Scanner,
    ChunkContent,
    Connection,
)
from bridge_lake.formats.ros.damage import RecoveryFile, ScanReport, recover_with

BAG_HEADER_BYTES = 4096
"""The bag header record is padded to this size, so the index position can be written
into it at the end without moving anything (rosbag's convention)."""
_U32 = struct.Struct("<I")


def _header(op: int, fields: list[tuple[str, bytes]]) -> bytes:
    parts = [b"op=" + bytes([op])] + [name.encode() + b"=" + value for name, value in fields]
    body = b"".join(_U32.pack(len(p)) + p for p in parts)
    return _U32.pack(len(body)) + body


def _time(ns: int) -> bytes:
    return struct.pack("<II", ns // 1_000_000_000, ns % 1_000_000_000)


def _bag_header(index_pos: int, conns: int, chunks: int) -> bytes:
    head = _header(
        OP_BAGHEADER,
        [
            ("index_pos", struct.pack("<Q", index_pos)),
            ("conn_count", _U32.pack(conns)),
            ("chunk_count", _U32.pack(chunks)),
        ],
    )
    pad = BAG_HEADER_BYTES - len(head) - 4
    return head + _U32.pack(pad) + b" " * pad


class Bag1RecoveryWriter(RecoveryFile):
    """The `Bag1Sink` that writes the recovered bag (see the module docstring)."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        super().__init__(out, VERSION_LINE + _bag_header(0, 0, 0))
        self.connections: dict[int, Connection] = {}
        self.chunk_infos: list[tuple[int, int, int, dict[int, int]]] = []

    def connection(self, conn: Connection) -> None:
        self.connections.setdefault(conn.conn, conn)

    def chunk(self, head: bytes, data: memoryview, content: ChunkContent) -> None:
        at = self._write(head)
        self._write(data)
        self._index(at, content)

    def records(self, data: bytes, content: ChunkContent, compression: str) -> None:
        packed = comp.compress(compression, data)
        head = _header(
            OP_CHUNK, [("compression", compression.encode()), ("size", _U32.pack(len(data)))]
        )
        at = self._write(head + _U32.pack(len(packed)))
        self._write(packed)
        self._index(at, content)

    def _index(self, at: int, content: ChunkContent) -> None:
        out = []
        for cid, entries in content.index.items():
            out.append(
                _header(
                    OP_IDXDATA,
                    [
                        ("ver", _U32.pack(1)),
                        ("conn", _U32.pack(cid)),
                        ("count", _U32.pack(len(entries))),
                    ],
                )
            )
            out.append(_U32.pack(12 * len(entries)))
            out.append(b"".join(_time(t) + _U32.pack(off) for t, off in entries))
        self._write(b"".join(out))
        counts = {cid: len(e) for cid, e in content.index.items()}
        self.chunk_infos.append((at, content.start, content.end, counts))

    def finish(self) -> None:
        index_pos = self._pos
        for cid in sorted(self.connections):
            self._write(self.connections[cid].record)
        for at, start, end, counts in self.chunk_infos:
            head = _header(
                OP_CHUNK_INFO,
                [
                    ("ver", _U32.pack(1)),
                    ("chunk_pos", struct.pack("<Q", at)),
                    ("start_time", _time(start)),
                    ("end_time", _time(end)),
                    ("count", _U32.pack(len(counts))),
                ],
            )
            body = b"".join(_U32.pack(c) + _U32.pack(n) for c, n in counts.items())
            self._write(head + _U32.pack(len(body)) + body)
        self._f.seek(len(VERSION_LINE))
        self._f.write(_bag_header(index_pos, len(self.connections), len(self.chunk_infos)))
        self._f.close()


def recover_bag1(src: str | os.PathLike[str], out: str | os.PathLike[str]) -> ScanReport:
    """Scan `src` and write everything whole of it to `out` as an indexed ROS 1 bag."""
    return recover_with(Bag1Scanner, Bag1RecoveryWriter, src, out)


def scan_bag1(path: str | os.PathLike[str]) -> ScanReport:
    """The damage report of a ROS 1 bag, without writing anything."""
    return Bag1Scanner(path).scan()
