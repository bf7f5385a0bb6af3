"""The per-drive report renders in a real browser (headless Chromium)."""

import subprocess
from fractions import Fraction

import av
import numpy as np
import pyarrow as pa

from bridge_lake.geometry.rotations import Transform
from bridge_lake.lake import Lake
from bridge_lake.lake.schemas import NORMALIZED
from bridge_lake.normalize.previews import MAX_THUMB_BYTES, camera_preview, lidar_preview
from bridge_lake.normalize.report import render_report, segments
from bridge_lake.normalize.sink import DriveSink, StreamInfo, conform
from bridge_lake_tests.browser import CHROMIUM_FLAGS, chromium, loaded_page

T0 = 1_700_000_000_000_000_000


def _streams(tmp_path):
    lake = Lake(str(tmp_path / "lake"))
    with DriveSink(lake, "d1") as sink:
        sink.declare(StreamInfo("imu<0>", "imu", "imu.csv", "t", None, 100.0))
        sink.declare(StreamInfo("gps", "gnss", "gps.csv", "t", None, 5.0))
        t = T0 + np.arange(1000, dtype=np.int64) * 10_000_000
        t[500:] += 3 * 10**9  # a 3 s hole
        sink.read("imu<0>", "imu", 1000)
        sink.write(
            "imu<0>",
            "imu",
            pa.table({"time_ns": t, "sensor_time_ns": t - 7, "frame_id": ["imu"] * 1000}),
        )
        g = T0 + np.arange(60, dtype=np.int64) * 200_000_000
        ang = np.linspace(0, 2 * np.pi, 60)
        sink.read("gps", "gnss", 60)
        sink.write(
            "gps",
            "gnss",
            pa.table(
                {
                    "time_ns": g,
                    "frame_id": ["gps"] * 60,
                    "lat_deg": 42.29 + 0.001 * np.sin(ang),
                    "lon_deg": -83.71 + 0.001 * np.cos(ang),
                }
            ),
        )
        result = sink.finish()
    gnss = lake.read_partition("normalized", "gnss", "d1")
    return result, gnss


def test_segments_split_at_gaps():
    t = np.array([0, 1, 2, 10, 11], dtype=np.int64)
    assert segments(t, 3) == [(0, 2), (10, 11)]
    assert segments(t, None) == [(0, 11)]
    assert segments(np.array([], dtype=np.int64), 3) == []


