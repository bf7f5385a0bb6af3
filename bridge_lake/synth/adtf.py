"""Synthetic ADTF 3 drives: the streams a real test vehicle records, in a real .dat file.

One drive is one IFHD 0x0500 recording (ns clock) with
- `front_camera`: H.264 (PyAV/libx264) Annex-B access units, one per sample, key frames
  flagged as index points;
- `can_powertrain`, `can_chassis`: `tCANData` frames (spec §10.4), ~500 Hz each (5 ids at
  `can_hz`, 100 by default);
- `lidar_top`: 10 Hz scans, DDL struct with a dynamic point array;
- `gnss` 10 Hz and `imu` 100 Hz DDL structs.
Every payload carries the device's own time stamp, which runs at a slightly different rate
(tens of ppm) and offset than the recorder clock, as real sensors do; chunk times add a small
transport latency to the capture time. All signals derive from one vehicle trajectory on an
oval track, so the streams agree with each other. The output is byte-identical for a seed:
numpy's seeded generator, single-threaded x264 and a content-derived GUID.

Drives of at least PLANT_MIN_MINUTES carry planted scene events at known times (a hard brake,
a sharp turn, a GNSS outage, a lidar dropout, black camera frames) for the scene rules to
find; `planted_events(minutes, seed)` returns their windows. Shorter drives stay calm, so the
format tests can count every stream at its nominal rate.

Payloads are built per block of samples with numpy (no Python object per point or frame
field); only the final chunk writes are per sample.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bridge_lake.calibrate.rig import SHIPPED_RIGS, load_rig
from bridge_lake.formats.adtf.samples import Property, StreamType
from bridge_lake.formats.adtf.writer import DatWriter
from bridge_lake.formats.video import H264Encoder
from bridge_lake.geometry import enu_to_geodetic

START = dt.datetime(2024, 5, 14, 9, 30, tzinfo=dt.UTC)
BLOCK = 20_000
"""Samples written per generation block: bounds memory for long drives."""

DDL_FILE = Path(__file__).with_name("test_vehicle.description")
"""The DDL of the test vehicle's structs, an XML file as ADTF tools keep DDL."""
DDL_STRUCTS = {
    m["name"]: m[0]
    for m in re.finditer(r'<struct name="(?P<name>[^"]+)".*?</struct>', DDL_FILE.read_text(), re.S)
}
"""Struct name -> its `<struct>` element, as written into the stream types."""

CAN_DTYPE = np.dtype(
    {
        "names": ["tag", "channel", "stamp", "id", "length", "flags", "data"],
        "formats": ["u1", "u1", "<i8", "<u4", "u1", "<u2", ("u1", 8)],
        "offsets": [0, 1, 2, 10, 14, 16, 24],
        "itemsize": 32,
    }
)
IMU_DTYPE = np.dtype([("stamp", "<i8"), ("acc", "<f4", 3), ("gyro", "<f4", 3), ("temp", "<f4")])
GNSS_DTYPE = np.dtype(
    [
        ("stamp", "<i8"),
        ("lat", "<f8"),
        ("lon", "<f8"),
        ("alt", "<f8"),
        ("speed", "<f4"),
        ("heading", "<f4"),
        ("fix", "u1"),
        ("sats", "u1"),
        ("reserved", "<u2"),
    ]
)
LIDAR_HEAD = np.dtype([("stamp", "<i8"), ("frame", "<u4"), ("count", "<u4")])
LIDAR_POINT = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("intensity", "<f4"),
        ("ring", "<u2"),
        ("time_offset_ns", "<u4"),
    ]
)
"""tLidarPoint: packed 22 bytes, ring and per-point time as rotating-lidar drivers give them."""
GNSS_ORIGIN = (48.7758, 11.4320, 371.2)
"""Latitude, longitude [deg] and altitude [m] of the track's ENU origin (a proving ground)."""
RIG = SHIPPED_RIGS / "test-vehicle-01.yaml"
"""The rig the recordings are generated from (and calibrated with)."""
LIDAR_SCAN_NS = 100_000_000
POWERTRAIN_IDS = (0x0C1, 0x0D0, 0x1A0, 0x1F5, 0x2B0)
CHASSIS_IDS = (0x086, 0x0A3, 0x130, 0x17C, 0x3E9)
"""One revolution of the rotating lidar: 10 Hz."""
CORRIDOR_HALF_WIDTH = 12.0
"""The lidar sees the ground (z = 0 in base_link) and two walls at y = ±12 m of base_link."""

