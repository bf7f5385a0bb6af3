"""Scene sets: the manifest table of every file the scene_sets asset wrote for a drive.

One row per file under `<lake>/exports/drive=<id>/scenes/`: each scene of the catalog as a
trimmed MCAP, and each fault-injected variant of it, with everything a replay test needs to
know where the file came from (the scene, the rules, the lake snapshot) and what is in it
(topics, counts, the injected faults). The same facts are in the JSON manifest beside each
file; this table makes them queryable across drives.
"""

from __future__ import annotations

from bridge_lake.lake.schemas.base import TableSpec, columns, struct

TOPIC_COUNT = struct("topic string, type string, messages int64")
FAULT = struct("kind string, topic string, index int64, orig_ns int64, new_ns int64")
SNAPSHOT_TABLE = struct("table string, files int32, rows int64, bytes int64, fingerprint string")

SCENE_SETS = TableSpec(
    "scenes",
    "sets",
    "One row per file of the drive's scene set (exports/drive=<id>/scenes/): a scene of "
    "scenes/catalog as a trimmed MCAP, or a fault-injected variant of one, with its manifest.",
    columns(
        """
        scene_id         string!               scene id (scenes/catalog)
        variant          string!               clean, or the fault variant's name
        file             string!               MCAP file name in the scenes folder
        manifest_file    string!               JSON manifest beside it
        bytes            int64!                size of the MCAP file
        sha256           string!               sha256 of the MCAP file
        manifest_sha256  string!               sha256 of the JSON manifest
        t_start_ns       int64!                scene window start (master clock)
        t_end_ns         int64!                scene window end, exclusive
        tags             list<string>          scene tags
        score            float64               scene score from its rules
        rules            list<string>          rule files that found the scene
        rule_hashes      list<string>          sha256 of each rule file
        messages         int64!                messages in the file
        topics           list<TOPIC_COUNT>     per topic: type and message count
        mapping          string                topic mapping file name the scene was exported with
        source_file      string                variants: the clean scene file injected into
        source_sha256    string                variants: sha256 of that clean file
        seed             int64                 variants: the injection seed
        fault_specs      list<string>          variants: faults in the compact form
        faults           list<FAULT>           variants: every affected message (topic, index in
            the clean topic, log time before and after; new_ns null when dropped)
        snapshot         list<SNAPSHOT_TABLE>  lake partitions the scene was cut from
        snapshot_sha256  string!               one digest over the snapshot
        """,
        structs={"TOPIC_COUNT": TOPIC_COUNT, "FAULT": FAULT, "SNAPSHOT_TABLE": SNAPSHOT_TABLE},
    ),
)

__all__ = ["FAULT", "SCENE_SETS", "SNAPSHOT_TABLE", "TOPIC_COUNT"]
