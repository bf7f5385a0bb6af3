"""`DatFile.decode()` throughput (issue 13): the previous code path vs the new one vs the bare
DDL decode of the same payloads, CAN (`tCANData`) and IMU (`tImuData`) records.

    python benchmarks/bench_ddl_decode.py            # two recordings, ~1.1 M chunks in all
    python benchmarks/bench_ddl_decode.py --smoke    # tiny recordings, a few seconds

Recordings (written with our DatWriter, IFHD 0x0500, ADTF 3 sample copy, random chunk times):
- `drive`: the synthetic drive's rates, two CAN buses at 500 Hz and an IMU at 100 Hz, so IMU
  samples are 1 chunk in 11 and every IMU record pays for walking past ten CAN chunks;
- `even`: one CAN bus and the IMU at the same rate.
For each stream, in the same process, median of `--repeat` runs (wall and CPU seconds):
- previous: the code before issue 13: the Python chunk-header loop of
  `ChunkWalker.sample_chunks` (copied below), the per-field envelope reads of `sample_table`
  (copied below) and the DDL decoder of commit BASELINE_COMMIT (`git show`; if git cannot
  give it, the current decoder, and the output says so);
- decode: `DatFile.decode(stream)` as it is now;
- bare: `ddl_decode.decode` alone on the same payload offsets (no chunk walk, no envelopes).
All three tables are checked equal. Not a test: it prints figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path

import numpy as np
import pyarrow as pa
from figures import figure

from bridge_lake.formats.adtf import Property, StreamType, ifhd, open_dat
from bridge_lake.formats.adtf.ddl_decode import decode, read_scalars
from bridge_lake.formats.adtf.samples import (
    ADTF3_ENVELOPE,
    ADTF3_FLAG_INFO,
    ADTF3_FLAG_SUBSTREAM,
    NS_SERIALIZERS,
)
from bridge_lake.formats.adtf.writer import DatWriter
from bridge_lake.synth.adtf import CAN_DTYPE, DDL_STRUCTS, IMU_DTYPE

BASELINE_COMMIT = "b12c143"
"""The last commit before issue 13's decode work."""
REPO = Path(__file__).resolve().parents[1]

MIXES = {
    # name: {stream: rate in Hz}
    "drive": {"can_powertrain": 500, "can_chassis": 500, "imu": 100},
    "even": {"can_powertrain": 500, "imu": 500},
}


# -- the recording ------------------------------------------------------------------------------


def _stream_type(struct_name: str, meta_type: str = "adtf/default") -> StreamType:
    defs = f"<structs>{DDL_STRUCTS[struct_name]}</structs>"
    return StreamType(
        meta_type,
        {
            "md_struct": Property("cString", struct_name),
            "md_definitions": Property("cString", defs),
            "md_data_serialized": Property("tBool", "false"),
        },
    )


