"""landing_drive: a drive folder in the landing zone, as an external asset per drive.

Nothing materializes it: when the landing-zone sensor requests a run of a drive it observes
the folder, recording the fingerprint of its file listing as the partition's data version.
That is the sensor's memory of what it has asked for (a row per drive in the instance's event
log, not an entry in its cursor), and it is the input data version raw_manifest records.
"""

import dagster as dg

from bridge_lake.defs.partitions import drives

DATA_VERSION_TAG = "dagster/data_version"
"""The tag Dagster reads an observation's data version from (indexed per partition)."""

landing_drive = dg.AssetSpec(
    "landing_drive",
    partitions_def=drives,
    group_name="raw",
    kinds={"folder"},
    description="A drive folder in the landing zone; data version = fingerprint of its file "
    "listing (paths, sizes, modification times), observed by landing_zone_sensor.",
)


def observed_fingerprints(instance: dg.DagsterInstance) -> dict[str, str]:
    """drive id → the fingerprint of its latest observation, in one query whatever the
    number of drives (the data version tag is indexed per partition)."""
    tags = instance.event_log_storage.get_latest_tags_by_partition(
        landing_drive.key, dg.DagsterEventType.ASSET_OBSERVATION, [DATA_VERSION_TAG]
    )
    return {drive: t[DATA_VERSION_TAG] for drive, t in tags.items() if DATA_VERSION_TAG in t}


def observation(drive_id: str, fingerprint: str, files: int, size: int) -> dg.AssetObservation:
    return dg.AssetObservation(
        asset_key=landing_drive.key,
        partition=drive_id,
        tags={DATA_VERSION_TAG: fingerprint},
        metadata={"files": files, "bytes": size},
    )
