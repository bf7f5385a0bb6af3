"""Scene sets: the manifest table of every file the scene_sets asset wrote for a drive.

One row per file under `<lake>/exports/drive=<id>/scenes/`: each scene of the catalog as a
trimmed MCAP, and each fault-injected variant of it, with everything a replay test needs to
know where the file came from (the scene, the rules, the lake snapshot) and what is in it
(topics, counts, the injected faults). The same facts are in the JSON manifest beside each
file; this table makes them queryable across drives.
"""

from __future__ import annotations

import pyarrow as pa

from bridge_lake.lake.schemas.base import F64, Column, TableSpec

TOPIC_COUNT = pa.struct([("topic", pa.string()), ("type", pa.string()), ("messages", pa.int64())])
FAULT = pa.struct(
    [
        ("kind", pa.string()),
        ("topic", pa.string()),
        ("index", pa.int64()),
        ("orig_ns", pa.int64()),
        ("new_ns", pa.int64()),
    ]
)
SNAPSHOT_TABLE = pa.struct(
    [
        ("table", pa.string()),
        ("files", pa.int32()),
        ("rows", pa.int64()),
        ("bytes", pa.int64()),
        ("fingerprint", pa.string()),
    ]
)

SCENE_SETS = TableSpec(
    "scenes",
    "sets",
    "One row per file of the drive's scene set (exports/drive=<id>/scenes/): a scene of "
    "scenes/catalog as a trimmed MCAP, or a fault-injected variant of one, with its manifest.",
    (
        Column("scene_id", pa.string(), "scene id (scenes/catalog)", nullable=False),
        Column("variant", pa.string(), "clean, or the fault variant's name", nullable=False),
        Column("file", pa.string(), "MCAP file name in the scenes folder", nullable=False),
        Column("manifest_file", pa.string(), "JSON manifest beside it", nullable=False),
        Column("bytes", pa.int64(), "size of the MCAP file", nullable=False),
        Column("sha256", pa.string(), "sha256 of the MCAP file", nullable=False),
        Column("manifest_sha256", pa.string(), "sha256 of the JSON manifest", nullable=False),
        Column("t_start_ns", pa.int64(), "scene window start (master clock)", nullable=False),
        Column("t_end_ns", pa.int64(), "scene window end, exclusive", nullable=False),
        Column("tags", pa.list_(pa.string()), "scene tags"),
        Column("score", F64, "scene score from its rules"),
        Column("rules", pa.list_(pa.string()), "rule files that found the scene"),
        Column("rule_hashes", pa.list_(pa.string()), "sha256 of each rule file"),
        Column("messages", pa.int64(), "messages in the file", nullable=False),
        Column("topics", pa.list_(TOPIC_COUNT), "per topic: type and message count"),
        Column("mapping", pa.string(), "topic mapping file name the scene was exported with"),
        Column("source_file", pa.string(), "variants: the clean scene file injected into"),
        Column("source_sha256", pa.string(), "variants: sha256 of that clean file"),
        Column("seed", pa.int64(), "variants: the injection seed"),
        Column("fault_specs", pa.list_(pa.string()), "variants: faults in the compact form"),
        Column(
            "faults",
            pa.list_(FAULT),
            "variants: every affected message (topic, index in the clean topic, log time "
            "before and after; new_ns null when dropped)",
        ),
        Column("snapshot", pa.list_(SNAPSHOT_TABLE), "lake partitions the scene was cut from"),
        Column("snapshot_sha256", pa.string(), "one digest over the snapshot", nullable=False),
    ),
)

__all__ = ["FAULT", "SCENE_SETS", "SNAPSHOT_TABLE", "TOPIC_COUNT"]
