"""The demo's last two steps, after the lake: the online bridge and crash recovery.

`bridge-lake live` follows the demo's ADTF recording while `synth.record` re-records it
(flushed per chunk, faster than real time, as a recorder writing its file), into a live
MCAP whose messages per topic are then checked against the lake's offline export of the same
drive (`bridge-lake live-check`). `bridge-lake recover` then rebuilds a copy of the recording
cut at 60 % of its bytes, as a recorder that lost power leaves it, with the stream names of
the finished recording. Both are plain library calls, as the commands make them; nothing
here imports Dagster.
"""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import TextIO

from bridge_lake.drive_meta import DRIVE_YAML
from bridge_lake.export.mapping import default_mapping_path, load_mapping
from bridge_lake.formats.adtf import sniff
from bridge_lake.formats.adtf.follow import load_catalog
from bridge_lake.formats.adtf.recover import AdtfRecovery
from bridge_lake.live.bridge import LiveBridge, LiveConfig
from bridge_lake.live.check import CountCheck, compare_counts
from bridge_lake.live.summary import LiveSummary
from bridge_lake.normalize.adtf_mapping import resolve_mapping
from bridge_lake.recover.run import recover
from bridge_lake.synth.record import record

RECORD_SPEED = 20.0
"""How much faster than real time the demo's recorder writes (a 1.5-minute drive: ~5 s)."""
CUT_AT = 0.6
"""Where the demo's crashed recording ends, as a share of the finished file's bytes."""


def follow_and_recover(workdir: Path, drive_dir: Path, export: Path, out: TextIO) -> bool:
    """Run the live bridge on a re-recording of the ADTF drive in `drive_dir` and check it
    against `export` (its offline MCAP), then recover a cut copy; True when both agree with
    what they should (the live counts equal the export's, the recovery kept samples)."""
    [source] = sorted(p for p in drive_dir.iterdir() if p.is_file() and sniff(p)[0])
    live_dir = workdir / "live" / drive_dir.name
    shutil.rmtree(live_dir, ignore_errors=True)
    live_dir.mkdir(parents=True)
    shutil.copy(drive_dir / DRIVE_YAML, live_dir / DRIVE_YAML)  # the rig: /tf_static
    print(f"\nOnline bridge: bridge-lake live on {source.name} re-recorded at "
          f"{RECORD_SPEED:g}x into {live_dir}", file=out)  # fmt: skip
    summary, check = _follow(source, live_dir, export)
    lag = summary.lag()
    p99 = f"{lag['p99_ms']:.1f} ms" if lag["p99_ms"] is not None else "n/a"
    agree = "ok" if check.ok else "MISMATCH"
    print(f"  {summary.messages} messages on {len(summary.topics)} topics, lag p99 {p99}; "
          f"live-check against the export: {agree}", file=out)  # fmt: skip
    if not check.ok:
        print(check.render(), file=out)
    cut = workdir / "recover" / f"cut-{source.name}"
    cut.parent.mkdir(parents=True, exist_ok=True)
    data = source.read_bytes()
    cut.write_bytes(data[: int(len(data) * CUT_AT)])
    done = recover(cut, cut.with_name(f"recovered-{source.name}"), catalog_from=source, force=True)
    report = done.report
    assert isinstance(report, AdtfRecovery)  # an ADTF recording's recovery
    samples = sum(s.samples for s in report.streams.values())
    print(f"Crash recovery: bridge-lake recover on {source.name} cut at {CUT_AT:.0%} of its "
          f"bytes: {samples} samples in {report.chunks} complete chunks kept, "
          f"{report.lost_bytes} bytes lost -> {done.out}", file=out)  # fmt: skip
    return check.ok and samples > 0


def _follow(source: Path, live_dir: Path, export: Path) -> tuple[LiveSummary, CountCheck]:
    """The bridge follows `live_dir/<name>` while a thread re-records `source` there; its
    live MCAP's counts against `export`."""
    target = live_dir / source.name
    config = LiveConfig(
        path=target,
        stream_mapping=resolve_mapping(live_dir),
        topic_mapping=load_mapping(default_mapping_path("adtf")),
        catalog=load_catalog(source),
        idle_s=2.0,
    )
    live_mcap = live_dir / "live.mcap"
    bridge = LiveBridge(config, mcap=live_mcap)
    recorder = threading.Thread(
        target=record, args=(source, target), kwargs={"speed": RECORD_SPEED}, daemon=True
    )
    recorder.start()
    summary = asyncio.run(bridge.run())
    recorder.join()
    return summary, compare_counts(live_mcap, export)