def write_recording(path: Path, rates: dict[str, int], seconds: float, seed: int = 1) -> None:
    """Streams at `rates`, chunk times jittered so they interleave as a recorder's do."""
    rng = np.random.default_rng(seed)
    times, which, payloads = [], [], []
    for k, (name, rate) in enumerate(rates.items()):
        n = int(rate * seconds)
        t = np.arange(n) * (1_000_000_000 // rate) + rng.integers(0, 400_000, n)
        if name.startswith("can"):
            rec = np.zeros(n, dtype=CAN_DTYPE)
            rec["channel"] = k
            rec["stamp"] = t // 1000
            rec["id"] = rng.integers(0, 0x7FF, n)
            rec["length"] = 8
            rec["data"] = rng.integers(0, 256, (n, 8))
        else:
            rec = np.zeros(n, dtype=IMU_DTYPE)
            rec["stamp"] = t
            rec["acc"] = rng.normal(0, 1, (n, 3))
            rec["gyro"] = rng.normal(0, 0.01, (n, 3))
            rec["temp"] = 31.5
        times.append(np.sort(t))
        which.append(np.full(n, k))
        payloads.append(rec.tobytes())
    order = np.argsort(np.concatenate(times), kind="stable")
    all_times = np.concatenate(times)[order].tolist()
    all_which = np.concatenate(which)[order].tolist()
    sizes = [CAN_DTYPE.itemsize if n.startswith("can") else IMU_DTYPE.itemsize for n in rates]
    with DatWriter(path) as w:
        ids = [
            w.add_stream(
                name,
                stream_type=_stream_type("tCANData", "adtf/devicetb/can")
                if name.startswith("can")
                else _stream_type("tImuData"),
            )
            for name in rates
        ]
        views = [memoryview(p) for p in payloads]
        counters = [0] * len(rates)
        for t, k in zip(all_times, all_which, strict=True):
            i, size = counters[k], sizes[k]
            counters[k] += 1
            w.write_sample(ids[k], t, views[k][i * size : (i + 1) * size])


# -- the previous code path (before issue 13), kept here as the baseline -----------------------


def previous_sample_chunks(walker: ifhd.ChunkWalker, stream_id: int) -> tuple[array, array]:
    """`ChunkWalker.sample_chunks` as it was: one Python step per chunk header."""
    offsets, times = array("q"), array("Q")
    h = walker.header
    unpack = struct.Struct(h.endian + "Q8xIHH").unpack_from
    add_offset, add_time = offsets.append, times.append
    buf, pos, end, n, count = walker.buf, h.data_offset, walker.data_end, 0, h.chunk_count
    release, mark = walker.release, walker.release.first_mark
    while n < count and pos + ifhd.CHUNK_HEADER_SIZE <= end:
        t, size, sid, flags = unpack(buf, pos)
        if not ifhd.CHUNK_HEADER_SIZE <= size <= end - pos:
            break
        if sid == stream_id and not flags & 0x18:
            add_offset(pos)
            add_time(t)
        n += 1
        pos += (size + 15) & ~15
        if pos >= mark:
            mark = release(pos)
    walker.chunks_read = n
    if n < count:
        walker.checked_chunk(pos, end)
    return offsets, times


def previous_sample_table(f, name: str) -> dict[str, np.ndarray]:
    """`DatFile.sample_table` as it was, for ADTF 3 streams (all this benchmark writes)."""
    stream = f.stream(name)
    positions, times = previous_sample_chunks(f._walker(), stream.stream_id)
    pos = np.frombuffer(positions, dtype=np.int64)
    out = {"time_ns": f._ns(np.frombuffer(times, dtype=np.uint64), f.time_unit_ns, pos)}
    data = np.frombuffer(f.view, dtype=np.uint8)
    le = {c: np.dtype("<" + c) for c in ("i8", "u8", "i4", "u4")}
    stime = read_scalars(data, pos + 32, le["i8"])
    flags = read_scalars(data, pos + 40, le["i4"])
    length = read_scalars(data, pos + 44, le["u8"]).astype(np.int64)
    start = pos + 32 + ADTF3_ENVELOPE.size
    sub = np.zeros(len(pos), dtype=np.int64)
    has_sub = (flags & ADTF3_FLAG_SUBSTREAM) != 0
    if has_sub.any():
        at = start + length
        info = (flags & ADTF3_FLAG_INFO) != 0
        if info.any():
            at = at + np.where(info, 5 + read_scalars(data, at + 1, le["u4"]), 0)
        sub[has_sub] = read_scalars(data, at[has_sub], le["u4"])
    ns = stream.serializer in NS_SERIALIZERS
    out["sample_time_ns"] = f._ns(stime, 1 if ns else 1000, pos)
    chunk_size = read_scalars(data, pos + 16, np.dtype(f.header.endian + "u4"))
    if (start + length > pos + chunk_size).any():
        raise SystemExit("previous path: sample buffer runs past its chunk")
    out.update(offset=start, length=length, substream_id=sub)
    return out


def previous_decoder():
    """(decode function, label) of the DDL decoder at BASELINE_COMMIT."""
    try:
        source = subprocess.run(
            ["git", "show", f"{BASELINE_COMMIT}:bridge_lake/formats/adtf/ddl_decode.py"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return decode, "current DDL decoder (git could not show the previous one)"
    spec = importlib.util.spec_from_loader("previous_ddl_decode", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{BASELINE_COMMIT}:ddl_decode.py", "exec"), module.__dict__)
    return module.decode, f"DDL decoder of {BASELINE_COMMIT}"


def previous_decode(f, name: str, old_decode) -> pa.Table:
    """`DatFile.decode` as it was: walk, envelopes, then one decode."""
    stream = f.stream(name)
    table = previous_sample_table(f, name)
    decoded = old_decode(
        stream.ddl,
        stream.ddl_struct,
        np.frombuffer(f.view, dtype=np.uint8),
        table["offset"],
        table["length"],
        layout="deserialized",
        path=f.path,
    )
    head = pa.table({"time_ns": table["time_ns"], "sample_time_ns": table["sample_time_ns"]})
    for col, column in zip(decoded.column_names, decoded.columns, strict=True):
        head = head.append_column(decoded.schema.field(col), column)
    return head


# -- timing -------------------------------------------------------------------------------------


def timed(fn, repeat: int) -> tuple[float, float, object]:
    """Median wall and CPU seconds of `repeat` calls, and the last result."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return statistics.median(walls), statistics.median(cpus), result


def bench(path: Path, streams: list[str], repeat: int, old_decode) -> list[dict]:
    rows = []
    with open_dat(path) as f:
        for name in streams:
            stream = f.stream(name)
            table = f.sample_table(name)
            data = np.frombuffer(f.view, dtype=np.uint8)
            runs = {
                "previous": lambda n=name: previous_decode(f, n, old_decode),
                "decode": lambda n=name: f.decode(n),
                "bare": lambda s=stream, t=table, data=data: decode(
                    s.ddl, s.ddl_struct, data, t["offset"], t["length"], layout="deserialized"
                ),
            }
            got = {}
            row = {"stream": name, "records": len(table["offset"]), "chunks": f.header.chunk_count}
            for _ in range(2):  # alternate, so drift of a shared machine hits all three
                for key, fn in runs.items():
                    wall, cpu, got[key] = timed(fn, max(1, repeat // 2))
                    row.setdefault(key, []).append((wall, cpu))
            for key in runs:
                walls, cpus = zip(*row[key], strict=True)
                row[key] = (statistics.median(walls), statistics.median(cpus))
            want = got["decode"].combine_chunks()
            if not got["previous"].equals(want):
                raise SystemExit(f"{name}: previous and new decode disagree")
            if not got["bare"].equals(want.drop_columns(["time_ns", "sample_time_ns"])):
                raise SystemExit(f"{name}: bare decode disagrees")
            rows.append(row)
    return rows


def report(mix: str, rows: list[dict], size_mb: float) -> None:
    chunks = rows[0]["chunks"]
    print(f"{mix}: {chunks} chunks, {size_mb:.1f} MB")
    print("  M records/s, wall [cpu]; ratios are time ratios, wall [cpu]")
    head = f"  {'stream':15s} {'records':>8s}"
    for key in ("previous", "decode", "bare"):
        head += f" {key:>19s}"
    print(head + f" {'new/previous':>17s} {'bare/new':>15s}")
    for r in rows:
        n = r["records"]
        line = f"  {r['stream']:15s} {n:8d}"
        for key in ("previous", "decode", "bare"):
            wall, cpu = r[key]
            line += f" {n / wall / 1e6:8.2f} [{n / cpu / 1e6:7.2f}]"
        for a, b in (("previous", "decode"), ("bare", "decode")):
            line += f" {r[a][0] / r[b][0]:6.1f}x [{r[a][1] / r[b][1]:5.1f}x]"
        print(line)
        figure(f"DDL decode {r['stream']}, {mix} mix", n / r["decode"][0] / 1e6,
               n / r["previous"][0] / 1e6, "M records/s",
               baseline_name="the code before issue 13")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny recordings, a few seconds")
    parser.add_argument(
        "--seconds", type=float, default=400.0, help="recording length (default 400 s)"
    )
    parser.add_argument("--repeat", type=int, default=6, help="runs per measurement (median)")
    parser.add_argument("--mix", choices=[*MIXES, "all"], default="all")
    args = parser.parse_args()
    seconds = 4.0 if args.smoke else args.seconds
    repeat = 2 if args.smoke else args.repeat
    old_decode, label = previous_decoder()
    print(f"previous path: copied chunk loop + envelope reads, {label}")
    with tempfile.TemporaryDirectory() as tmp:
        for mix, rates in MIXES.items():
            if args.mix not in (mix, "all"):
                continue
            path = Path(tmp) / f"{mix}.dat"
            start = time.perf_counter()
            write_recording(path, rates, seconds)
            took = time.perf_counter() - start
            size_mb = path.stat().st_size / 1e6
            print(f"wrote {mix} recording ({seconds:g} s) in {took:.1f} s")
            rows = bench(path, [n for n in rates if n != "can_chassis"], repeat, old_decode)
            report(mix, rows, size_mb)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
