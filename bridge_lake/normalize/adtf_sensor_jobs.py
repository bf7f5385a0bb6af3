"""Sensor jobs of the ADTF normalizer: CAN frames, lidar scans and compressed video, each
built on the struct or base job of adtf_jobs.py."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bridge_lake.errors import BridgeLakeError
from bridge_lake.formats.adtf.ddl_decode import decode
from bridge_lake.formats.adtf.errors import DDLError
from bridge_lake.formats.video import access_units
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.normalize.adtf_jobs import (
    Batch,
    Job,
    StructJob,
    mapped_column,
    measured_rate,
    table_column,
    unfit_indices,
)
from bridge_lake.normalize.adtf_mapping import Rule
from bridge_lake.normalize.sink import StreamInfo


class CanJob(StructJob):
    """tCANData-like frames: extended flag from the id bit (or a flag), payload cut to dlc,
    error frames and bus-status messages quarantined with their reason (they are not frames
    of the bus traffic the table describes)."""

    first_channel: int | None = None

    def topic(self, batch: Batch | None) -> str | None:
        if not self.rule.topic:
            return None
        channel = "unknown" if self.first_channel is None else self.first_channel
        return self.rule.topic.format(stream=self.stream.name, channel=channel)

    def declare(self, batch: Batch | None) -> None:
        if not self.declared and batch is not None:
            # the topic names the bus channel: decode the channel of the first frame now
            idx, table = self._peek(batch)
            if table is not None and table.num_rows:
                self.first_channel = int(
                    table_column(table, self._field("channel")).to_numpy()[idx]
                )
        super().declare(batch)

    def _peek(self, batch: Batch):
        ok = np.flatnonzero(batch.lengths == self.size) if self.size else np.arange(batch.n)
        if not len(ok):
            return 0, None
        buf, offsets, lengths = batch.buffer(ok[:1])
        try:
            return 0, decode(self.ddl, self.struct, buf, offsets, lengths, layout=self.layout)
        except DDLError:
            return 0, None

    def _field(self, column: str) -> str:
        return next(f.element for f in self.rule.fields if f.column == column)

    def process(self, batch: Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        idx, table = self.drop_bad_time(batch, idx, table)
        opt = self.rule.can
        names = {f.column: f.element for f in self.rule.fields}

        def ints(column: str) -> np.ndarray | None:
            if column not in names:
                return None
            return np.asarray(table_column(table, names[column]).to_numpy(zero_copy_only=False))

        raw_id = ints("can_id").astype(np.int64)
        dlc = ints("dlc").astype(np.int64)
        flags = ints("flags")
        tag = ints("tag")
        data_arr = table_column(table, names["data"])
        if not pa.types.is_fixed_size_list(data_arr.type):
            self.quarantine(
                batch,
                idx,
                [f"CAN data element {names['data']!r} is not a fixed byte array"] * len(idx),
            )
            return
        width = data_arr.type.list_size
        payload = np.asarray(
            data_arr.flatten().to_numpy(zero_copy_only=False), dtype=np.uint8
        ).reshape(-1, width)
        ext = np.zeros(len(idx), dtype=bool)
        if opt["extended_bit"] is not None:
            ext |= ((raw_id >> opt["extended_bit"]) & 1).astype(bool)
            raw_id = raw_id & ~(1 << opt["extended_bit"])
        if flags is not None and opt["extended_flag"]:
            ext |= (flags & opt["extended_flag"]) != 0
        reasons = np.full(len(idx), None, dtype=object)
        if tag is not None:
            status = ~np.isin(tag, opt["data_tags"])
            reasons[status] = [f"CAN status message (tag {t})" for t in tag[status].tolist()]
        if flags is not None and opt["error_flag"]:
            err = ((flags & opt["error_flag"]) != 0) & (reasons == None)  # noqa: E711
            reasons[err] = "CAN error frame"
        too_long = (dlc > width) & (reasons == None)  # noqa: E711
        reasons[too_long] = [
            f"dlc {d} exceeds the {width}-byte data array" for d in dlc[too_long].tolist()
        ]
        mask = np.where(ext, opt["extended_mask"], opt["standard_mask"])
        wide = ((raw_id & ~mask) != 0) & (reasons == None)  # noqa: E711
        reasons[wide] = [
            f"CAN id 0x{i:X} exceeds {'29' if e else '11'} bits"
            for i, e in zip(raw_id[wide].tolist(), ext[wide].tolist(), strict=True)
        ]
        bad = reasons != None  # noqa: E711
        if bad.any():
            where = np.flatnonzero(bad)
            self.quarantine(batch, idx[where], reasons[where].tolist())
            keep = np.flatnonzero(~bad)
            idx, table = idx[keep], table.take(pa.array(keep))
            raw_id, dlc, ext, payload = raw_id[keep], dlc[keep], ext[keep], payload[keep]
            flags = flags[keep] if flags is not None else None
        cols = self.base_columns(batch, idx, table)
        cols["channel"] = table_column(table, names["channel"])
        cols["can_id"] = raw_id
        cols["is_extended"] = ext
        if flags is not None and opt["remote_flag"]:
            cols["is_remote"] = (flags & opt["remote_flag"]) != 0
        cols["dlc"] = dlc
        cols["data"] = _sliced_binary(payload, dlc)
        self.sink.write(self.name, self.table, pa.table(cols))


def _sliced_binary(payload: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Row i's first lengths[i] bytes of an (n, w) byte matrix as a binary array, vectorized."""
    keep = np.arange(payload.shape[1])[None, :] < lengths[:, None]
    values = np.ascontiguousarray(payload[keep])
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(values)]
    )


