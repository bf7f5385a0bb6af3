"""Generated DDL message types (issue 21): serializing and exporting a drive of DDL structs,
side by side with rosbags in one run.

    python benchmarks/bench_ddl_export.py --smoke     # seconds, for CI
    python benchmarks/bench_ddl_export.py             # the issue's figures

A 40-byte DDL struct (f64 x2, f32, u32, i16 x2, u16, u8 x2, i32, f32: every element as
recorded, no padding) is decoded from generated samples into a generic table as normalize
writes it (`ddl_decode` + `element_columns`), then:

1. Serialization: the table in the exporter's batches of 8,192 rows → ROS 1 and CDR with
   `messages.ddl_message` (Arrow columns to bytes, header included), against rosbags
   building one message object per row (from numpy columns read beforehand, as a peer
   would) and serializing it, timed on a subset.
2. Export: a drive whose lake holds that table (one stream, with its DDL in the stream
   catalog) exported end to end (lake → file) to a ROS 1 bag (LZ4) and to MCAP (zstd),
   against rosbags message objects + serialize + rosbags' Bag1Writer / the mcap Writer.
"""

from __future__ import annotations

import argparse
import struct
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from figures import figure

T0 = 1_700_000_000_000_000_000
BATCH = 8_192
ELEMENTS = [
    ("f64X", "tFloat64", "d"),
    ("f64Y", "tFloat64", "d"),
    ("f32Z", "tFloat32", "f"),
    ("ui32Counter", "tUInt32", "I"),
    ("i16A", "tInt16", "h"),
    ("i16B", "tInt16", "h"),
    ("ui16C", "tUInt16", "H"),
    ("ui8Flags", "tUInt8", "B"),
    ("ui8Mode", "tUInt8", "B"),
    ("i32D", "tInt32", "i"),
    ("f32E", "tFloat32", "f"),
]
FORMAT = "<" + "".join(c for _, _, c in ELEMENTS)
MAPPING = """version: 1
topics:
  - topic: /adtf/{stream}
    type: ddl
    table: normalized/ddl_*
    split_by: stream
"""


def ddl_text() -> str:
    """The struct's DDL (ADTF 3 style: serialized positions, deserialized alignment 1)."""
    pos, body = 0, []
    for name, type_, code in ELEMENTS:
        body.append(
            f'<element name="{name}" type="{type_}" arraysize="1">'
            f'<serialized bytepos="{pos}" byteorder="LE"/><deserialized alignment="1"/></element>'
        )
        pos += struct.calcsize("<" + code)
    assert pos == 40
    return (
        '<structs><struct name="tVehicleState" alignment="1">'
        + "".join(body)
        + "</struct></structs>"
    )


def table(n: int) -> tuple[object, pa.Table]:
    from bridge_lake.formats.adtf.ddl import parse_ddl
    from bridge_lake.formats.adtf.ddl_decode import decode
    from bridge_lake.normalize.adtf_generic import element_columns

    ddl = parse_ddl(ddl_text())
    rng = np.random.default_rng(0)
    raw = rng.integers(0, 256, (n, 40), dtype=np.uint8)
    raw[:, :16] = np.frombuffer(rng.normal(0, 100, 2 * n).tobytes(), np.uint8).reshape(n, 16)
    elements = element_columns(decode(ddl, "tVehicleState", raw.reshape(-1),
                                      np.arange(n) * 40, np.full(n, 40)))  # fmt: skip
    t = T0 + np.arange(n, dtype=np.int64) * 10_000_000
    cols = {"time_ns": t, "sample_time_ns": t, "stream": pa.array(["state"] * n)}
    cols.update(zip(elements.column_names, elements.columns, strict=True))
    return ddl, pa.table(cols)