PLANT_MIN_MINUTES = 1.5
"""Drives at least this long get the planted events; the events and their lead-in and
recovery need about 60 s, and shorter drives keep every stream at its nominal rate."""
EVENT_AT = {
    "hard_brake": 0.15,
    "sharp_turn": 0.30,
    "gnss_degraded": 0.55,
    "lidar_dropout": 0.75,
    "camera_black": 0.88,
}
"""Nominal start of each planted event as a fraction of the drive (±1 % from the seed)."""
BRAKE_DECEL = 6.0
"""Planted hard brake [m/s²] (0.6 g), down to BRAKE_LOW, held, then back at REACCEL."""
BRAKE_LOW, BRAKE_HOLD_S, REACCEL = 5.0, 1.5, 2.0
LOOP_RADIUS, LOOP_SPEED, LOOP_DECEL = 15.0, 8.0, 1.5
"""Planted sharp turn: a full left loop of 15 m radius at 8 m/s (0.53 rad/s, 4.3 m/s²), slowed
into and out of at 1.5 m/s²; the oval's curves give at most 18 m/s / 60 m = 0.3 rad/s."""
GNSS_DEGRADED_S, GNSS_OUTAGE_S = 2.0, 8.0
"""Planted GNSS outage: 2 s of 2D fixes with few satellites, then 8 s without fixes."""
DEGRADED_FIX = 2
LIDAR_DROPOUT_S = 3.0
BLACK_S = 2.0


@dataclass(frozen=True)
class PlantedEvent:
    """An event written into a synthetic drive on purpose: `kind` is the scene tag that must
    find it, the window is in recorder-clock ns (capture times; the lake's master times add
    the transport latency, at most 20 ms)."""

    kind: str
    start_ns: int
    end_ns: int


def _event_starts(minutes: float, seed: int) -> dict[str, float]:
    """Start [s] of each planted event, or none for short drives. A generator of its own
    (from the seed) so the planting leaves every other random draw as it was."""
    if minutes < PLANT_MIN_MINUTES:
        return {}
    jitter = np.random.default_rng([seed, 0x5CE7E5]).uniform(-0.01, 0.01, len(EVENT_AT))
    seconds = minutes * 60.0
    return {k: (f + j) * seconds for (k, f), j in zip(EVENT_AT.items(), jitter, strict=True)}


def _start_ns(seed: int) -> tuple[dt.datetime, int]:
    start_dt = START + dt.timedelta(minutes=7 * (seed % 1000))
    return start_dt, int(start_dt.timestamp()) * 1_000_000_000


def _ddl_type(struct_name: str, *deps: str, meta_type: str = "adtf/default") -> StreamType:
    defs = "<structs>" + "".join(DDL_STRUCTS[n] for n in (*deps, struct_name)) + "</structs>"
    return StreamType(
        meta_type,
        {
            "md_struct": Property("cString", struct_name),
            "md_definitions": Property("cString", defs),
            "md_data_serialized": Property("tBool", "false"),
        },
    )


