"""Vectorized serializers vs rosbags: byte-for-byte equal to rosbags' serialize_ros1 /
serialize_cdr for the same messages built one by one, and read back by rosbags'
deserializers field by field equal to the input.

The reference side is independent of the code under test: Python ints split the stamps
(divmod), rosbags dataclasses hold the values, rosbags' generated code serializes them. Inputs
are drawn by hypothesis: batch sizes 0..6, frame ids of 0..9 characters (some two bytes in
UTF-8, so every CDR padding case comes up), stamps at the edges of each ROS version's time
range, float64 fields from random bit patterns (NaN payloads, infinities, subnormals).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge_lake.export import messages as m
from bridge_lake.export.messages.serialized import Serialized

NS = 1_000_000_000
TS = {1: m.typestore(1), 2: m.typestore(2)}
TIME_LIMITS = {1: (0, 2**32 * NS - 1), 2: (-(2**31) * NS, 2**31 * NS - 1)}
FRAME_IDS = st.text(alphabet="ab/_\u00e9", max_size=9)
ROS = pytest.mark.parametrize("ros", [1, 2])
SETTINGS = settings(max_examples=25, deadline=None)
POINT_DTYPES = {1: "<i1", 2: "<u1", 3: "<i2", 4: "<u2", 5: "<i4", 6: "<u4", 7: "<f4", 8: "<f8"}


@dataclass
class Batch:
    ros: int
    stamps: np.ndarray
    frame_id: str
    rng: np.random.Generator
    seq_start: int

    @property
    def n(self) -> int:
        return self.stamps.size


@st.composite
def batches(draw, ros: int, max_n: int = 6) -> Batch:
    n = draw(st.integers(0, max_n))
    lo, hi = TIME_LIMITS[ros]
    edges = [lo, hi, 0, 1_700_000_000_123_456_789]
    if ros == 2:
        edges += [-1, -1_700_000_000, -NS]
    stamp = st.one_of(st.integers(lo, hi), st.sampled_from(edges))
    stamps = np.array(draw(st.lists(stamp, min_size=n, max_size=n)), np.int64)
    seq_start = draw(st.sampled_from([0, 7, 2**32 - 3])) if ros == 1 else 0
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return Batch(ros, stamps, draw(FRAME_IDS), rng, seq_start)


def any_batch(max_n: int = 6):
    return st.sampled_from([1, 2]).flatmap(lambda ros: batches(ros, max_n))


# -- the independent reference ---------------------------------------------------------------


def types(ros: int):
    return TS[ros].types


def time_msg(ros: int, stamp: int):
    sec, nanosec = divmod(int(stamp), NS)
    if ros == 1 and sec >= 2**31:
        sec -= 2**32  # rosbags types ROS 1 time.secs as int32: same four bytes
    return types(ros)["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def header(ros: int, stamp: int, frame_id: str, seq: int | None):
    t = types(ros)
    if ros == 1:
        return t["std_msgs/msg/Header"](seq=seq, stamp=time_msg(ros, stamp), frame_id=frame_id)
    return t["std_msgs/msg/Header"](stamp=time_msg(ros, stamp), frame_id=frame_id)


def headers(b: Batch) -> list:
    return [header(b.ros, s, b.frame_id, (b.seq_start + i) % 2**32) for i, s in enumerate(b.stamps)]


def serialize(ros: int, msg, typename: str) -> bytes:
    store = TS[ros]
    raw = store.serialize_ros1(msg, typename) if ros == 1 else store.serialize_cdr(msg, typename)
    return bytes(raw)


def deserialize(ros: int, raw: memoryview, typename: str):
    store = TS[ros]
    data = bytes(raw)
    return (
        store.deserialize_ros1(data, typename)
        if ros == 1
        else store.deserialize_cdr(data, typename)
    )


def assert_equal(ours, ref, path: str = "msg") -> None:
    """Field-by-field equality, floats and arrays compared bit for bit."""
    if hasattr(ref, "__dataclass_fields__"):
        assert type(ours).__name__ == type(ref).__name__, path
        for name in ref.__dataclass_fields__:
            if not name.startswith("__"):
                assert_equal(getattr(ours, name), getattr(ref, name), f"{path}.{name}")
    elif isinstance(ref, np.ndarray):
        ours = np.asarray(ours)
        assert ours.dtype == ref.dtype and ours.shape == ref.shape, path
        assert ours.tobytes() == ref.tobytes(), path
    elif isinstance(ref, list):
        assert len(ours) == len(ref), path
        for i, (a, b) in enumerate(zip(ours, ref, strict=True)):
            assert_equal(a, b, f"{path}[{i}]")
    elif isinstance(ref, float):
        assert struct.pack("<d", ours) == struct.pack("<d", ref), f"{path}: {ours} != {ref}"
    else:
        assert ours == ref, f"{path}: {ours!r} != {ref!r}"


def check(ours: Serialized, refs: list, kind: str, ros: int) -> None:
    """Byte equality with rosbags and rosbags' reading of our bytes equal to the reference."""
    typename = m.TYPENAMES[kind]
    expected = [serialize(ros, msg, typename) for msg in refs]
    assert len(ours) == len(refs)
    assert ours.data.dtype == np.uint8 and ours.offsets.dtype == np.int64
    assert ours.offsets.tolist() == np.cumsum([0] + [len(e) for e in expected]).tolist()
    assert ours.data.tobytes() == b"".join(expected)
    for i, msg in enumerate(refs):
        assert_equal(deserialize(ros, ours.message(i), typename), msg)