def generated(ddl):
    from bridge_lake.export.messages import ExportTypes
    from bridge_lake.export.messages.ddl_types import TypeSet, build

    ts = TypeSet()
    root = ts.add(build(ddl, "tVehicleState"))
    return root, ExportTypes(ts.resolve())


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def rosbags_objects(store, root, cols: dict[str, np.ndarray], i: int, ros: int):
    """One message object per row, from numpy columns (what a rosbags-based exporter does)."""
    types = store.types
    t = int(cols["time_ns"][i])
    stamp = types["builtin_interfaces/msg/Time"](sec=t // 10**9, nanosec=t % 10**9)
    if ros == 1:
        header = types["std_msgs/msg/Header"](seq=i, stamp=stamp, frame_id="state")
    else:
        header = types["std_msgs/msg/Header"](stamp=stamp, frame_id="state")
    values = {f.name: cols[f.ddl_name][i].item() for f in root.fields}
    return types[root.name](header=header, **values)


def bench_serialize(ddl, rows: pa.Table, subset: int) -> None:
    from bridge_lake.export.messages import ddl_message

    root, types = generated(ddl)
    n = rows.num_rows
    batches = [rows.slice(a, BATCH) for a in range(0, n, BATCH)]
    cols = {c: rows.column(c).to_numpy() for c in rows.column_names if c != "stream"}
    print(f"\n1. 40-byte DDL struct, {n:,} rows in batches of {BATCH:,} (rosbags on {subset:,})")
    print(f"  {'path':48} {'msgs/s':>12} {'ratio':>7}")
    for ros, name in ((1, "ROS 1"), (2, "CDR")):
        sizes = []

        def ours(ros: int = ros, sizes: list = sizes) -> None:
            for b in batches:
                t = b.column("time_ns").to_numpy()
                sizes.append(ddl_message(t, "state", struct=root, rows=b, ros=ros).offsets[1])

        s_ours = min(timed(ours) for _ in range(3))
        store = types.typestore(ros)
        ser = store.serialize_ros1 if ros == 1 else store.serialize_cdr

        def peer(ros: int = ros, store=store, ser=ser) -> None:
            for i in range(subset):
                ser(rosbags_objects(store, root, cols, i, ros), root.name)

        s_peer = timed(peer)
        print(f"  {'ours: Arrow columns -> ' + name:48} {n / s_ours:12,.0f}")
        print(f"  {'rosbags: objects + serialize':48} {subset / s_peer:12,.0f} "
              f"{(n / s_ours) / (subset / s_peer):6.1f}x  ({int(sizes[0])} bytes a message)")  # fmt: skip
        figure(f"40-byte DDL struct -> {name} (serialize)", n / s_ours, subset / s_peer,
               "msgs/s", baseline_name="rosbags objects + serialize")  # fmt: skip


def build_lake(root: Path, ddl, rows: pa.Table):
    from bridge_lake.formats.adtf.ddl import render_ddl
    from bridge_lake.lake import Lake
    from bridge_lake.lake.schemas import RAW_DRIVES, STREAMS

    lake, drive = Lake(str(root / "lake")), "bench"
    meta = {c.name: [None] for c in RAW_DRIVES.columns}
    meta |= {"vehicle": ["bench"], "source": ["adtf"], "tags": [[]]}
    meta |= {"file_count": [0], "total_bytes": [0], "recording_count": [0]}
    lake.write_partition("raw", "drives", drive, pa.table(meta, schema=RAW_DRIVES.schema))
    lake.write_partition("normalized", "ddl_tvehiclestate", drive, rows)
    n, t = rows.num_rows, rows.column("time_ns")
    streams = {c.name: [None] for c in STREAMS.columns}
    streams |= {
        "stream": ["state"],
        "table": ["ddl_tvehiclestate"],
        "records_read": [n],
        "rows_written": [n],
        "rows_quarantined": [0],
        "records_joined": [0],
        "first_time_ns": [t[0].as_py()],
        "last_time_ns": [t[-1].as_py()],
        "ddl_struct": ["tVehicleState"],
        "ddl": [render_ddl(ddl)],
    }
    lake.write_partition("normalized", "streams", drive, pa.table(streams, schema=STREAMS.schema))
    (root / "mapping.yaml").write_text(MAPPING)
    return lake, drive


def bench_export(root: Path, ddl, rows: pa.Table, subset: int) -> None:
    from mcap.writer import Writer as McapWriter
    from rosbags.rosbag1 import Writer as Bag1Writer

    from bridge_lake.export.exporter import ExportRequest, export_drive

    lake, drive = build_lake(root, ddl, rows)
    root_type, types = generated(ddl)
    cols = {c: rows.column(c).to_numpy() for c in rows.column_names if c != "stream"}
    n = rows.num_rows
    print(f"\n2. a drive of one DDL struct stream, {n:,} messages (rosbags on {subset:,})")
    print(f"  {'path':48} {'msgs/s':>12} {'ratio':>7}")
    for fmt, name in (("bag1", "ROS 1 bag (LZ4)"), ("mcap", "MCAP (zstd)")):
        out = root / f"ours.{'bag' if fmt == 'bag1' else 'mcap'}"
        req = ExportRequest(format=fmt, mapping=root / "mapping.yaml", force=True)
        s_ours = timed(lambda req=req, out=out: export_drive(lake, drive, out, req))
        ros = 1 if fmt == "bag1" else 2
        store = types.typestore(ros)
        d = types.definition(root_type.name, ros)

        def peer(fmt: str = fmt, ros: int = ros, store=store, d=d) -> None:
            if fmt == "bag1":
                path = root / "peer.bag"
                path.unlink(missing_ok=True)
                w = Bag1Writer(path)
                w.set_compression(Bag1Writer.CompressionFormat.LZ4)
                w.open()
                conn = w.add_connection("/adtf/state", root_type.name, typestore=store,
                                        msgdef=d.text, md5sum=d.md5sum)  # fmt: skip
                for i in range(subset):
                    msg = rosbags_objects(store, root_type, cols, i, ros)
                    w.write(
                        conn, int(cols["time_ns"][i]), store.serialize_ros1(msg, root_type.name)
                    )
                w.close()
                return
            with (root / "peer.mcap").open("wb") as f:
                w = McapWriter(f)
                w.start("ros2", "bench")
                sid = w.register_schema(d.name, "ros2msg", d.text.encode())
                cid = w.register_channel("/adtf/state", "cdr", sid)
                for i in range(subset):
                    msg = rosbags_objects(store, root_type, cols, i, ros)
                    t = int(cols["time_ns"][i])
                    w.add_message(cid, log_time=t, publish_time=t,
                                  data=store.serialize_cdr(msg, root_type.name))  # fmt: skip
                w.finish()

        s_peer = timed(peer)
        print(f"  {'ours: lake -> ' + name:48} {n / s_ours:12,.0f}")
        print(f"  {'rosbags objects + serialize + writer':48} {subset / s_peer:12,.0f} "
              f"{(n / s_ours) / (subset / s_peer):6.1f}x")  # fmt: skip
        figure(f"DDL struct drive -> {name}", n / s_ours, subset / s_peer, "msgs/s",
               baseline_name="rosbags objects + serialize + writer")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    parser.add_argument("--rows", type=int, default=1_000_000, help="struct samples")
    parser.add_argument("--subset", type=int, default=50_000, help="messages timed for rosbags")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.subset = 20_000, 2_000
    ddl, rows = table(args.rows)
    bench_serialize(ddl, rows, min(args.subset, args.rows))
    with tempfile.TemporaryDirectory(prefix="bench_ddl_export_") as tmp:
        bench_export(Path(tmp), ddl, rows, min(args.subset, args.rows))


if __name__ == "__main__":
    main()
