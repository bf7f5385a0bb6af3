"""Vectorized serializers: columns of the lake -> n ROS 1 or ROS 2 (CDR) messages in one buffer.

One function per message kind; each takes int64 ns stamps, the topic's frame id and numpy (or
Arrow binary) columns, and returns `Serialized` (one uint8 buffer + n + 1 offsets) without a
Python object per message or per point. `ros=1` writes ROS 1 serialization, `ros=2` CDR little
endian with its encapsulation header; `seq_start` numbers ROS 1 Header.seq (ROS 2 headers have
none). Output is byte for byte what rosbags' serialize_ros1 / serialize_cdr produce for the same
messages (tested). `typestore` / `message_definition` give the definitions the bag or MCAP file
must carry; TYPENAMES maps each serializer to its message type. `ddl_message` writes the
types generated from DDL structs (`ddl_types`), `adtf_sample` raw ADTF samples.
"""

from bridge_lake.export.messages.adtf_sample import adtf_sample
from bridge_lake.export.messages.ddl_wire import ddl_message
from bridge_lake.export.messages.image import compressed_image, image
from bridge_lake.export.messages.nav import UNKNOWN_COVARIANCE, odometry, tf_message
from bridge_lake.export.messages.pointcloud import (
    VELODYNE_XYZIRT,
    XYZI,
    PointField,
    PointLayout,
    point_cloud2,
)
from bridge_lake.export.messages.sensor import imu, laser_scan, nav_sat_fix
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.messages.typestore import (
    TYPENAMES,
    ExportTypes,
    MessageDefinition,
    message_definition,
    typestore,
)
from bridge_lake.export.messages.vehicle import can_frame
from bridge_lake.export.messages.video import compressed_video
from bridge_lake.export.messages.wire import split_stamps

__all__ = [
    "TYPENAMES",
    "UNKNOWN_COVARIANCE",
    "VELODYNE_XYZIRT",
    "XYZI",
    "ExportTypes",
    "MessageDefinition",
    "PointField",
    "PointLayout",
    "Serialized",
    "adtf_sample",
    "can_frame",
    "compressed_image",
    "compressed_video",
    "ddl_message",
    "image",
    "imu",
    "laser_scan",
    "message_definition",
    "nav_sat_fix",
    "odometry",
    "point_cloud2",
    "split_stamps",
    "tf_message",
    "typestore",
]