def bits64(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """float64 from random bit patterns: NaNs with payloads, infinities, subnormals, -0."""
    return rng.integers(0, 2**64, shape, dtype=np.uint64, endpoint=False).view(np.float64)


def floats32(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """float32 values for scalar fields (quiet NaN and infinities included, no signaling NaN:
    rosbags packs scalars through Python floats, which quiets them)."""
    values = rng.standard_normal(shape).astype(np.float32)
    special = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)
    mask = rng.random(shape) < 0.2
    values[mask] = special[rng.integers(0, 4, shape)][mask]
    return values


def vec(ros: int, name: str, values: np.ndarray):
    t = types(ros)[f"geometry_msgs/msg/{name}"]
    keys = "xyzw"[: len(values)]
    return t(**{k: float(v) for k, v in zip(keys, values, strict=True)})


# -- sensor_msgs/Imu ------------------------------------------------------------------------


@SETTINGS
@given(b=any_batch(), with_orientation=st.booleans(), per_row_cov=st.booleans())
def test_imu(b: Batch, with_orientation: bool, per_row_cov: bool) -> None:
    n, rng = b.n, b.rng
    q = bits64(rng, n, 4)
    q[rng.random(n) < 0.3, rng.integers(0, 4)] = np.nan
    gyro, acc = bits64(rng, n, 3), bits64(rng, n, 3)
    covs = [bits64(rng, n, 9) if per_row_cov else bits64(rng, 9) for _ in range(3)]
    ours = m.imu(
        b.stamps,
        b.frame_id,
        orientation=q if with_orientation else None,
        orientation_covariance=covs[0],
        angular_velocity=gyro,
        angular_velocity_covariance=covs[1],
        linear_acceleration=acc,
        linear_acceleration_covariance=covs[2],
        ros=b.ros,
        seq_start=b.seq_start,
    )
    t = types(b.ros)
    refs = []
    for i, h in enumerate(headers(b)):
        cov = [np.array(np.broadcast_to(c, (n, 9))[i]) for c in covs]
        missing = not with_orientation or np.isnan(q[i]).any()
        if missing:
            cov[0][0] = -1.0
        orientation = np.zeros(4) if missing else q[i]
        refs.append(
            t["sensor_msgs/msg/Imu"](
                header=h,
                orientation=vec(b.ros, "Quaternion", orientation),
                orientation_covariance=cov[0],
                angular_velocity=vec(b.ros, "Vector3", gyro[i]),
                angular_velocity_covariance=cov[1],
                linear_acceleration=vec(b.ros, "Vector3", acc[i]),
                linear_acceleration_covariance=cov[2],
            )
        )
    check(ours, refs, "imu", b.ros)


def test_imu_without_orientation_follows_the_message_comment() -> None:
    """No estimate: orientation_covariance[0] = -1, only in the rows that have none."""
    q = np.array([[0, 0, 0, 1], [np.nan] * 4, [0.1, np.nan, 0.2, 0.9]], float)
    cov = np.full(9, 0.5)
    ours = m.imu(
        np.arange(3) * NS,
        "imu",
        orientation=q,
        orientation_covariance=cov,
        angular_velocity=np.zeros((3, 3)),
        linear_acceleration=np.zeros((3, 3)),
        ros=2,
    )
    msgs = [deserialize(2, ours.message(i), "sensor_msgs/msg/Imu") for i in range(3)]
    assert [msg.orientation_covariance[0] for msg in msgs] == [0.5, -1.0, -1.0]
    assert all((msg.orientation_covariance[1:] == 0.5).all() for msg in msgs)
    assert (msgs[1].orientation.x, msgs[1].orientation.w) == (0.0, 0.0)
    assert msgs[0].orientation.w == 1.0


# -- sensor_msgs/NavSatFix ------------------------------------------------------------------


@SETTINGS
@given(b=any_batch(), per_row=st.booleans())
def test_nav_sat_fix(b: Batch, per_row: bool) -> None:
    n, rng = b.n, b.rng
    lat, lon, alt = bits64(rng, n), bits64(rng, n), bits64(rng, n)
    alt[rng.random(n) < 0.5] = np.nan
    status = rng.integers(-1, 3, n).astype(np.int8) if per_row else np.int8(-1)
    service = rng.integers(0, 16, n) if per_row else 1
    cov = bits64(rng, n, 9) if per_row else bits64(rng, 9)
    cov_type = rng.integers(0, 4, n) if per_row else 2
    ours = m.nav_sat_fix(
        b.stamps,
        b.frame_id,
        latitude_deg=lat,
        longitude_deg=lon,
        altitude_m=alt,
        status=status,
        service=service,
        position_covariance=cov,
        position_covariance_type=cov_type,
        ros=b.ros,
        seq_start=b.seq_start,
    )
    t = types(b.ros)

    def row(x, i):
        return x[i] if per_row else x

    refs = [
        t["sensor_msgs/msg/NavSatFix"](
            header=h,
            status=t["sensor_msgs/msg/NavSatStatus"](
                status=int(row(status, i)), service=int(row(service, i))
            ),
            latitude=float(lat[i]),
            longitude=float(lon[i]),
            altitude=float(alt[i]),
            position_covariance=np.array(row(cov, i)),
            position_covariance_type=int(row(cov_type, i)),
        )
        for i, h in enumerate(headers(b))
    ]
    check(ours, refs, "nav_sat_fix", b.ros)


@ROS
@pytest.mark.parametrize("length", range(10))
def test_every_alignment_of_the_frame_id(ros: int, length: int) -> None:
    """Frame ids of 0..9 bytes put the fields after them at every offset modulo 8: NavSatFix
    mixes int8, uint16, float64 and uint8 fields, so each padding rule is exercised."""
    b = Batch(ros, np.array([NS + 5, 2 * NS]), "f" * length, np.random.default_rng(length), 0)
    test_nav_sat_fix.hypothesis.inner_test(b, per_row=True)
    test_can_frame.hypothesis.inner_test(b)
    test_compressed_video.hypothesis.inner_test(b)


# -- can_msgs/Frame -------------------------------------------------------------------------


@SETTINGS
@given(b=any_batch())
def test_can_frame(b: Batch) -> None:
    n, rng = b.n, b.rng
    extended, error = rng.random(n) < 0.5, rng.random(n) < 0.2
    ids = np.where(extended | error, rng.integers(0, 2**29, n), rng.integers(0, 2**11, n))
    rtr, dlc = rng.random(n) < 0.3, rng.integers(0, 9, n)
    data = rng.integers(0, 256, (n, 8), dtype=np.uint8)
    ours = m.can_frame(
        b.stamps,
        b.frame_id,
        can_id=ids,
        is_rtr=rtr,
        is_extended=extended,
        is_error=error,
        dlc=dlc,
        data=data,
        ros=b.ros,
        seq_start=b.seq_start,
    )
    refs = [
        types(b.ros)["can_msgs/msg/Frame"](
            header=h,
            id=int(ids[i]),
            is_rtr=bool(rtr[i]),
            is_extended=bool(extended[i]),
            is_error=bool(error[i]),
            dlc=int(dlc[i]),
            data=data[i].copy(),
        )
        for i, h in enumerate(headers(b))
    ]
    check(ours, refs, "can_frame", b.ros)


# -- sensor_msgs/PointCloud2 ----------------------------------------------------------------

PADDED = m.PointLayout(
    (
        m.PointField("x", 0, np.dtype("f4")),
        m.PointField("y", 4, np.dtype("f4")),
        m.PointField("z", 8, np.dtype("f4")),
        m.PointField("t", 16, np.dtype("f8")),
        m.PointField("rgb", 24, np.dtype("u1"), 3),
        m.PointField("ring", 28, np.dtype("i2")),
    ),
    32,
)
LAYOUTS = [m.VELODYNE_XYZIRT, m.XYZI, PADDED]


def random_column(rng: np.random.Generator, total: int, field: m.PointField) -> np.ndarray:
    shape = (total, field.count) if field.count > 1 else (total,)
    raw = rng.integers(0, 256, (*shape, field.dtype.itemsize), dtype=np.uint8)
    values = raw.view(field.dtype).reshape(shape)
    if field.name in "xyz" and total:
        values[rng.random(total) < 0.05] = np.nan
    return values


@SETTINGS
@given(b=any_batch(), layout=st.sampled_from(LAYOUTS), max_count=st.sampled_from([0, 3, 40]))
def test_point_cloud2(b: Batch, layout: m.PointLayout, max_count: int) -> None:
    counts = b.rng.integers(0, max_count + 1, b.n)
    total = int(counts.sum())
    columns = {f.name: random_column(b.rng, total, f) for f in layout.fields}
    columns["unused"] = np.zeros(total)
    check_point_cloud2(b, layout, counts, columns)


@ROS
@pytest.mark.parametrize("layout", LAYOUTS)
def test_point_cloud2_big_clouds(ros: int, layout: m.PointLayout) -> None:
    """Clouds of 64 KB and more are written in place one by one (kinds.point_cloud2): empty
    clouds between and after them, NaNs at a cloud's first and last point and none in others."""
    counts = np.array([0, 6000, 0, 5000, 7000, 4000, 0, 0])
    rng = np.random.default_rng(3)
    b = Batch(ros, 1_700_000_000 * NS + np.arange(counts.size) * NS, "velodyne", rng, 5)
    total = int(counts.sum())
    columns = {f.name: random_column(rng, total, f) for f in layout.fields}
    for k in "xyz":
        columns[k][np.isnan(columns[k])] = 0.0
    columns["x"][6000] = np.nan  # first point of the cloud at index 3
    columns["z"][18_000 - 1] = np.nan  # last point of the cloud at index 4
    ours = check_point_cloud2(b, layout, counts, columns)
    typename = m.TYPENAMES["point_cloud2"]
    dense = [deserialize(ros, ours.message(i), typename).is_dense for i in range(counts.size)]
    assert dense == [True, True, True, False, False, True, True, True]


def check_point_cloud2(
    b: Batch, layout: m.PointLayout, counts: np.ndarray, columns: dict
) -> Serialized:
    """Our clouds equal rosbags' bytes and decode, by their own field table, to the columns."""
    n, total = b.n, int(counts.sum())
    ours = m.point_cloud2(
        b.stamps,
        b.frame_id,
        counts=counts,
        columns=columns,
        fields=layout,
        ros=b.ros,
        seq_start=b.seq_start,
    )
    t = types(b.ros)
    points = np.zeros(total, layout.dtype)
    for f in layout.fields:
        points[f.name] = columns[f.name]
    blob = points.view(np.uint8)
    fields = [
        t["sensor_msgs/msg/PointField"](
            name=f.name, offset=f.offset, datatype=f.datatype, count=f.count
        )
        for f in layout.fields
    ]
    ends = np.cumsum(counts)
    refs = []
    for i, h in enumerate(headers(b)):
        start, end = int(ends[i] - counts[i]), int(ends[i])
        xyz = [columns[k][start:end] for k in "xyz" if k in columns]
        step = layout.point_step
        refs.append(
            t["sensor_msgs/msg/PointCloud2"](
                header=h,
                height=1,
                width=int(counts[i]),
                fields=fields,
                is_bigendian=False,
                point_step=step,
                row_step=int(counts[i]) * step,
                data=blob[start * step : end * step].copy(),
                is_dense=not any(np.isnan(c).any() for c in xyz),
            )
        )
    check(ours, refs, "point_cloud2", b.ros)

    for i in range(n):  # numpy decoding of our bytes by the message's own field table
        msg = deserialize(b.ros, ours.message(i), "sensor_msgs/msg/PointCloud2")
        dtype = np.dtype(
            {
                "names": [f.name for f in msg.fields],
                "formats": [
                    (POINT_DTYPES[f.datatype], (f.count,))
                    if f.count > 1
                    else POINT_DTYPES[f.datatype]
                    for f in msg.fields
                ],
                "offsets": [f.offset for f in msg.fields],
                "itemsize": msg.point_step,
            }
        )
        decoded = np.frombuffer(msg.data.tobytes(), dtype)
        start, end = int(ends[i] - counts[i]), int(ends[i])
        assert decoded.size == end - start == msg.width
        for f in layout.fields:
            assert decoded[f.name].tobytes() == columns[f.name][start:end].tobytes(), f.name
    return ours


def test_velodyne_layout_is_the_drivers() -> None:
    """velodyne_pointcloud PointcloudXYZIRT: fields packed by addPointField, no padding."""
    layout = m.VELODYNE_XYZIRT
    assert [(f.name, f.offset, f.datatype, f.count) for f in layout.fields] == [
        ("x", 0, 7, 1),
        ("y", 4, 7, 1),
        ("z", 8, 7, 1),
        ("intensity", 12, 7, 1),
        ("ring", 16, 4, 1),
        ("time", 18, 7, 1),
    ]
    assert layout.point_step == 22 and layout.dtype.itemsize == 22
    assert m.XYZI.point_step == 16


def test_point_cloud2_dense_flag_and_float64_columns() -> None:
    counts = np.array([2, 0, 3])
    x = np.array([1.0, 2.0, 3.0, np.nan, 5.0])  # float64 in, float32 on the wire
    columns = {"x": x, "y": x * 0, "z": x * 0, "intensity": x * 0}
    ours = m.point_cloud2([1, 2, 3], "lidar", counts=counts, columns=columns, fields=m.XYZI, ros=2)
    msgs = [deserialize(2, ours.message(i), "sensor_msgs/msg/PointCloud2") for i in range(3)]
    assert [msg.is_dense for msg in msgs] == [True, True, False]
    assert [msg.width for msg in msgs] == [2, 0, 3]
    assert msgs[0].data.view(np.float32)[0::4].tolist() == [1.0, 2.0]


def test_point_layout_rejects_overlaps_and_overruns() -> None:
    f4 = np.dtype("f4")
    with pytest.raises(ValueError, match="overlap"):
        m.PointLayout((m.PointField("a", 0, f4), m.PointField("b", 2, f4)), 8)
    with pytest.raises(ValueError, match="point_step"):
        m.PointLayout((m.PointField("a", 6, f4),), 8)
    with pytest.raises(ValueError, match="unsupported"):
        m.PointField("a", 0, np.dtype("c8"))


# -- sensor_msgs/LaserScan ------------------------------------------------------------------


@SETTINGS
@given(b=any_batch(), with_intensities=st.booleans(), per_row=st.booleans())
def test_laser_scan(b: Batch, with_intensities: bool, per_row: bool) -> None:
    n, rng = b.n, b.rng
    counts = rng.integers(0, 12, n)
    total = int(counts.sum())
    ranges = rng.integers(0, 2**32, total, dtype=np.uint32).view(np.float32)
    intensities = rng.integers(0, 2**32, total, dtype=np.uint32).view(np.float32)
    names = ["angle_min", "angle_max", "angle_increment", "time_increment", "scan_time"]
    names += ["range_min", "range_max"]
    scalars = {k: floats32(rng, n) if per_row else floats32(rng)[()] for k in names}
    ours = m.laser_scan(
        b.stamps,
        b.frame_id,
        **scalars,
        counts=counts,
        ranges=ranges,
        intensities=intensities if with_intensities else None,
        ros=b.ros,
        seq_start=b.seq_start,
    )
    ends = np.cumsum(counts)
    refs = []
    for i, h in enumerate(headers(b)):
        start, end = int(ends[i] - counts[i]), int(ends[i])
        values = {k: float(v[i] if per_row else v) for k, v in scalars.items()}
        refs.append(
            types(b.ros)["sensor_msgs/msg/LaserScan"](
                header=h,
                **values,
                ranges=ranges[start:end].copy(),
                intensities=intensities[start:end].copy()
                if with_intensities
                else np.zeros(0, np.float32),
            )
        )
    check(ours, refs, "laser_scan", b.ros)


# -- sensor_msgs/Image, CompressedImage, foxglove_msgs/CompressedVideo ------------------------


def payloads(rng: np.random.Generator, lengths: np.ndarray, as_arrow: bool):
    """Random byte strings as an Arrow binary array (sliced, chunked) or (buffer, offsets)."""
    chunks = [rng.integers(0, 256, int(k), dtype=np.uint8).tobytes() for k in lengths]
    if as_arrow:
        whole = pa.array([b"skip", *chunks], pa.binary()).slice(1)
        return pa.chunked_array([whole[:1], whole[1:]]) if len(chunks) > 1 else whole, chunks
    pad = b"xyz"
    offsets = np.cumsum([len(pad), *map(len, chunks)])
    buffer = np.frombuffer(pad + b"".join(chunks), np.uint8)
    return (buffer, np.concatenate([[len(pad)], offsets[1:]])), chunks


@SETTINGS
@given(b=any_batch(), as_arrow=st.booleans(), encoding=FRAME_IDS)
def test_image(b: Batch, as_arrow: bool, encoding: str) -> None:
    n, rng = b.n, b.rng
    height, width = rng.integers(0, 5, n), rng.integers(1, 5, n)
    step = width * 3 + rng.integers(0, 3, n)
    data, chunks = payloads(rng, step * height, as_arrow)
    ours = m.image(
        b.stamps,
        b.frame_id,
        height=height,
        width=width,
        encoding=encoding,
        step=step,
        data=data,
        ros=b.ros,
        seq_start=b.seq_start,
    )
    refs = [
        types(b.ros)["sensor_msgs/msg/Image"](
            header=h,
            height=int(height[i]),
            width=int(width[i]),
            encoding=encoding,
            is_bigendian=0,
            step=int(step[i]),
            data=np.frombuffer(chunks[i], np.uint8),
        )
        for i, h in enumerate(headers(b))
    ]
    check(ours, refs, "image", b.ros)


@SETTINGS
@given(b=any_batch(), as_arrow=st.booleans(), fmt=st.sampled_from(["jpeg", "png", ""]))
def test_compressed_image(b: Batch, as_arrow: bool, fmt: str) -> None:
    data, chunks = payloads(b.rng, b.rng.integers(0, 20, b.n), as_arrow)
    ours = m.compressed_image(
        b.stamps, b.frame_id, format=fmt, data=data, ros=b.ros, seq_start=b.seq_start
    )
    refs = [
        types(b.ros)["sensor_msgs/msg/CompressedImage"](
            header=h, format=fmt, data=np.frombuffer(chunks[i], np.uint8)
        )
        for i, h in enumerate(headers(b))
    ]
    check(ours, refs, "compressed_image", b.ros)


@SETTINGS
@given(b=any_batch())
def test_compressed_video(b: Batch) -> None:
    """Lengths of every residue mod 4: the padding before `format` varies per message."""
    data, chunks = payloads(b.rng, b.rng.integers(0, 9, b.n), as_arrow=b.n % 2 == 0)
    ours = m.compressed_video(b.stamps, b.frame_id, format="h264", data=data, ros=b.ros)
    refs = [
        types(b.ros)["foxglove_msgs/msg/CompressedVideo"](
            timestamp=time_msg(b.ros, s),
            frame_id=b.frame_id,
            data=np.frombuffer(chunks[i], np.uint8),
            format="h264",
        )
        for i, s in enumerate(b.stamps)
    ]
    check(ours, refs, "compressed_video", b.ros)


@SETTINGS
@given(b=any_batch(), stream=FRAME_IDS, metas=st.lists(FRAME_IDS, min_size=1, max_size=3))
def test_adtf_sample(b: Batch, stream: str, metas: list[str]) -> None:
    """Meta types of every length per message: the padding before the data's length varies."""
    data, chunks = payloads(b.rng, b.rng.integers(0, 9, b.n), as_arrow=b.n % 2 == 0)
    meta = [metas[int(k)] for k in b.rng.integers(0, len(metas), b.n)]
    ours = m.adtf_sample(
        b.stamps, b.frame_id, stream=stream, meta_type=meta, data=data, ros=b.ros,
        seq_start=b.seq_start,
    )  # fmt: skip
    refs = [
        types(b.ros)["bridge_lake_msgs/msg/AdtfSample"](
            header=header(b.ros, s, b.frame_id, (b.seq_start + i) % 2**32),
            stream=stream,
            meta_type=meta[i],
            data=np.frombuffer(chunks[i], np.uint8),
        )
        for i, s in enumerate(b.stamps)
    ]
    check(ours, refs, "adtf_sample", b.ros)


# -- nav_msgs/Odometry, tf2_msgs/TFMessage --------------------------------------------------


@SETTINGS
@given(b=any_batch(), child=FRAME_IDS, with_twist=st.booleans(), per_row=st.booleans())
def test_odometry(b: Batch, child: str, with_twist: bool, per_row: bool) -> None:
    n, rng = b.n, b.rng
    pos, rot, lin, ang = bits64(rng, n, 3), bits64(rng, n, 4), bits64(rng, n, 3), bits64(rng, n, 3)
    pose_cov = bits64(rng, n, 36) if per_row else bits64(rng, 36)
    twist_cov = bits64(rng, n, 36) if per_row else None
    ours = m.odometry(
        b.stamps,
        b.frame_id,
        child_frame_id=child,
        position=pos,
        orientation=rot,
        pose_covariance=pose_cov,
        linear_velocity=lin if with_twist else None,
        angular_velocity=ang if with_twist else None,
        twist_covariance=twist_cov,
        ros=b.ros,
        seq_start=b.seq_start,
    )
    t = types(b.ros)
    refs = []
    for i, h in enumerate(headers(b)):
        twist = t["geometry_msgs/msg/Twist"](
            linear=vec(b.ros, "Vector3", lin[i] if with_twist else np.zeros(3)),
            angular=vec(b.ros, "Vector3", ang[i] if with_twist else np.zeros(3)),
        )
        refs.append(
            t["nav_msgs/msg/Odometry"](
                header=h,
                child_frame_id=child,
                pose=t["geometry_msgs/msg/PoseWithCovariance"](
                    pose=t["geometry_msgs/msg/Pose"](
                        position=vec(b.ros, "Point", pos[i]),
                        orientation=vec(b.ros, "Quaternion", rot[i]),
                    ),
                    covariance=np.array(pose_cov[i] if per_row else pose_cov),
                ),
                twist=t["geometry_msgs/msg/TwistWithCovariance"](
                    twist=twist,
                    # left out: "not estimated", 1e6 on the diagonal, never zeros ("exact")
                    covariance=np.array(twist_cov[i]) if per_row else np.diag([1e6] * 6).ravel(),
                ),
            )
        )
    check(ours, refs, "odometry", b.ros)


@SETTINGS
@given(
    b=any_batch(max_n=4),
    k=st.integers(1, 3),
    per_transform=st.booleans(),
    names=st.lists(FRAME_IDS, min_size=6, max_size=6),
)
def test_tf_message(b: Batch, k: int, per_transform: bool, names: list[str]) -> None:
    n, rng = b.n, b.rng
    parents, children = names[:k], names[3 : 3 + k]
    trans, rot = bits64(rng, n * k, 3), bits64(rng, n * k, 4)
    stamps = np.repeat(b.stamps, k) if per_transform else b.stamps
    if per_transform and n * k > 1:
        stamps = stamps[rng.permutation(n * k)]
    ours = m.tf_message(
        stamps,
        parent_frame_ids=parents,
        child_frame_ids=children,
        translation=trans,
        rotation=rot,
        transforms_per_message=k,
        ros=b.ros,
    )
    t = types(b.ros)
    refs = []
    for i in range(n):
        transforms = []
        for j in range(k):
            s = stamps[i * k + j] if per_transform else stamps[i]
            transforms.append(
                t["geometry_msgs/msg/TransformStamped"](
                    header=header(b.ros, s, parents[j], 0),
                    child_frame_id=children[j],
                    transform=t["geometry_msgs/msg/Transform"](
                        translation=vec(b.ros, "Vector3", trans[i * k + j]),
                        rotation=vec(b.ros, "Quaternion", rot[i * k + j]),
                    ),
                )
            )
        refs.append(t["tf2_msgs/msg/TFMessage"](transforms=transforms))
    check(ours, refs, "tf_message", b.ros)


@ROS
@pytest.mark.parametrize("n", [0, 1])
def test_empty_and_single_message_batches(ros: int, n: int) -> None:
    """Every kind with n = 0 and n = 1 (hypothesis draws them too, but not for sure)."""

    def b() -> Batch:
        stamps = np.full(n, 1_700_000_000_123_456_789, np.int64)
        return Batch(ros, stamps, "base_link", np.random.default_rng(n), 0)

    test_imu.hypothesis.inner_test(b(), with_orientation=True, per_row_cov=True)
    test_nav_sat_fix.hypothesis.inner_test(b(), per_row=True)
    test_can_frame.hypothesis.inner_test(b())
    test_point_cloud2.hypothesis.inner_test(b(), layout=m.VELODYNE_XYZIRT, max_count=3)
    test_laser_scan.hypothesis.inner_test(b(), with_intensities=True, per_row=True)
    test_image.hypothesis.inner_test(b(), as_arrow=True, encoding="mono8")
    test_compressed_image.hypothesis.inner_test(b(), as_arrow=False, fmt="jpeg")
    test_compressed_video.hypothesis.inner_test(b())
    test_odometry.hypothesis.inner_test(b(), child="odom", with_twist=True, per_row=True)
    names = ["map", "odom", "", "odom", "base_link", "imu"]
    test_tf_message.hypothesis.inner_test(b(), k=2, per_transform=True, names=names)


# -- stamps ---------------------------------------------------------------------------------


def test_stamps_split_exactly_by_integer_arithmetic() -> None:
    stamps = np.array(
        [1_700_000_000_123_456_789, -1, -1_700_000_000, -(2**31) * NS, 2**31 * NS - 1, 0], np.int64
    )
    sec, nanosec = m.split_stamps(stamps, 2)
    assert sec.tolist() == [1_700_000_000, -1, -2, -(2**31), 2**31 - 1, 0]
    assert nanosec.tolist() == [123_456_789, 999_999_999, 300_000_000, 0, 999_999_999, 0]
    sec, nanosec = m.split_stamps(np.array([2**32 * NS - 1, 1_700_000_000_123_456_789]), 1)
    assert sec.tolist() == [2**32 - 1, 1_700_000_000]
    assert nanosec.tolist() == [999_999_999, 123_456_789]


@pytest.mark.parametrize(
    ("ros", "stamps", "bad"),
    [
        (2, [0, 2**31 * NS], 1),
        (2, [5, 6, -(2**31) * NS - 1], 2),
        (2, [np.iinfo(np.int64).max], 0),
        (2, [np.iinfo(np.int64).min], 0),
        (1, [3, -1], 1),
        (1, [2**32 * NS], 0),
        (1, [np.iinfo(np.int64).max], 0),
        (1, [np.iinfo(np.int64).min], 0),
    ],
)
def test_stamps_outside_the_wire_time_are_refused(ros: int, stamps: list[int], bad: int) -> None:
    with pytest.raises(ValueError, match=rf"stamp_ns\[{bad}\]"):
        m.compressed_image(
            np.array(stamps, np.int64),
            "cam",
            format="jpeg",
            data=pa.array([b""] * len(stamps)),
            ros=ros,
        )


def test_float_stamps_are_refused() -> None:
    with pytest.raises(ValueError, match="stamp_ns"):
        m.tf_message(
            np.array([1.5]),
            parent_frame_ids=["a"],
            child_frame_ids=["b"],
            translation=np.zeros((1, 3)),
            rotation=np.zeros((1, 4)),
            transforms_per_message=1,
            ros=2,
        )


def test_ros1_seq_counts_from_seq_start_and_wraps() -> None:
    ours = m.can_frame(
        np.arange(3),
        "can",
        can_id=np.zeros(3, int),
        is_rtr=False,
        is_extended=False,
        is_error=False,
        dlc=0,
        data=np.zeros((3, 8), np.uint8),
        ros=1,
        seq_start=2**32 - 2,
    )
    seqs = [deserialize(1, ours.message(i), "can_msgs/msg/Frame").header.seq for i in range(3)]
    assert seqs == [2**32 - 2, 2**32 - 1, 0]


# -- Serialized -----------------------------------------------------------------------------


def sample(sizes: list[int]) -> Serialized:
    offsets = np.cumsum([0, *sizes]).astype(np.int64)
    return Serialized(np.arange(offsets[-1], dtype=np.int64).astype(np.uint8), offsets)


def test_serialized_message_take_concat() -> None:
    s = sample([3, 0, 2, 4])
    assert len(s) == 4
    assert bytes(s.message(2)) == bytes([3, 4]) and bytes(s.message(-1)) == bytes([5, 6, 7, 8])
    view = s.message(0)
    assert view.obj is not None and np.shares_memory(np.asarray(view), s.data)
    taken = s.take(np.array([3, 0, 0, -3, 1]))
    assert [bytes(taken.message(i)) for i in range(5)] == [
        bytes([5, 6, 7, 8]),
        bytes([0, 1, 2]),
        bytes([0, 1, 2]),
        b"",
        b"",
    ]
    assert taken.offsets.tolist() == [0, 4, 7, 10, 10, 10]
    assert len(s.take(np.array([], np.int64))) == 0
    both = Serialized.concat([s, sample([1]), sample([])])
    assert len(both) == 5 and both.offsets.tolist() == [0, 3, 3, 5, 9, 10]
    assert bytes(both.message(4)) == b"\0"
    assert len(Serialized.concat([])) == 0
    with pytest.raises(IndexError):
        s.message(4)
    with pytest.raises(IndexError):
        s.take(np.array([4]))


def test_serialized_rejects_inconsistent_offsets() -> None:
    with pytest.raises(ValueError, match="offsets"):
        Serialized(np.zeros(4, np.uint8), np.array([0, 3, 2, 4], np.int64))
    with pytest.raises(ValueError, match="offsets"):
        Serialized(np.zeros(4, np.uint8), np.array([0, 3], np.int64))
    with pytest.raises(ValueError, match="uint8"):
        Serialized(np.zeros(4, np.int16), np.array([0, 4], np.int64))


# -- bad input ------------------------------------------------------------------------------

N2 = np.array([1, 2])


def imu_with(**kw):
    args = dict(
        orientation=None,
        angular_velocity=np.zeros((2, 3)),
        linear_acceleration=np.zeros((2, 3)),
        ros=2,
    )
    return m.imu(N2, "imu", **(args | kw))


def cloud_with(**kw):
    args = dict(
        counts=[1, 1],
        columns={k: np.zeros(2) for k in "xyz"} | {"intensity": [1, 2]},
        fields=m.XYZI,
        ros=2,
    )
    return m.point_cloud2(N2, "lidar", **(args | kw))


def can_with(**kw):
    args = dict(
        can_id=[1, 2],
        is_rtr=False,
        is_extended=False,
        is_error=False,
        dlc=8,
        data=np.zeros((2, 8), np.uint8),
        ros=2,
    )
    return m.can_frame(N2, "can", **(args | kw))


BAD = [
    (lambda: imu_with(angular_velocity=np.zeros((3, 3))), "angular_velocity"),
    (lambda: imu_with(linear_acceleration=np.zeros((2, 4))), "linear_acceleration"),
    (lambda: imu_with(orientation=np.zeros((2, 3))), "orientation"),
    (lambda: imu_with(angular_velocity_covariance=np.zeros(8)), "angular_velocity_covariance"),
    (lambda: imu_with(ros=3), "ros"),
    (
        lambda: m.imu(
            np.zeros((2, 1), int),
            "imu",
            orientation=None,
            angular_velocity=0,
            linear_acceleration=0,
            ros=2,
        ),
        "stamp_ns",
    ),
    (lambda: imu_with(angular_velocity=np.full((2, 3), "a")), "angular_velocity"),
    (
        lambda: m.imu(
            N2,
            "a\0b",
            orientation=None,
            angular_velocity=np.zeros((2, 3)),
            linear_acceleration=np.zeros((2, 3)),
            ros=2,
        ),
        "frame_id",
    ),
    (lambda: imu_with(ros=1, seq_start=-1), "seq_start"),
    (lambda: cloud_with(counts=[1, 2]), "columns\\['x'\\]"),
    (lambda: cloud_with(counts=[1]), "counts"),
    (lambda: cloud_with(counts=[-1, 3]), "counts"),
    (lambda: cloud_with(columns={"x": np.zeros(2)}), "columns has no 'y'"),
    (
        lambda: cloud_with(columns={k: np.zeros(2) for k in "xyz"} | {"intensity": ["a", "b"]}),
        "intensity",
    ),
    (lambda: cloud_with(fields=m.VELODYNE_XYZIRT), "columns has no 'ring'"),
    (
        lambda: cloud_with(
            fields=m.PointLayout.packed(("x", "f4"), ("ring", "u2")),
            columns={"x": np.zeros(2), "ring": [1.5, 2]},
        ),
        "ring",
    ),
    (
        lambda: cloud_with(
            fields=m.PointLayout.packed(("x", "f4"), ("ring", "u2")),
            columns={"x": np.zeros(2), "ring": [70000, 2]},
        ),
        "ring",
    ),
    (lambda: can_with(can_id=[1]), "can_id"),
    (lambda: can_with(can_id=[2048, 1]), "can_id"),
    (lambda: can_with(dlc=[8, 300]), "dlc"),
    (lambda: can_with(data=np.zeros((2, 7), np.uint8)), "data"),
    (lambda: can_with(is_rtr=[True]), "is_rtr"),
    (lambda: can_with(is_error=[0.5, 1.0]), "is_error"),
    (
        lambda: m.nav_sat_fix(
            N2,
            "gps",
            latitude_deg=[1],
            longitude_deg=[1, 2],
            altitude_m=[1, 2],
            status=0,
            service=1,
            ros=2,
        ),
        "latitude_deg",
    ),
    (
        lambda: m.nav_sat_fix(
            N2,
            "gps",
            latitude_deg=[1, 2],
            longitude_deg=[1, 2],
            altitude_m=[1, 2],
            status=[0, 3],
            service=1,
            ros=2,
        ),
        "status",
    ),
    (
        lambda: m.nav_sat_fix(
            N2,
            "gps",
            latitude_deg=[1, 2],
            longitude_deg=[1, 2],
            altitude_m=[1, 2],
            status=0,
            service=1,
            position_covariance_type=4,
            ros=2,
        ),
        "position_covariance_type",
    ),
    (
        lambda: m.laser_scan(
            N2,
            "scan",
            angle_min=0,
            angle_max=1,
            angle_increment=[1, 2, 3],
            time_increment=0,
            scan_time=0,
            range_min=0,
            range_max=1,
            counts=[1, 1],
            ranges=[1, 2],
            ros=2,
        ),
        "angle_increment",
    ),
    (
        lambda: m.laser_scan(
            N2,
            "scan",
            angle_min=0,
            angle_max=1,
            angle_increment=1,
            time_increment=0,
            scan_time=0,
            range_min=0,
            range_max=1,
            counts=[1, 1],
            ranges=[1, 2],
            intensities=[1],
            ros=2,
        ),
        "intensities",
    ),
    (
        lambda: m.image(
            N2,
            "cam",
            height=2,
            width=2,
            encoding="mono8",
            step=2,
            data=pa.array([b"1234", b"123"]),
            ros=2,
        ),
        "data\\[1\\]",
    ),
    (
        lambda: m.image(
            N2, "cam", height=2, width=2, encoding="mono8", step=2, data=pa.array([b"1234"]), ros=2
        ),
        "data has 1",
    ),
    (
        lambda: m.compressed_image(N2, "cam", format="jpeg", data=pa.array(["a", "b"]), ros=2),
        "data must be an Arrow binary",
    ),
    (
        lambda: m.compressed_image(N2, "cam", format="jpeg", data=pa.array([b"a", None]), ros=2),
        "data has 1 nulls",
    ),
    (
        lambda: m.compressed_image(
            N2, "cam", format="jpeg", data=(np.zeros(3, np.uint8), [0, 2, 4]), ros=2
        ),
        "data offsets",
    ),
    (
        lambda: m.compressed_video(N2, "cam", format="h264", data=[b"a", b"b"], ros=2),
        "data must be",
    ),
    (
        lambda: m.odometry(
            N2,
            "odom",
            child_frame_id="base_link",
            position=np.zeros((2, 3)),
            orientation=np.zeros((2, 3)),
            ros=2,
        ),
        "orientation",
    ),
    (
        lambda: m.odometry(
            N2,
            "odom",
            child_frame_id="base_link",
            position=np.zeros((2, 3)),
            orientation=np.zeros((2, 4)),
            twist_covariance=np.zeros(9),
            ros=2,
        ),
        "twist_covariance",
    ),
    (
        lambda: m.tf_message(
            N2,
            parent_frame_ids=["a"],
            child_frame_ids=["b", "c"],
            translation=np.zeros((2, 3)),
            rotation=np.zeros((2, 4)),
            transforms_per_message=1,
            ros=2,
        ),
        "child_frame_ids",
    ),
    (
        lambda: m.tf_message(
            N2,
            parent_frame_ids=["a", "b"],
            child_frame_ids=["b", "c"],
            translation=np.zeros((3, 3)),
            rotation=np.zeros((3, 4)),
            transforms_per_message=2,
            ros=2,
        ),
        "translation",
    ),
    (
        lambda: m.tf_message(
            N2,
            parent_frame_ids=["a"],
            child_frame_ids=["b"],
            translation=np.zeros((3, 3)),
            rotation=np.zeros((3, 4)),
            transforms_per_message=1,
            ros=2,
        ),
        "stamp_ns",
    ),
    (
        lambda: m.tf_message(
            N2,
            parent_frame_ids=["a"],
            child_frame_ids=["b"],
            translation=np.zeros((2, 3)),
            rotation=np.zeros((2, 3)),
            transforms_per_message=1,
            ros=2,
        ),
        "rotation",
    ),
    (
        lambda: m.tf_message(
            N2,
            parent_frame_ids=[],
            child_frame_ids=[],
            translation=np.zeros((2, 3)),
            rotation=np.zeros((2, 4)),
            transforms_per_message=0,
            ros=2,
        ),
        "transforms_per_message",
    ),
]


@pytest.mark.parametrize(("call", "name"), BAD)
def test_bad_input_names_the_argument(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


# -- typestore and definitions --------------------------------------------------------------


@ROS
@pytest.mark.parametrize("kind", sorted(m.TYPENAMES))
def test_every_type_has_a_definition(ros: int, kind: str) -> None:
    definition = m.message_definition(m.TYPENAMES[kind], ros)
    assert definition.text and definition.encoding == f"ros{ros}msg"
    if ros == 1:
        assert "/msg/" not in definition.name and len(definition.md5sum) == 32
        assert definition.rihs01 is None
    else:
        assert definition.name == m.TYPENAMES[kind] and definition.rihs01.startswith("RIHS01_")
        assert definition.md5sum is None


def test_definitions_of_the_registered_types() -> None:
    can1 = m.message_definition("can_msgs/Frame", 1)
    assert can1.name == "can_msgs/Frame"
    assert can1.text.startswith("std_msgs/Header header\nuint32 id\n")
    video2 = m.message_definition("foxglove_msgs/msg/CompressedVideo", 2)
    assert video2.text.startswith("builtin_interfaces/Time timestamp\nstring frame_id\n")
    assert "MSG: builtin_interfaces/Time" in video2.text
    assert m.message_definition("foxglove_msgs/CompressedVideo", 1).text.startswith(
        "time timestamp\nstring frame_id\nuint8[] data\nstring format"
    )
    imu2 = m.message_definition("sensor_msgs/msg/Imu", 2).text
    assert "builtin_interfaces/Time stamp" in imu2 and "uint32 seq" not in imu2
    with pytest.raises(ValueError, match="unknown message type"):
        m.message_definition("nope_msgs/msg/Nothing", 2)


KNOWN_ROS1_MD5 = {  # as `rosbag info` prints them for bags recorded by ROS 1 itself
    "sensor_msgs/msg/Imu": "6a62c6daae103f4ff57a132d6f95cec2",
    "sensor_msgs/msg/NavSatFix": "2d3a8cd499b9b4a0249fb98fd05cfa48",
    "sensor_msgs/msg/PointCloud2": "1158d486dd51d683ce2f1be655c3c181",
    "sensor_msgs/msg/LaserScan": "90c7ef2dc6895d81024acba2ac42f369",
    "sensor_msgs/msg/Image": "060021388200f6f0f447d0fcd9c64743",
    "sensor_msgs/msg/CompressedImage": "8f7a12909da2c9d3332d540a0977563f",
    "nav_msgs/msg/Odometry": "cd5e73d190d741a2f92e81eda573aca7",
    "tf2_msgs/msg/TFMessage": "94810edda583a504dfda3829e70d7eec",
    "can_msgs/msg/Frame": "64ae5cebf967dc6aae4e78f5683a5b25",
}


@pytest.mark.parametrize(("typename", "md5sum"), sorted(KNOWN_ROS1_MD5.items()))
def test_ros1_md5sums_match_recorded_bags(typename: str, md5sum: str) -> None:
    assert m.message_definition(typename, 1).md5sum == md5sum


def test_point_cloud2_filled_in_many_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of a few points (the real block is ~2 MiB) must tile the clouds exactly."""
    from bridge_lake.export.messages import pointcloud

    monkeypatch.setattr(pointcloud, "FILL_BLOCK_BYTES", 50)
    for ros, layout in ((1, m.VELODYNE_XYZIRT), (2, PADDED), (2, m.XYZI)):
        b = Batch(ros, np.array([NS, 2 * NS, 3 * NS]), "lidar", np.random.default_rng(ros), 0)
        test_point_cloud2.hypothesis.inner_test(b, layout=layout, max_count=40)