def test_report_renders_in_headless_chromium(tmp_path):
    result, gnss = _streams(tmp_path)
    from bridge_lake.findings import Finding

    html = render_report(
        "d1",
        result.streams,
        lat_deg=gnss.column("lat_deg").to_numpy(),
        lon_deg=gnss.column("lon_deg").to_numpy(),
        findings=[Finding("imu", "gaps", False, False, {"streams_with_gaps": {"imu<0>": 1}})],
        meta={"vehicle": "car-7", "route": "ring road", "weather": "rain", "tags": ["a", "b"]},
        files=[{"path": "gps.csv", "size_bytes": 1234, "format": "nclt", "problem": None}],
        quarantine_reasons={"short row": 3, "bad magic": 1},
    )
    assert "imu&lt;0&gt;" in html and "<0>" not in html  # names are escaped
    assert "car-7" in html and "ring road" in html and "a, b" in html
    assert "2023-11-14 22:13:20.000Z" in html  # start (UTC) of T0
    assert 'short row</td><td class="num">3' in html and "1,234" in html
    assert "gaps (warning): " in html and "streams_with_gaps" in html  # why it failed
    page = tmp_path / "report.html"
    page.write_text(html, encoding="utf-8")
    base = [chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run(
        [*base, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    for element in (
        'id="timeline"',
        'id="rates"',
        'id="gnss-track"',
        'id="drift"',
        'id="streams"',
        'id="facts"',
        'id="quarantine"',
        'id="files"',
        'id="gnss-scale"',
        "<polyline",
    ):
        assert element in dom, element
    timeline = dom[dom.index('id="timeline"') : dom.index("</svg>", dom.index('id="timeline"'))]
    assert timeline.count("<rect") == 3  # imu split at its 3 s hole + one gnss segment
    # + two rate bars + one drift bar (imu has device time) + the GNSS track's frame
    assert dom.count("<rect") == 7
    shot = tmp_path / "shot.png"
    subprocess.run(
        [*base, f"--screenshot={shot}", "--window-size=1000,1600", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    with av.open(str(shot)) as container:
        frame = next(container.decode(video=0)).to_ndarray(format="rgb24")
    assert frame.shape[:2] == (1600, 1000)
    blue = np.all(frame == (0x4E, 0x79, 0xA7), axis=-1)  # the bars' colour was painted
    assert blue.sum() > 1000


RED, BLUE, GREEN, TEAL = (200, 40, 40), (30, 60, 220), (40, 200, 60), (30, 160, 160)


def _h264(n: int, rgb: tuple[int, int, int]) -> list[tuple[bytes, bool]]:
    """n access units of a solid picture (libx264, a key frame every 5, headers repeated)."""
    ctx = av.CodecContext.create("libx264", "w")
    ctx.width, ctx.height, ctx.pix_fmt = 160, 120, "yuv420p"
    ctx.time_base, ctx.framerate = Fraction(1, 10), 10
    ctx.options = {
        "preset": "ultrafast",
        "tune": "zerolatency",
        "x264-params": "keyint=5:repeat-headers=1",
    }
    img = np.empty((120, 160, 3), np.uint8)
    img[:] = rgb
    out = []
    for i in range(n):
        frame = av.VideoFrame.from_ndarray(img, format="rgb24")
        frame.pts = i
        packets = ctx.encode(frame)
        out.append((b"".join(bytes(p) for p in packets), any(p.is_keyframe for p in packets)))
    return out


def _tiff_on_its_side() -> bytes:
    """120 x 80 stored, left half blue, right half green: upright (90 deg clockwise) the top
    is blue and the bottom green."""
    img = np.empty((80, 120, 3), np.uint8)
    img[:, :60], img[:, 60:] = BLUE, GREEN
    ctx = av.CodecContext.create("tiff", "w")
    ctx.width, ctx.height, ctx.pix_fmt, ctx.time_base = 120, 80, "rgb24", Fraction(1, 1)
    frame = av.VideoFrame.from_ndarray(img, format="rgb24")
    return b"".join(bytes(p) for p in [*ctx.encode(frame), *ctx.encode(None)])


def _scan_points() -> dict[str, np.ndarray]:
    """Sensor frame, z pointing down (as NCLT's Velodyne): a tall wall 10 m ahead (x = 10,
    z up to 3 m above the sensor), a low wall 10 m to the left (y = +10, x 0..10) and a
    ground ring of 5 m 1.5 m below the sensor."""
    t = np.linspace(-10, 10, 81)
    u = np.linspace(0, 10, 41)
    a = np.linspace(0, 2 * np.pi, 200, endpoint=False)
    x = np.concatenate([np.full(81, 10.0), u, 5 * np.cos(a)])
    y = np.concatenate([t, np.full(41, 10.0), 5 * np.sin(a)])
    z = np.concatenate([np.full(81, -3.0), np.full(41, 0.5), np.full(200, 1.5)])
    return {"x": x, "y": y, "z": z}


def _pictures_drive(lake: Lake) -> None:
    """A drive with three cameras (H.264, a TIFF lying on its side, raw rgb8) and four lidar
    scans: full ones at 0 s, 1.2 s (the L-shaped walls) and 3 s, a sparse one at 1.5 s."""
    with DriveSink(lake, "pics") as sink:
        for stream, encoding in (("front", "h264"), ("side", "tiff"), ("rear", "rgb8")):
            sink.declare(StreamInfo(stream, "camera_frames", f"{stream}.dat", encoding))
        sink.declare(StreamInfo("velo", "lidar_scans", "velo.dat", "scans"))
        sink.declare(StreamInfo("velo", "lidar_points", "velo.dat", "points"))
        units = _h264(20, RED)
        tiff = _tiff_on_its_side()
        raw = np.empty((60, 100, 3), np.uint8)
        raw[:] = TEAL
        t = T0 + np.arange(20, dtype=np.int64) * 100_000_000
        frames = {
            "front": ([u for u, _ in units], [k for _, k in units], "h264", 160, 120, 0),
            "side": ([tiff] * 20, [None] * 20, "tiff", 120, 80, 90),
            "rear": ([raw.tobytes()] * 20, [None] * 20, "rgb8", 100, 60, 0),
        }
        for stream, (data, key, encoding, w, h, rot) in frames.items():
            sink.read(stream, "camera_frames", 20)
            sink.write(
                stream,
                "camera_frames",
                pa.table({
                    "time_ns": t, "frame_id": [stream] * 20, "camera": [stream] * 20,
                    "width": [w] * 20, "height": [h] * 20, "encoding": [encoding] * 20,
                    "is_keyframe": key, "rotate_cw_deg": [rot] * 20, "data": data,
                }),
            )  # fmt: skip
        walls = _scan_points()
        ring = {
            "x": 20 * np.cos(np.arange(400)),
            "y": 20 * np.sin(np.arange(400)),
            "z": np.zeros(400),
        }
        sparse = {c: np.zeros(10) for c in "xyz"}
        scans = [(0.0, ring), (1.2, walls), (1.5, sparse), (3.0, ring)]
        ids = sink.scan_ids(len(scans))
        n = [len(p["x"]) for _, p in scans]
        sink.read("velo", "lidar_scans", len(scans))
        sink.write(
            "velo",
            "lidar_scans",
            pa.table({
                "time_ns": [T0 + int(s * 1e9) for s, _ in scans], "frame_id": ["velo"] * 4,
                "scan_id": ids, "end_time_ns": [T0 + int(s * 1e9) + 1000 for s, _ in scans],
                "point_count": n,
            }),
        )  # fmt: skip
        sink.read("velo", "lidar_points", sum(n))
        sink.write(
            "velo",
            "lidar_points",
            pa.table({
                "scan_id": np.repeat(ids, n),
                **{c: np.concatenate([p[c] for _, p in scans]).astype(np.float32) for c in "xyz"},
            }),
        )  # fmt: skip
        sink.finish()


PICTURES_JS = """(async () => {
  const out = {};
  for (const img of document.images) {
    await img.decode().catch(() => null);
    const c = document.createElement("canvas");
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    const g = c.getContext("2d");
    let rgba = [];
    if (c.width) {
      g.drawImage(img, 0, 0);
      rgba = Array.from(g.getImageData(0, 0, c.width, c.height).data);
    }
    const key = img.id || img.alt;
    out[key] = {w: img.naturalWidth, h: img.naturalHeight, cls: img.className, rgba: rgba};
  }
  return out;
})()"""


def _pixels(info: dict) -> np.ndarray:
    return np.array(info["rgba"], np.uint8).reshape(info["h"], info["w"], 4)[:, :, :3]


def _near(colour: np.ndarray, expected: tuple[int, int, int], tol: float = 20) -> bool:
    return bool(np.abs(colour.astype(float) - expected).max() <= tol)


def test_report_pictures_render_in_chromium(tmp_path):
    """Issue 15: camera thumbnails decode in the browser (H.264 from a key frame, a TIFF
    turned upright, raw pixels) with the recorded colours; one full lidar scan drawn from
    above in base_link (the rig turns a z-down sensor over) with height colours; signed drift
    bars and a GNSS scale bar; no console errors."""
    lake = Lake(str(tmp_path / "lake"))
    _pictures_drive(lake)
    cameras = camera_preview(lake, "pics")
    assert cameras.cameras == ["front", "rear", "side"]
    assert [t.problem for t in cameras.thumbnails] == [None] * 12
    assert all(len(t.jpeg) <= MAX_THUMB_BYTES for t in cameras.thumbnails)
    flip = Transform.from_rpy([0.0, 0.0, 0.0], [180.0, 0.0, 0.0], degrees=True)
    lidar = lidar_preview(lake, "pics", lambda frame: flip if frame == "velo" else None)
    assert lidar is not None and lidar.scan_id == 1 and lidar.points == 322  # not the sparse
    result, gnss = _streams(tmp_path)
    html = render_report(
        "pics",
        result.streams,
        lat_deg=gnss.column("lat_deg").to_numpy(),
        lon_deg=gnss.column("lon_deg").to_numpy(),
        cameras=cameras,
        lidar=lidar,
    )
    assert len(html) < 200_000
    page_file = tmp_path / "pics.html"
    page_file.write_text(html, encoding="utf-8")
    with loaded_page(page_file.as_uri(), tmp_path / "profile") as page:
        images = page.evaluate(PICTURES_JS)
        drift = page.evaluate(
            "[...document.querySelectorAll('#drift rect')].map(r => [r.getBBox().x,"
            " r.getBBox().width, +r.dataset.value])"
        )
        zero = page.evaluate("document.querySelector('#drift line.zero').getBBox().x")
        scale = page.evaluate(
            "['gnss-scale', 'lidar-scale'].map(i => { const g = document.getElementById(i);"
            " return [g.textContent, g.querySelector('path').getBBox().width]; })"
        )
        track_px = page.evaluate("document.querySelector('#gnss-track polyline').getBBox().height")
        errors = page.errors()
    assert errors == []
    thumbs = {k: v for k, v in images.items() if v["cls"] == "thumb"}
    assert len(thumbs) == 12 and all(v["w"] > 0 and v["h"] > 0 for v in images.values())
    for name, info in thumbs.items():
        px = _pixels(info)
        camera = name.split()[0]
        if camera == "front":
            assert (info["w"], info["h"]) == (160, 120) and _near(px.mean(axis=(0, 1)), RED)
        elif camera == "rear":
            assert (info["w"], info["h"]) == (100, 60) and _near(px.mean(axis=(0, 1)), TEAL)
        else:  # upright: 80 wide, 120 tall; the stored left (blue) half on top
            assert (info["w"], info["h"]) == (80, 120), name
            assert _near(px[:30].mean(axis=(0, 1)), BLUE) and _near(
                px[-30:].mean(axis=(0, 1)), GREEN
            )
    top = _pixels(images["lidar-preview"])
    size, half = top.shape[0], lidar.half_extent_m
    assert top.shape == (360, 360, 3) and half == 20

    def at(x: float, y: float) -> np.ndarray:
        """Pixels around base_link (x, y): x up, y to the left, the sensor in the middle."""
        r, c = round(size / 2 - x / half * size / 2), round(size / 2 - y / half * size / 2)
        return top[r - 2 : r + 3, c - 2 : c + 3].reshape(-1, 3)

    background = (250, 250, 250)
    drawn = lambda x, y: [p for p in at(x, y) if not _near(p, background, 5)]  # noqa: E731
    tall = drawn(10, 5)  # the wall ahead, 3 m up in base_link: the high (yellow) end
    assert tall and all(p[0] > 180 and p[1] > 180 and p[2] < 120 for p in tall)
    assert drawn(5, -10) and not drawn(5, 10)  # the rig flips y: the low wall is on the right
    ground = drawn(0, -5) + drawn(0, 5)  # 1.5 m below the sensor: the low (dark blue) end
    assert ground and all(p[2] > 60 and p[1] < 80 for p in ground)
    assert not drawn(-10, 0)  # nothing behind
    assert len(drift) == 1 and drift[0][2] == 0.0 and abs(drift[0][0] - zero) < 1.5
    metres = [float(label.removesuffix(" m")) for label, _ in scale]
    # the GNSS circle spans 0.002 deg of latitude: 222.4 m on a 6371 km sphere
    assert abs(scale[0][1] / metres[0] - track_px / 222.39) < 0.01 * track_px / 222.39
    assert abs(scale[1][1] / metres[1] - size / (2 * half)) < 0.02 * size / (2 * half)


def test_signed_drift_bars_grow_from_zero(tmp_path):
    """A device clock running fast (negative drift) is drawn left of zero, a slow one right."""
    from bridge_lake.normalize.report import _signed_bars

    svg = _signed_bars([("a", -30.0), ("b", 10.0)], "ppm", "drift")
    rects = svg.split("<rect")[1:]
    xs = [float(r.split(' x="')[1].split('"')[0]) for r in rects]
    ws = [float(r.split('width="')[1].split('"')[0]) for r in rects]
    zero = float(svg.split('class="zero" x1="')[1].split('"')[0])
    assert len(rects) == 2
    assert abs(xs[0] + ws[0] - zero) < 0.2 and xs[1] == zero  # -30 ends at zero, +10 starts
    assert abs(ws[0] / ws[1] - 3.0) < 0.01


def test_report_without_camera_or_lidar_says_so(tmp_path):
    result, _ = _streams(tmp_path)  # imu and gnss only
    lake = Lake(str(tmp_path / "lake"))
    cameras, lidar = camera_preview(lake, "d1"), lidar_preview(lake, "d1")
    assert cameras.thumbnails == [] and lidar is None
    html = render_report(
        "d1", result.streams, lat_deg=np.empty(0), lon_deg=np.empty(0), cameras=cameras, lidar=lidar
    )
    assert "No camera frames." in html and "No lidar scans." in html and "<img" not in html


def test_camera_preview_reads_within_its_budget(tmp_path):
    """Row groups of images are read whole, so the preview stops adding row groups at its
    byte budget; every camera gets its first thumbnail before any its second."""
    lake = Lake(str(tmp_path / "lake"))
    n = 20
    raw = np.full((40, 50, 3), 128, np.uint8).tobytes()
    table = pa.table(
        {
            "time_ns": np.tile(T0 + np.arange(n, dtype=np.int64) * 10**8, 2),
            "stream": ["a"] * n + ["b"] * n, "frame_id": ["f"] * 2 * n,
            "camera": ["a"] * n + ["b"] * n, "width": [50] * 2 * n, "height": [40] * 2 * n,
            "encoding": ["rgb8"] * 2 * n, "data": [raw] * 2 * n,
        }
    )  # fmt: skip
    table = conform(table, NORMALIZED["camera_frames"].schema, stream="a")
    lake.write_partition("normalized", "camera_frames", "d", table, row_group_rows=5)
    whole = camera_preview(lake, "d")
    assert len(whole.thumbnails) == 8 and whole.bytes_read > 0
    per_group = whole.bytes_read / 8  # the 8 thumbnails come from 8 row groups
    some = camera_preview(lake, "d", max_read=int(3.5 * per_group))
    assert sorted(t.camera for t in some.thumbnails) == ["a", "a", "b"]
    assert some.bytes_read <= 3.5 * per_group
    least = camera_preview(lake, "d", max_read=1)  # still one thumbnail for every camera
    assert sorted(t.camera for t in least.thumbnails) == ["a", "b"]


def test_previews_from_a_lake_on_s3_equal_the_local_ones(tmp_path, s3_options, s3_bucket):
    """The same drive on a local disk and on S3 (moto): the same thumbnails and scan picture,
    read through fsspec from the object store."""
    local, remote = Lake(str(tmp_path / "lake")), Lake(f"s3://{s3_bucket}/lake", s3_options)
    for lake in (local, remote):
        _pictures_drive(lake)
    a, b = camera_preview(local, "pics"), camera_preview(remote, "pics")
    assert [t.jpeg for t in a.thumbnails] == [t.jpeg for t in b.thumbnails]
    assert len(b.thumbnails) == 12 and a.bytes_read == b.bytes_read
    assert lidar_preview(local, "pics") == lidar_preview(remote, "pics") is not None