class LidarJob(StructJob):
    """One lidar_scans row per sample and its point array as lidar_points rows.

    The table pair is two declared streams of the same name: lidar_scans counts samples,
    lidar_points counts the points of the samples that decoded (a quarantined sample's points
    are inside its quarantined record). Scan ids come from the sink (unique in the drive); the
    payload's own frame counter, if mapped, is `sensor_scan_id`. A point's time is its scan's
    plus `time_offset_ns`, and `end_time_ns` is the time of the scan's last point: time_ns plus
    the largest offset of its points (`scan_ends`); without a per-point time in the payload the
    offset is null and the end equals the start.
    """

    def info(self, batch: Batch | None) -> list[StreamInfo]:
        scans = super().info(batch)[0]
        points = StreamInfo(self.name, "lidar_points", self.source, self.source_type(), scans.topic)
        return [scans, points]

    def process(self, batch: Batch) -> None:
        idx, table = self.decode(batch)
        if table is None:
            return
        idx, table = self.drop_bad_time(batch, idx, table)
        reasons, fitted = self.unfit_points(table)
        idx, table = self.drop_unfit(batch, idx, table, reasons)
        if len(idx) < len(reasons):
            fitted = {}  # scans were dropped: the points' columns are made again
        cols = self.base_columns(batch, idx, table)
        scan_id = self.sink.scan_ids(len(idx))
        if self.rule.sensor_scan_id:
            cols["sensor_scan_id"] = table_column(table, self.rule.sensor_scan_id)
        points = table_column(table, self.rule.points_element)
        counts = np.diff(np.asarray(points.offsets)).astype(np.int64)
        flat = points.flatten()
        pcols: dict = {"scan_id": np.repeat(scan_id, counts)}
        flat_table = pa.table({f.name: flat.field(f.name) for f in flat.type})
        schema = NORMALIZED["lidar_points"].schema
        for fm in self.rule.point_fields:
            column = fitted.get(fm.column)
            if column is None:
                column = mapped_column(flat_table, fm, schema.field(fm.column).type)
            pcols[fm.column] = column
        cols.update(
            scan_id=scan_id,
            end_time_ns=scan_ends(cols["time_ns"], counts, pcols.get("time_offset_ns")),
            point_count=counts,
            cut=pa.repeat(pa.scalar("frame"), len(idx)),
        )
        self.sink.write(self.name, self.table, pa.table(cols))
        self.sink.read(self.name, "lidar_points", int(counts.sum()))
        self.sink.write(self.name, "lidar_points", pa.table(pcols))

    def unfit_points(self, table: pa.Table) -> tuple[np.ndarray, dict[str, pa.Array]]:
        """Per scan, its first point whose mapped value its integer column cannot hold (the
        scan's whole record goes to quarantine: a point is not a record), or None; and the
        points' integer columns, as checked (`Unfit.columns`)."""
        reasons = np.full(table.num_rows, None, dtype=object)
        schema = NORMALIZED["lidar_points"].schema
        fields = self.rule.point_fields
        if not any(pa.types.is_integer(schema.field(f.column).type) for f in fields):
            return reasons, {}
        points = table_column(table, self.rule.points_element)
        flat = points.flatten()
        flat_table = pa.table({f.name: flat.field(f.name) for f in flat.type})
        bad, why, fitted = unfit_indices(flat_table, fields, schema)
        if len(bad):
            offsets = np.asarray(points.offsets).astype(np.int64)
            starts = offsets[:-1] - offsets[0]  # the scans' first points in `flat`
            owner = np.searchsorted(starts, bad, side="right") - 1
            scans, first = np.unique(owner, return_index=True)
            reasons[scans] = [
                f"point {int(bad[i] - starts[s])}: {why[i]}"
                for s, i in zip(scans.tolist(), first.tolist(), strict=True)
            ]
        return reasons, fitted


