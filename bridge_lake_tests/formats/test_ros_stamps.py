"""Where header stamps are, read from a type's definition text (formats/ros/stamps.py):
equal to what rosbags' typestore says of every exported type, in ROS 1 and ROS 2, and for
ros2idl text; a type that does not open with a Header or Time has none."""

from __future__ import annotations

import pytest

from bridge_lake.export.kinds import TYPENAMES
from bridge_lake.export.messages import typestore
from bridge_lake.formats.ros.stamps import definition_text, opening_field, stamp_positions


def _rosbags_first(typename: str, ros: int) -> str | None:
    """The first field's type as rosbags' field definitions give it."""
    fields = typestore(ros).fielddefs[typename][1]
    _, (_, detail) = fields[0]
    if detail == "std_msgs/msg/Header":
        return "header"
    if detail == "builtin_interfaces/msg/Time" or (
        isinstance(detail, tuple) and detail[0] == "time"
    ):
        return "time"
    return None


@pytest.mark.parametrize("ros", [1, 2])
@pytest.mark.parametrize("typename", sorted(TYPENAMES.values()))
def test_opening_field_agrees_with_rosbags(typename: str, ros: int) -> None:
    text, _ = typestore(ros).generate_msgdef(typename, ros_version=ros)
    assert opening_field(text) == _rosbags_first(typename, ros)


def test_idl_constants_comments_and_other_types() -> None:
    idl = (
        "module sensor_msgs {\n  module msg {\n"
        '    @verbatim (language="comment", text="an IMU")\n'
        "    struct Imu {\n      std_msgs::msg::Header header;\n      double x;\n    };\n"
        "  };\n};\n"
    )
    assert opening_field(idl) == "header"
    assert opening_field("# comment\nuint8 A=1\nHeader header\n") == "header"
    assert opening_field("uint8 x\nstd_msgs/Header header\n") is None
    assert opening_field("") is None
    assert definition_text("protobuf", b"\x0a\x01") == ""
    assert (
        definition_text("ros2msg", b"builtin_interfaces/Time t\n") == "builtin_interfaces/Time t\n"
    )


def test_positions_by_encoding() -> None:
    header = "std_msgs/Header header\nuint8 x\n"
    time = "time stamp\nuint8 x\n"
    assert stamp_positions("a/msg/B", "cdr", b"\0" * 16, header) == [4]
    assert stamp_positions("a/msg/B", "ros1", b"\0" * 16, header) == [4]
    assert stamp_positions("a/msg/B", "ros1", b"\0" * 16, time) == [0]
    assert stamp_positions("a/msg/B", "cdr", b"\0" * 16, "uint8 x\n") == []
    assert stamp_positions("a/msg/B", "protobuf", b"\0" * 16, header) == []
