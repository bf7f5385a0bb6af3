"""Tests of the Dagster definitions, and the helper they share: materializing a drive's
normalized layer on a throwaway instance."""

import dagster as dg

from bridge_lake.defs.normalized import normalized
from bridge_lake.defs.raw import raw_manifest
from bridge_lake.defs.resources import LakeResource, LandingZoneResource


def materialize_normalized(landing_root, lake_root, drive_id, *, adtf_mapping=None):
    """raw_manifest and normalized for the partition `drive_id` of a fresh test instance;
    a failed run is returned, not raised. `adtf_mapping`: the landing resource's user
    mapping."""
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions("drives", [drive_id])
        return dg.materialize(
            [raw_manifest, normalized],
            partition_key=drive_id,
            instance=instance,
            resources={
                "lake": LakeResource(root=str(lake_root)),
                "landing": LandingZoneResource(root=str(landing_root), adtf_mapping=adtf_mapping),
            },
            raise_on_error=False,
        )
