"""Vectorized serializers: columns of the lake -> n protobuf messages in one buffer, for MCAP
files with protobuf encoding (what Foxglove reads natively and many AV teams store).

Drop-in for bridge_lake.export.messages: the same functions with the same arguments (`ros` and
`seq_start` accepted and ignored: protobuf has one encoding and no sequence numbers), each
returning `Serialized`. Messages are encoded straight from numpy/Arrow columns (wire.py) without
a Python object per message, byte for byte as protobuf (upb) serializes them.

Mapping (SCHEMA_NAMES): PointCloud2 -> foxglove.PointCloud, Image -> foxglove.RawImage,
CompressedImage -> foxglove.CompressedImage, CompressedVideo -> foxglove.CompressedVideo,
NavSatFix -> foxglove.LocationFix, LaserScan -> foxglove.LaserScan, Odometry ->
foxglove.Odometry, TFMessage -> foxglove.FrameTransforms; Imu -> bridge_lake.Imu and
can_msgs/Frame -> bridge_lake.CanFrame (bridge_lake.proto, next to this file). What each drops
is in its docstring.

In an MCAP file (profile "", as protobuf files have no ROS profile), per topic, with the mcap
library's Writer:

    name, data = schema(TYPENAMES["imu"])  # "bridge_lake.Imu", serialized FileDescriptorSet
    schema_id = writer.register_schema(name=name, encoding="protobuf", data=data)
    channel_id = writer.register_channel(topic, message_encoding="protobuf", schema_id=schema_id)

or with bridge_lake's McapWriter(path, profile=""): add_schema(name, "protobuf", data) and
add_channel(topic, "protobuf", schema_id). Messages are then written as Serialized batches.
"""

from bridge_lake.export.protobuf.adtf_sample import adtf_sample
from bridge_lake.export.protobuf.ddl import ddl_message
from bridge_lake.export.protobuf.image import compressed_image, compressed_video, image
from bridge_lake.export.protobuf.nav import odometry, tf_message
from bridge_lake.export.protobuf.pointcloud import point_cloud2
from bridge_lake.export.protobuf.schemas import SCHEMA_NAMES, schema
from bridge_lake.export.protobuf.sensor import imu, laser_scan, nav_sat_fix
from bridge_lake.export.protobuf.vehicle import can_frame

__all__ = [
    "SCHEMA_NAMES",
    "adtf_sample",
    "can_frame",
    "compressed_image",
    "compressed_video",
    "ddl_message",
    "image",
    "imu",
    "laser_scan",
    "nav_sat_fix",
    "odometry",
    "point_cloud2",
    "schema",
    "tf_message",
]
