"""The registry of message kinds (export/kinds): every record complete and consistent with
the rest of the project that reads it (mapping, typestores, protobuf schemas, lake tables,
fault selectors), and the plain-argument encoders exactly the kinds' validation + encoders."""

from __future__ import annotations

import fnmatch
import inspect

import numpy as np
import pytest

from bridge_lake.export import messages as m
from bridge_lake.export import protobuf as pb
from bridge_lake.export.kinds import GENERATED, KINDS, SCHEMA_NAMES, TYPENAMES, fault_selectors
from bridge_lake.export.mapping import LAYER_TABLES, MESSAGE_TYPES, SHORT_NAMES
from bridge_lake.lake.schemas import GENERIC_PREFIX
from bridge_lake.scenes.fault_specs import SENSOR_TYPES

FIXED = sorted(k for k in KINDS if k not in GENERATED)


def test_the_mapping_types_are_the_kinds():
    assert MESSAGE_TYPES is KINDS
    assert {SHORT_NAMES[n.replace("/msg/", "/")] for n in KINDS if "/" in n} == set(FIXED)


@pytest.mark.parametrize("typename", FIXED)
def test_each_fixed_kind_is_known_to_both_typestores_and_protobuf(typename):
    kind = KINDS[typename]
    for ros in (1, 2):
        assert m.message_definition(typename, ros).name.endswith(typename.split("/")[-1])
    name, data = pb.schema(typename)
    assert name == kind.codec.protobuf_schema == SCHEMA_NAMES[typename] and data
    assert TYPENAMES[kind.codec.short] == typename
    assert kind.builder is not None or kind.pick is not None


@pytest.mark.parametrize("typename", sorted(KINDS))
def test_each_kind_is_made_from_lake_tables(typename):
    """Each table a lake schema, or the generic tables' glob (their names come from the DDL)."""
    for table in KINDS[typename].tables:
        generic = table == f"normalized/{GENERIC_PREFIX}*"
        assert generic or any(fnmatch.fnmatchcase(t, table) for t in LAYER_TABLES), table


def test_fault_selectors_come_from_the_kinds():
    assert fault_selectors() == SENSOR_TYPES
    assert list(SENSOR_TYPES) == [
        "camera",
        "lidar",
        "imu",
        "can",
        "gnss",
        "gps",
        "laser",
        "odom",
        "tf",
    ]
    assert SENSOR_TYPES["camera"] == (
        "sensor_msgs/msg/Image",
        "sensor_msgs/msg/CompressedImage",
        "foxglove_msgs/msg/CompressedVideo",
    )


@pytest.mark.parametrize("short", sorted(TYPENAMES))
def test_plain_encoders_are_validation_then_encoder(short):
    """One signature for ROS and protobuf: the kind's `columns` plus `ros` and `seq_start`."""
    kind = KINDS[TYPENAMES[short]]
    ours = inspect.signature(getattr(m, short))
    assert ours == inspect.signature(getattr(pb, short))
    assert list(ours.parameters)[-2:] == ["ros", "seq_start"]
    assert list(ours.parameters)[:-2] == list(inspect.signature(kind.codec.columns).parameters)


def test_arguments_are_checked_once_for_both_encodings():
    """A bad argument is the same ValueError whichever encoder is asked."""
    stamps = np.array([1, 2], np.int64)
    bad = dict(
        orientation=None, angular_velocity=np.zeros((3, 3)), linear_acceleration=np.zeros((2, 3))
    )
    errors = []
    for call in (
        lambda: m.imu(stamps, "imu", **bad, ros=2),
        lambda: pb.imu(stamps, "imu", **bad, ros=2),
    ):
        with pytest.raises(ValueError) as info:
            call()
        errors.append(str(info.value))
    assert errors[0] == errors[1] and "angular_velocity" in errors[0]
