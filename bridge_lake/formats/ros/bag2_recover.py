"""ROS 2 bags with MCAP storage: a folder of `.mcap` files plus `metadata.yaml`, which
rosbag2 writes when the recording is closed, so a crashed recording has none.

Recovery rewrites every storage file with `mcap_recover` into a new folder and writes a
`metadata.yaml` that describes what was kept: the input's own (topics, QoS, version) with
counts, times and file list updated, or, when there is none, one built from the MCAP
channels (rosbag2 stores each topic's QoS profiles and type hash in its channel metadata).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from mcap.reader import make_reader

from bridge_lake.formats.ros.damage import NO_INDEX, Damage, RosFormatError, ScanReport
from bridge_lake.formats.ros.mcap_recover import recover_mcap, scan_mcap

METADATA = "metadata.yaml"
MAX_METADATA_BYTES = 16 << 20


def storage_files(folder: Path) -> list[Path]:
    """The MCAP storage files of a bag folder: those metadata.yaml lists, else every
    `*.mcap` in it (a crashed recording has no metadata.yaml)."""
    info = read_metadata(folder)
    if info is not None:
        names = [n for n in info.get("relative_file_paths") or [] if isinstance(n, str)]
        if names and not any(n.endswith(".mcap") for n in names):
            return []  # another storage (SQLite): not ours to scan
        files = [folder / n for n in names if n.endswith(".mcap") and not Path(n).is_absolute()]
        files = [f for f in files if f.is_file() and f.resolve().parent == folder.resolve()]
        if files:
            return files
    return sorted(p for p in folder.glob("*.mcap") if p.is_file())


def read_metadata(folder: Path) -> dict | None:
    path = folder / METADATA
    if not path.is_file() or path.stat().st_size > MAX_METADATA_BYTES:
        return None
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError):
        return None
    info = doc.get("rosbag2_bagfile_information") if isinstance(doc, dict) else None
    return info if isinstance(info, dict) else None


def _merge(reports: list[ScanReport], folder: Path) -> ScanReport:
    total = ScanReport(str(folder), "bag2", sum(r.file_size for r in reports))
    for r in reports:
        total.valid_end += r.valid_end
        total.complete_chunks += r.complete_chunks
        total.dropped_chunks += r.dropped_chunks
        total.partial_chunk_messages += r.partial_chunk_messages
        total.unknown_dropped += r.unknown_dropped
        total.damages += r.damages
        for name, t in r.topics.items():
            mine = total.topic(name, t.type)
            mine.kept += t.kept
            mine.dropped += t.dropped
            if t.first_ns is not None:
                mine.add_times(t.first_ns, t.last_ns or t.first_ns)
    total.indexed = all(r.indexed for r in reports)
    return total


def scan_bag2(folder: str | os.PathLike[str]) -> ScanReport:
    """The damage report of a ROS 2 bag folder (MCAP storage), without writing anything."""
    folder = Path(folder)
    files = storage_files(folder)
    if not files:
        raise RosFormatError(
            "a folder without MCAP storage files is not a ROS 2 bag", path=str(folder)
        )
    report = _merge([scan_mcap(f) for f in files], folder)
    if read_metadata(folder) is None:
        report.indexed = False
        report.damages.insert(
            0,
            Damage(
                NO_INDEX, 0, f"no readable {METADATA} (rosbag2 writes it when it closes the bag)"
            ),
        )
    return report


def recover_bag2(src: str | os.PathLike[str], out: str | os.PathLike[str]) -> ScanReport:
    """Recover every storage file of bag folder `src` into the new folder `out` and write
    its metadata.yaml."""
    src, out = Path(src), Path(out)
    files = storage_files(src)
    if not files:
        raise RosFormatError(
            "a folder without MCAP storage files is not a ROS 2 bag", path=str(src)
        )
    out.mkdir(parents=True, exist_ok=False)
    reports = [recover_mcap(f, out / f.name) for f in files]
    report = _merge(reports, src)
    had = read_metadata(src)
    if had is None:
        report.damages.insert(0, Damage(NO_INDEX, 0, f"no readable {METADATA}; rebuilt"))
    info = _metadata(out, [out / f.name for f in files], had)
    (out / METADATA).write_text(
        yaml.safe_dump({"rosbag2_bagfile_information": info}, sort_keys=False)
    )
    return report


def _metadata(out: Path, files: list[Path], had: dict | None) -> dict:
    topics: dict[str, dict] = {}
    counts: dict[str, int] = {}
    per_file = []
    first_all, last_all = None, None
    for path in files:
        with path.open("rb") as f:
            summary = make_reader(f).get_summary()
        stats = summary.statistics if summary else None
        first = stats.message_start_time if stats and stats.message_count else 0
        last = stats.message_end_time if stats and stats.message_count else 0
        for cid, channel in (summary.channels if summary else {}).items():
            schema = summary.schemas.get(channel.schema_id)
            n = stats.channel_message_counts.get(cid, 0) if stats else 0
            counts[channel.topic] = counts.get(channel.topic, 0) + n
            topics.setdefault(
                channel.topic,
                {
                    "name": channel.topic,
                    "type": schema.name if schema else "",
                    "serialization_format": channel.message_encoding,
                    "offered_qos_profiles": channel.metadata.get("offered_qos_profiles", ""),
                    "type_description_hash": channel.metadata.get("topic_type_hash", ""),
                },
            )
        n_file = stats.message_count if stats else 0
        per_file.append(
            {
                "path": path.name,
                "starting_time": {"nanoseconds_since_epoch": first},
                "duration": {"nanoseconds": max(0, last - first)},
                "message_count": n_file,
            }
        )
        if n_file:
            first_all = first if first_all is None else min(first_all, first)
            last_all = last if last_all is None else max(last_all, last)
    known = {
        t["topic_metadata"]["name"]: t["topic_metadata"]
        for t in (had or {}).get("topics_with_message_count") or []
        if isinstance(t, dict) and isinstance(t.get("topic_metadata"), dict)
    }
    info = dict(had or {"version": 8, "storage_identifier": "mcap"})
    info.update(
        {
            "relative_file_paths": [p.name for p in files],
            "duration": {"nanoseconds": max(0, (last_all or 0) - (first_all or 0))},
            "starting_time": {"nanoseconds_since_epoch": first_all or 0},
            "message_count": sum(counts.values()),
            "topics_with_message_count": [
                {"topic_metadata": known.get(name, meta), "message_count": counts[name]}
                for name, meta in topics.items()
            ],
            "files": per_file,
        }
    )
    info.setdefault("compression_format", "")
    info.setdefault("compression_mode", "")
    return info
