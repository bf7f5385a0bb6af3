"""The per-drive report renders in a real browser (headless Chromium)."""

import shutil
import subprocess

import av
import numpy as np
import pyarrow as pa

from bridge_lake.lake import Lake
from bridge_lake.normalize.report import render_report, segments
from bridge_lake.normalize.sink import DriveSink, StreamInfo

T0 = 1_700_000_000_000_000_000
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


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
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    assert chromium, "headless Chromium is required (make test installs it)"
    base = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}"]
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
        "<polyline",
    ):
        assert element in dom, element
    timeline = dom[dom.index('id="timeline"') : dom.index("</svg>", dom.index('id="timeline"'))]
    assert timeline.count("<rect") == 3  # imu split at its 3 s hole + one gnss segment
    assert dom.count("<rect") == 6  # + two rate bars + one drift bar (imu has device time)
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