@dataclass(frozen=True)
class Track:
    """The vehicle on a 400 m x 120 m oval, sampled at 1 kHz; other rates interpolate it."""

    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    heading: np.ndarray
    speed: np.ndarray
    yaw_rate: np.ndarray
    accel: np.ndarray
    events: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Planted motion events: kind → (start, end) [s] as driven."""

    @classmethod
    def build(
        cls, seconds: float, rng: np.random.Generator, starts: dict[str, float] | None = None
    ) -> Track:
        """The oval at a speed swinging between 10 and 18 m/s; `starts` plants a hard brake
        and a sharp turn (a full loop off the oval) at the given times [s]."""
        starts = starts or {}
        t = np.arange(int(seconds * 1000) + 1) / 1000.0
        target = 14.0 + 4.0 * np.sin(2 * np.pi * t / 47.0 + rng.uniform(0, 6.3))
        speed = np.clip(np.minimum(target, 2.5 * t), 0.0, None)
        events: dict[str, tuple[float, float]] = {}
        if "hard_brake" in starts:
            tb = starts["hard_brake"]
            v0 = float(speed[int(tb * 1000)])
            t_low = tb + (v0 - BRAKE_LOW) / BRAKE_DECEL
            t_go = t_low + BRAKE_HOLD_S
            cap = np.where(t < tb, np.inf, np.maximum(v0 - BRAKE_DECEL * (t - tb), BRAKE_LOW))
            speed = np.minimum(speed, np.where(t > t_go, BRAKE_LOW + REACCEL * (t - t_go), cap))
            events["hard_brake"] = (float(tb), float(t_low))
        loop_len = 2 * np.pi * LOOP_RADIUS
        if "sharp_turn" in starts:
            tl = starts["sharp_turn"]
            t_out = tl + loop_len / LOOP_SPEED
            ramp = np.maximum.reduce([tl - t, t - t_out, np.zeros_like(t)])
            speed = np.minimum(speed, LOOP_SPEED + LOOP_DECEL * ramp)
        s = np.cumsum(speed) / 1000.0
        path = s
        if "sharp_turn" in starts:
            s_in = s[int(starts["sharp_turn"] * 1000)]
            path = s - np.clip(s - s_in, 0.0, loop_len)  # the oval waits while the loop is driven
        x, y, heading = _oval(path)
        if "sharp_turn" in starts:
            inside = (s > s_in) & (s < s_in + loop_len)
            px, py, h = (float(v[0]) for v in _oval(np.array([s_in])))
            phi = (s[inside] - s_in) / LOOP_RADIUS
            cx, cy = px - LOOP_RADIUS * np.sin(h), py + LOOP_RADIUS * np.cos(h)
            x[inside] = cx + LOOP_RADIUS * np.sin(h + phi)
            y[inside] = cy - LOOP_RADIUS * np.cos(h + phi)
            heading[inside] = h + phi
            k = np.flatnonzero(inside)
            events["sharp_turn"] = (float(t[k[0]]), float(t[k[-1]]))
        yaw_rate = np.gradient(np.unwrap(heading), t)
        accel = np.gradient(speed, t)
        return cls(t, x, y, heading % (2 * np.pi), speed, yaw_rate, accel, events)

    def at(self, seconds: np.ndarray, field: str) -> np.ndarray:
        values = getattr(self, field)
        idx = np.clip(np.rint(seconds * 1000).astype(np.int64), 0, len(values) - 1)
        return values[idx]


def _oval(u_total: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Position and heading after `u_total` metres on the oval (280 m straights, 60 m
    curves), starting at the origin heading east."""
    straight, radius = 280.0, 60.0
    lap = 2 * straight + 2 * np.pi * radius
    u = u_total % lap
    x, y, heading = np.empty_like(u), np.empty_like(u), np.empty_like(u)
    seg = [u < straight, u < straight + np.pi * radius, u < 2 * straight + np.pi * radius]
    a = seg[0]
    x[a], y[a], heading[a] = u[a], 0.0, 0.0
    b = ~seg[0] & seg[1]
    phi = (u[b] - straight) / radius
    x[b], y[b], heading[b] = straight + radius * np.sin(phi), radius * (1 - np.cos(phi)), phi
    c = ~seg[1] & seg[2]
    x[c], y[c], heading[c] = straight - (u[c] - straight - np.pi * radius), 2 * radius, np.pi
    d = ~seg[2]
    phi = (u[d] - 2 * straight - np.pi * radius) / radius
    x[d], y[d] = -radius * np.sin(phi), radius * (1 + np.cos(phi))
    heading[d] = np.pi + phi
    return x, y, heading


@dataclass
class Source:
    """One stream: capture times (recorder clock, ns), chunk times, and a payload maker."""

    name: str
    stream_type: StreamType
    capture_ns: np.ndarray
    chunk_ns: np.ndarray
    payloads: Callable[[int, int], Sequence[bytes | memoryview]]
    keys: np.ndarray | None = None


class DeviceClock:
    """A sensor clock: offset and rate error against the recorder clock, µs or ns ticks."""

    def __init__(self, rng: np.random.Generator, unit_ns: int) -> None:
        self.ppm = rng.uniform(-60, 60)
        self.offset_ns = int(rng.integers(-5_000_000_000, 5_000_000_000))
        self.unit_ns = unit_ns

    def __call__(self, recorder_ns: np.ndarray, start_ns: int) -> np.ndarray:
        """Device ticks for recorder times; integer ns arithmetic keeps epoch precision."""
        elapsed = recorder_ns - start_ns
        drift = (elapsed.astype(np.float64) * (self.ppm * 1e-6)).astype(np.int64)
        return (start_ns + self.offset_ns + elapsed + drift) // self.unit_ns