def scan_ends(time_ns: np.ndarray, counts: np.ndarray, offsets: pa.Array | None) -> np.ndarray:
    """Each scan's end_time_ns: its time plus the largest time_offset_ns of its points (the
    last point's time; a null offset is 0, as in the lidar_points_timed view), its time when
    it has no points or no offsets. `counts` are the scans' point counts, in point order."""
    time_ns = np.asarray(time_ns, dtype=np.int64)
    if offsets is None or not len(offsets):
        return time_ns.copy()
    values = pc.fill_null(offsets, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    has = counts > 0
    starts = (np.cumsum(counts) - counts)[has]
    largest = np.zeros(len(time_ns), dtype=np.int64)
    largest[has] = np.maximum.reduceat(values, starts)
    return time_ns + largest


class VideoJob(Job):
    """Compressed video: each sample is one access unit, kept as is. `is_keyframe` = the AU
    holds an IDR slice (NAL scan over the whole batch with numpy); width/height from the
    rule, the stream-type properties, or else the first SPS of the stream."""

    def __init__(self, stream, name, rel, sink, rule: Rule, props: dict[str, str]) -> None:
        super().__init__(stream, name, rel, sink)
        self.rule = rule
        self.table = rule.table
        self.width = rule.width or _int_prop(props, "width", "pixel_width")
        self.height = rule.height or _int_prop(props, "height", "pixel_height")
        self.fps = _float_prop(props, "fps", "framerate")

    def info(self, batch: Batch | None) -> list[StreamInfo]:
        rate = self.rule.expected_rate_hz or self.fps or measured_rate(batch)
        topic = self.rule.topic.format(stream=self.stream.name) if self.rule.topic else None
        return [StreamInfo(self.name, self.table, self.source, self.source_type(), topic, rate)]

    def process(self, batch: Batch) -> None:
        buf, offsets, lengths = batch.buffer()
        unsized = self.width is None or self.height is None
        key, size = access_units(buf, offsets, lengths, size=unsized)
        if size is not None:
            self.width, self.height = size
        n = batch.n
        if len(buf) > np.iinfo(np.int32).max:  # pa.binary() offsets are int32
            raise BridgeLakeError(f"{self.rel}: video batch of {len(buf)} bytes exceeds 2 GiB")
        ends = np.concatenate([offsets, [len(buf)]]).astype(np.int32)
        data = pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(ends), pa.py_buffer(buf)])
        cols = {
            "time_ns": batch.time_ns,
            "frame_id": pa.repeat(pa.scalar(self.rule.frame_id or self.stream.name), n),
            "camera": pa.repeat(pa.scalar(self.stream.name), n),
            "width": pa.repeat(pa.scalar(self.width, pa.int32()), n),
            "height": pa.repeat(pa.scalar(self.height, pa.int32()), n),
            "encoding": pa.repeat(pa.scalar(self.rule.encoding), n),
            "is_keyframe": key,
            "data": data,
        }
        self.sink.write(self.name, self.table, pa.table(cols))


def _int_prop(props: dict[str, str], *names: str) -> int | None:
    for n in names:
        try:
            return int(props[n], 0)
        except (KeyError, ValueError):
            continue
    return None


def _float_prop(props: dict[str, str], *names: str) -> float | None:
    for n in names:
        try:
            value = float(props[n])
        except (KeyError, ValueError):
            continue
        if value > 0 and math.isfinite(value):
            return value
    return None