def _chunk_times(capture: np.ndarray, rng: np.random.Generator, latency_us: tuple[int, int]):
    latency = rng.integers(latency_us[0] * 1000, latency_us[1] * 1000, len(capture))
    return np.maximum.accumulate(capture + latency)


def _rows(array: np.ndarray) -> list[memoryview]:
    raw = memoryview(array.tobytes())
    size = array.dtype.itemsize
    return [raw[i * size : (i + 1) * size] for i in range(len(array))]


def _can_source(
    name: str,
    channel: int,
    ids: Sequence[int],
    track: Track,
    start: int,
    rng,
    seconds: float,
    hz: int,
) -> Source:
    period = 1_000_000_000 // hz
    per_id = int(seconds * 1e9 // period)
    phases = rng.integers(0, period, len(ids))
    capture = (np.arange(per_id)[:, None] * period + phases[None, :]).reshape(-1)
    which = np.tile(np.arange(len(ids)), per_id)
    order = np.argsort(capture, kind="stable")
    capture, which = capture[order] + start, which[order]
    clock = DeviceClock(rng, 1000)
    noise = rng.normal(0, 1, len(capture))
    id_arr = np.asarray(ids, dtype=np.uint32)

    def payloads(lo: int, hi: int) -> list[memoryview]:
        sec = (capture[lo:hi] - start) / 1e9
        rec = np.zeros(hi - lo, dtype=CAN_DTYPE)
        rec["channel"] = channel
        rec["stamp"] = clock(capture[lo:hi], start)
        rec["id"] = id_arr[which[lo:hi]]
        rec["length"] = 8
        speed = track.at(sec, "speed")
        signals = np.stack(
            [
                speed * 100 + noise[lo:hi] * 2,  # wheel speed, 0.01 m/s
                track.at(sec, "yaw_rate") * 1e4 + 32768,  # yaw, 1e-4 rad/s + offset
                track.at(sec, "accel") * 1000 + 32768,  # long. accel, mm/s^2
                800 + speed * 150 + noise[lo:hi] * 5,  # engine rpm
            ],
            axis=1,
        )
        words = np.clip(signals, 0, 65535).astype("<u2")
        rotate = (which[lo:hi] % 4)[:, None]
        words = np.take_along_axis(words, (np.arange(4)[None, :] + rotate) % 4, axis=1)
        rec["data"] = words.view(np.uint8).reshape(-1, 8)
        return _rows(rec)

    return Source(
        name,
        _ddl_type("tCANData", meta_type="adtf/devicetb/can"),
        capture,
        _chunk_times(capture, rng, (50, 400)),
        payloads,
    )


def _imu_source(track: Track, start: int, rng, seconds: float) -> Source:
    capture = start + np.arange(int(seconds * 100)) * 10_000_000
    clock = DeviceClock(rng, 1)
    noise = rng.normal(0, 1, (len(capture), 7)).astype(np.float32)

    def payloads(lo: int, hi: int) -> list[memoryview]:
        sec = (capture[lo:hi] - start) / 1e9
        rec = np.zeros(hi - lo, dtype=IMU_DTYPE)
        rec["stamp"] = clock(capture[lo:hi], start)
        lateral = track.at(sec, "speed") * track.at(sec, "yaw_rate")
        rec["acc"] = np.stack([track.at(sec, "accel"), lateral, np.full(len(sec), 9.81)], 1)
        rec["acc"] += noise[lo:hi, :3] * 0.05
        rec["gyro"] = np.stack(
            [np.zeros(len(sec)), np.zeros(len(sec)), track.at(sec, "yaw_rate")], 1
        )
        rec["gyro"] += noise[lo:hi, 3:6] * 0.002
        rec["temp"] = 31.5 + sec / 600 + noise[lo:hi, 6] * 0.05
        return _rows(rec)

    return Source(
        "imu", _ddl_type("tImuData"), capture, _chunk_times(capture, rng, (200, 900)), payloads
    )


def _gnss_source(
    track: Track, start: int, rng, seconds: float, outage_s: float | None = None
) -> Source:
    """Fixes of the roof antenna (the rig's `gnss` frame): lat/lon/alt from the track's ENU
    position plus the lever arm, course over ground clockwise from north. `outage_s` plants
    2D fixes with few satellites for GNSS_DEGRADED_S, then no fixes for GNSS_OUTAGE_S."""
    capture = start + np.arange(int(seconds * 10)) * 100_000_000
    clock = DeviceClock(rng, 1)
    lever = load_rig(RIG).to_base("gnss").translation
    noise = rng.normal(0, 1, (len(capture), 3))
    chunk = _chunk_times(capture, rng, (2000, 9000))
    degraded = np.zeros(len(capture), dtype=bool)
    if outage_s is not None:  # drawn for every fix first: the other draws stay as they were
        sec = (capture - start) / 1e9
        keep = (sec < outage_s) | (sec >= outage_s + GNSS_OUTAGE_S)
        degraded = (sec >= outage_s - GNSS_DEGRADED_S) & (sec < outage_s)
        capture, chunk, noise, degraded = capture[keep], chunk[keep], noise[keep], degraded[keep]

    def payloads(lo: int, hi: int) -> list[memoryview]:
        sec = (capture[lo:hi] - start) / 1e9
        rec = np.zeros(hi - lo, dtype=GNSS_DTYPE)
        rec["stamp"] = clock(capture[lo:hi], start)
        yaw = track.at(sec, "heading")
        c, s = np.cos(yaw), np.sin(yaw)
        enu = np.stack(
            [
                track.at(sec, "x") + c * lever[0] - s * lever[1] + noise[lo:hi, 0] * 0.02,
                track.at(sec, "y") + s * lever[0] + c * lever[1] + noise[lo:hi, 1] * 0.02,
                lever[2] + noise[lo:hi, 2] * 0.05,
            ],
            axis=-1,
        )
        rec["lat"], rec["lon"], rec["alt"] = enu_to_geodetic(enu, *GNSS_ORIGIN)
        rec["speed"] = track.at(sec, "speed")
        rec["heading"] = np.mod(90.0 - np.degrees(yaw), 360.0)
        rec["fix"] = np.where(degraded[lo:hi], DEGRADED_FIX, 4)
        rec["sats"] = np.where(degraded[lo:hi], 4, 14 + (np.arange(lo, hi) // 600) % 5)
        return _rows(rec)

    return Source("gnss", _ddl_type("tGnssFix"), capture, chunk, payloads)


def _lidar_source(
    track: Track, start: int, rng, seconds: float, points: int, dropout_s: float | None = None
) -> Source:
    """A 16-beam rotating lidar on the roof (the rig's `lidar_top`): rays cast in base_link
    against the ground and the corridor walls, written in the sensor frame with ring and
    per-point time, so the calibrated layer must put them back on z = 0 and y = ±12 m.
    `dropout_s` plants LIDAR_DROPOUT_S without scans (the frame counter jumps over them)."""
    capture = start + np.arange(int(seconds * 10)) * LIDAR_SCAN_NS
    clock = DeviceClock(rng, 1)
    chunk = _chunk_times(capture, rng, (5000, 15000))
    frame_no = np.arange(len(capture))
    if dropout_s is not None:
        sec = (capture - start) / 1e9
        keep = (sec < dropout_s) | (sec >= dropout_s + LIDAR_DROPOUT_S)
        capture, chunk, frame_no = capture[keep], chunk[keep], frame_no[keep]
    mount = load_rig(RIG).to_base("lidar_top")
    beams = np.radians(np.linspace(-15.0, 15.0, 16))
    steps = points // 16
    az = np.linspace(0, 2 * np.pi, steps, endpoint=False)
    elev = np.tile(beams, steps)  # firing order: all beams of one azimuth, then the next
    ring = np.tile(np.arange(16, dtype=np.uint16), steps)
    offset = (np.repeat(np.arange(steps), 16) * LIDAR_SCAN_NS // steps).astype(np.uint32)

    def payloads(lo: int, hi: int) -> list[bytes]:
        out = []
        frame_rng = np.random.default_rng([int(capture[lo]) & 0xFFFFFFFF, int(frame_no[lo])])
        stamps = clock(capture[lo:hi], start)
        for k in range(hi - lo):
            azim = np.repeat(az, 16) + int(frame_no[lo + k]) * 0.01
            local = np.stack(
                [np.cos(elev) * np.cos(azim), np.cos(elev) * np.sin(azim), np.sin(elev)], -1
            )
            d = mount.rotation.apply(local)
            o = mount.translation
            with np.errstate(divide="ignore", invalid="ignore"):
                ground = np.where(d[:, 2] < -1e-6, -o[2] / d[:, 2], np.inf)
                wall = np.where(
                    np.abs(d[:, 1]) > 1e-6,
                    (np.sign(d[:, 1]) * CORRIDOR_HALF_WIDTH - o[1]) / d[:, 1],
                    np.inf,
                )
            rng_m = np.minimum(np.minimum(ground, wall), 80.0)
            rng_m = rng_m + frame_rng.normal(0, 0.02, rng_m.shape)
            pts = np.empty(len(rng_m), dtype=LIDAR_POINT)
            for i, axis in enumerate("xyz"):
                pts[axis] = rng_m * local[:, i]
            pts["intensity"] = np.clip(80.0 / (1 + rng_m), 0, 255)
            pts["ring"] = ring
            pts["time_offset_ns"] = offset
            head = np.zeros(1, dtype=LIDAR_HEAD)
            head["stamp"], head["frame"], head["count"] = stamps[k], frame_no[lo + k], len(pts)
            out.append(head.tobytes() + pts.tobytes())
        return out

    return Source("lidar_top", _ddl_type("tLidarScan", "tLidarPoint"), capture, chunk, payloads)


def _camera_source(
    track: Track, start: int, rng, seconds: float, fps: int, black_s: float | None = None
) -> Source:
    """A 320x240 road scene as H.264; `black_s` plants BLACK_S of black frames (a covered or
    failed imager: the stream goes on, the pictures are black)."""
    width, height = 320, 240
    count = int(seconds * fps)
    capture = start + (np.arange(count) * 1_000_000_000) // fps
    gop = 2 * fps
    encoder = H264Encoder(width, height, fps, gop, bit_rate=400_000)
    rows = np.arange(height)[:, None]
    cols = np.arange(width)[None, :]
    horizon = height // 2
    texture = rng.integers(0, 20, (height, width), dtype=np.uint8)
    keys = np.arange(count) % gop == 0

    def payloads(lo: int, hi: int) -> list[bytes]:
        out = []
        for i in range(lo, hi):
            sec = (capture[i] - start) / 1e9
            shift = int(track.at(np.array([sec]), "x")[0] * 8)
            img = np.empty((height, width, 3), dtype=np.uint8)
            img[:horizon] = (150, 180, 220)
            road = rows >= horizon
            lane = road & (np.abs(cols - width // 2) < 2 + (rows - horizon) // 12)
            dash = ((rows * 4 + shift) // 40) % 2 == 0
            img[road[:, 0]] = 70
            img[lane & dash] = 235
            img[:, :, 1] += texture
            if black_s is not None and black_s <= sec < black_s + BLACK_S:
                img[:] = 0
            out.append(encoder.encode(img, i))
        return out

    stype = StreamType(
        "adtf/video_compressed",
        {
            "codec": Property("cString", "h264"),
            "format": Property("cString", "annexb"),
            "width": Property("tUInt32", str(width)),
            "height": Property("tUInt32", str(height)),
            "fps": Property("tUInt32", str(fps)),
        },
    )
    return Source(
        "front_camera", stype, capture, _chunk_times(capture, rng, (8000, 20000)), payloads, keys
    )


def truth_track(minutes: float, seed: int) -> Track:
    """The trajectory `write_adtf_drive(minutes=minutes, seed=seed)` drove: base_link in the
    ENU frame at GNSS_ORIGIN (x east, y north, heading counter-clockwise from east), for tests
    that compare estimates with the truth."""
    return Track.build(
        minutes * 60.0 + 1.0, np.random.default_rng(seed), _event_starts(minutes, seed)
    )


def planted_events(minutes: float, seed: int) -> list[PlantedEvent]:
    """The events `write_adtf_drive(minutes=minutes, seed=seed)` planted, in time order (none
    below PLANT_MIN_MINUTES): the truth the scene rule tests compare with. The hard brake's
    window is its deceleration, the sharp turn's the loop, the GNSS window spans the degraded
    fixes and the outage."""
    starts = _event_starts(minutes, seed)
    if not starts:
        return []
    _, start = _start_ns(seed)
    windows = dict(truth_track(minutes, seed).events)
    g = starts["gnss_degraded"]
    windows["gnss_degraded"] = (g - GNSS_DEGRADED_S, g + GNSS_OUTAGE_S)
    windows["lidar_dropout"] = (starts["lidar_dropout"], starts["lidar_dropout"] + LIDAR_DROPOUT_S)
    windows["camera_black"] = (starts["camera_black"], starts["camera_black"] + BLACK_S)
    events = [
        PlantedEvent(kind, start + round(a * 1e9), start + round(b * 1e9))
        for kind, (a, b) in windows.items()
    ]
    return sorted(events, key=lambda e: e.start_ns)


def write_adtf_drive(
    out_dir: Path,
    *,
    minutes: float,
    seed: int,
    lidar_points: int = 2000,
    fps: int = 15,
    can_hz: int = 100,
) -> list[Path]:
    """Write one synthetic drive as `recording_<start>.dat` (IFHD 0x0500) into out_dir.
    `can_hz`: frames a second per CAN id (5 ids per bus, 2 buses)."""
    if minutes <= 0:
        raise ValueError("minutes must be > 0")
    if not 0 < can_hz <= 1000 or not 0 < fps <= 120:
        raise ValueError("can_hz must be in 1..1000 and fps in 1..120")
    rng = np.random.default_rng(seed)
    seconds = minutes * 60.0
    start_dt, start = _start_ns(seed)
    at = _event_starts(minutes, seed)
    track = Track.build(seconds + 1.0, rng, at)
    sources = [
        _camera_source(track, start, rng, seconds, fps, at.get("camera_black")),
        _can_source("can_powertrain", 0, POWERTRAIN_IDS, track, start, rng, seconds, can_hz),
        _can_source("can_chassis", 1, CHASSIS_IDS, track, start, rng, seconds, can_hz),
        _lidar_source(track, start, rng, seconds, lidar_points, at.get("lidar_dropout")),
        _gnss_source(track, start, rng, seconds, at.get("gnss_degraded")),
        _imu_source(track, start, rng, seconds),
    ]
    path = Path(out_dir) / f"recording_{start_dt:%Y%m%d_%H%M%S}.dat"
    _write(path, sources, start_dt)
    return [path]


def _write(path: Path, sources: list[Source], start_dt: dt.datetime) -> None:
    chunk = np.concatenate([s.chunk_ns for s in sources])
    stream = np.concatenate(
        [np.full(len(s.chunk_ns), i, dtype=np.int64) for i, s in enumerate(sources)]
    )
    index = np.concatenate([np.arange(len(s.chunk_ns)) for s in sources])
    order = np.lexsort((index, stream, chunk))
    with DatWriter(
        path,
        version=0x0500,
        description=f"synthetic drive\nbridge_lake synth, proving ground oval, {start_dt:%Y-%m-%d}",
        file_time=int(start_dt.timestamp()),
        adtf_version="adtf 3.16.2 (bridge_lake synth)",
    ) as w:
        ids = [w.add_stream(s.name, stream_type=s.stream_type) for s in sources]
        done = [0] * len(sources)
        for a in range(0, len(order), BLOCK):
            block = order[a : a + BLOCK]
            block_streams = stream[block]
            made: dict[int, Sequence[bytes | memoryview]] = {}
            for i in np.unique(block_streams).tolist():
                n = int(np.count_nonzero(block_streams == i))
                made[i] = sources[i].payloads(done[i], done[i] + n)
            cursor = dict.fromkeys(made, 0)
            for i, k in zip(block_streams.tolist(), index[block].tolist(), strict=True):
                src = sources[i]
                w.write_sample(
                    ids[i],
                    int(src.chunk_ns[k]),
                    made[i][cursor[i]],
                    sample_time_ns=int(src.capture_ns[k]),
                    key=bool(src.keys[k]) if src.keys is not None else False,
                )
                cursor[i] += 1
            for i, n in cursor.items():
                done[i] += n
