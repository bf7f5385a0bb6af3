"""Protobuf serialization: bridge_lake.export.protobuf vs building protobuf messages one by one.

    python benchmarks/bench_protobuf.py --smoke   # a few seconds: tiny batches, same checks
    python benchmarks/bench_protobuf.py           # full: 200k small messages, 100 clouds of 100k

Same workloads as bench_messages.py (its synthetic columns, same seed). "ours" is one call of
the vectorized protobuf serializer for the whole batch (best of `--repeat` after a warm-up).
"naive" is what an exporter built on the protobuf library does: convert the columns to Python
lists once, then for each message build the foxglove / bridge_lake message object (nested
Timestamp, Vector3, Quaternion, ...; image and cloud data as bytes slices of one buffer, each
cloud's points packed into a structured array first) and call SerializeToString (upb backend).
It runs on the first `--sample` messages (its per-message cost does not depend on the batch
size) and its bytes must equal ours, so every ratio compares identical outputs. "ROS 2" is
bridge_lake.export.messages writing the same batch as CDR, for scale. Every figure printed is
measured in this run.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from bench_messages import HEADLINE, Columns, best_time, workloads
from figures import figure
from foxglove_schemas_protobuf.CompressedImage_pb2 import CompressedImage
from foxglove_schemas_protobuf.CompressedVideo_pb2 import CompressedVideo
from foxglove_schemas_protobuf.FrameTransform_pb2 import FrameTransform
from foxglove_schemas_protobuf.FrameTransforms_pb2 import FrameTransforms
from foxglove_schemas_protobuf.KeyValuePair_pb2 import KeyValuePair
from foxglove_schemas_protobuf.LaserScan_pb2 import LaserScan
from foxglove_schemas_protobuf.LocationFix_pb2 import LocationFix
from foxglove_schemas_protobuf.Odometry_pb2 import Odometry
from foxglove_schemas_protobuf.PackedElementField_pb2 import PackedElementField
from foxglove_schemas_protobuf.PointCloud_pb2 import PointCloud
from foxglove_schemas_protobuf.Pose_pb2 import Pose
from foxglove_schemas_protobuf.Quaternion_pb2 import Quaternion
from foxglove_schemas_protobuf.RawImage_pb2 import RawImage
from foxglove_schemas_protobuf.Vector3_pb2 import Vector3
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.timestamp_pb2 import Timestamp

from bridge_lake.export import messages as m
from bridge_lake.export import protobuf as pb
from bridge_lake.export.protobuf.schemas import FILE_NAME

NS = 1_000_000_000
MB = 1e6
SCAN = dict(
    angle_min=-2.35,
    angle_max=2.35,
    angle_increment=0.0043,
    time_increment=1.7e-5,
    scan_time=0.025,
    range_min=0.1,
    range_max=30.0,
)


def arguments(kind: str, c: Columns) -> dict:
    """Keyword arguments (after the stamps) of the serializer call, the same for both modules."""
    v = c.values
    return {
        "imu": lambda: dict(
            frame_id="imu_link",
            orientation=v["q"],
            orientation_covariance=v["cov9"],
            angular_velocity=v["v1"],
            angular_velocity_covariance=v["cov9"],
            linear_acceleration=v["v2"],
            linear_acceleration_covariance=v["cov9"],
        ),
        "nav_sat_fix": lambda: dict(
            frame_id="gps",
            latitude_deg=v["lat"],
            longitude_deg=v["lon"],
            altitude_m=v["alt"],
            status=0,
            service=1,
            position_covariance=v["cov9"],
            position_covariance_type=2,
        ),
        "can_frame": lambda: dict(
            frame_id="can0",
            can_id=v["ids"],
            is_rtr=False,
            is_extended=False,
            is_error=False,
            dlc=8,
            data=v["bytes8"],
        ),
        "odometry": lambda: dict(
            frame_id="odom",
            child_frame_id="base_link",
            position=v["v1"],
            orientation=v["q"],
            pose_covariance=v["cov36"],
            linear_velocity=v["v2"],
            angular_velocity=v["v1"],
            twist_covariance=v["cov36"],
        ),
        "tf_message": lambda: dict(
            parent_frame_ids=["odom"],
            child_frame_ids=["base_link"],
            translation=v["v1"],
            rotation=v["q"],
            transforms_per_message=1,
        ),
        "laser_scan": lambda: dict(
            frame_id="laser",
            **SCAN,
            counts=v["counts"],
            ranges=v["ranges"],
            intensities=v["intensities"],
        ),
        "point_cloud2": lambda: dict(frame_id="velodyne", counts=v["counts"], columns=v["columns"]),
        "image": lambda: dict(
            frame_id="camera", height=480, width=640, encoding="mono8", step=640, data=v["data"]
        ),
        "compressed_image": lambda: dict(frame_id="camera", format="jpeg", data=v["data"]),
        "compressed_video": lambda: dict(frame_id="camera", format="h264", data=v["data"]),
    }[kind]()


def ours(module, kind: str, c: Columns) -> m.Serialized:
    return getattr(module, kind)(c.stamps, **arguments(kind, c), ros=2)


def own_classes() -> dict[str, type]:
    """bridge_lake.Imu and bridge_lake.CanFrame from the FileDescriptorSet the MCAP carries,
    added to the default pool so they share google.protobuf.Timestamp with foxglove's."""
    pool = descriptor_pool.Default()
    _, data = pb.schema("sensor_msgs/msg/Imu")
    for file in descriptor_pb2.FileDescriptorSet.FromString(data).file:
        if file.name == FILE_NAME:
            pool.Add(file)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(name))
        for name in ("bridge_lake.Imu", "bridge_lake.CanFrame")
    }


OWN = own_classes()


def naive(kind: str, c: Columns, count: int) -> list[bytes]:
    """The first `count` messages, one protobuf object each."""
    v = c.values
    seconds, nanos = (x.tolist() for x in np.divmod(c.stamps[:count], NS))

    def stamp(i: int) -> Timestamp:
        return Timestamp(seconds=seconds[i], nanos=nanos[i])

    def vec3(row: list[float]) -> Vector3:
        return Vector3(x=row[0], y=row[1], z=row[2])

    def quat(row: list[float]) -> Quaternion:
        return Quaternion(x=row[0], y=row[1], z=row[2], w=row[3])

    identity = Pose(position=Vector3(), orientation=Quaternion(w=1.0))
    if "counts" in v:
        ends = np.cumsum(v["counts"]).tolist()
        starts = [0, *ends[:-1]]
    if "data" in v:
        offsets = np.frombuffer(v["data"].buffers()[1], np.int32)[: count + 1].tolist()
        blob = v["data"].buffers()[2].to_pybytes()
    per_message = ("q", "v1", "v2", "lat", "lon", "alt", "ids")
    rows = {k: v[k][:count].tolist() for k in per_message if k in v}
    rows |= {k: v[k].tolist() for k in ("cov9", "cov36") if k in v}

    match kind:
        case "imu":
            Imu = OWN["bridge_lake.Imu"]

            def build(i):
                return Imu(
                    timestamp=stamp(i),
                    frame_id="imu_link",
                    orientation=quat(rows["q"][i]),
                    orientation_covariance=rows["cov9"],
                    angular_velocity=vec3(rows["v1"][i]),
                    angular_velocity_covariance=rows["cov9"],
                    linear_acceleration=vec3(rows["v2"][i]),
                    linear_acceleration_covariance=rows["cov9"],
                )
        case "nav_sat_fix":
            metadata = [
                KeyValuePair(key="status", value="0"),
                KeyValuePair(key="service", value="1"),
            ]

            def build(i):
                return LocationFix(
                    timestamp=stamp(i),
                    frame_id="gps",
                    latitude=rows["lat"][i],
                    longitude=rows["lon"][i],
                    altitude=rows["alt"][i],
                    position_covariance=rows["cov9"],
                    position_covariance_type=2,
                    metadata=metadata,
                )
        case "can_frame":
            CanFrame = OWN["bridge_lake.CanFrame"]
            payload = v["bytes8"][:count]

            def build(i):
                return CanFrame(
                    timestamp=stamp(i),
                    frame_id="can0",
                    id=rows["ids"][i],
                    dlc=8,
                    data=payload[i].tobytes(),
                )
        case "odometry":

            def build(i):
                return Odometry(
                    timestamp=stamp(i),
                    frame_id="odom",
                    body_frame_id="base_link",
                    pose=Pose(position=vec3(rows["v1"][i]), orientation=quat(rows["q"][i])),
                    linear_velocity=vec3(rows["v2"][i]),
                    angular_velocity=vec3(rows["v1"][i]),
                    pose_covariance=rows["cov36"],
                    velocity_covariance=rows["cov36"],
                )
        case "tf_message":

            def build(i):
                return FrameTransforms(
                    transforms=[
                        FrameTransform(
                            timestamp=stamp(i),
                            parent_frame_id="odom",
                            child_frame_id="base_link",
                            translation=vec3(rows["v1"][i]),
                            rotation=quat(rows["q"][i]),
                        )
                    ]
                )
        case "laser_scan":
            start = float(np.float32(SCAN["angle_min"]))
            increment = float(np.float32(SCAN["angle_increment"]))

            def build(i):
                a, b = starts[i], ends[i]
                return LaserScan(
                    timestamp=stamp(i),
                    frame_id="laser",
                    pose=identity,
                    start_angle=start,
                    end_angle=start + max(b - a - 1, 0) * increment,
                    ranges=v["ranges"][a:b].tolist(),
                    intensities=v["intensities"][a:b].tolist(),
                )
        case "point_cloud2":
            layout = m.VELODYNE_XYZIRT
            types = {"f4": "FLOAT32", "u2": "UINT16"}
            fields = [
                PackedElementField(
                    name=f.name,
                    offset=f.offset,
                    type=PackedElementField.NumericType.Value(types[f.dtype.str[1:]]),
                )
                for f in layout.fields
            ]

            def build(i):
                a, b = starts[i], ends[i]
                points = np.empty(b - a, layout.dtype)
                for f in layout.fields:
                    points[f.name] = v["columns"][f.name][a:b]
                return PointCloud(
                    timestamp=stamp(i),
                    frame_id="velodyne",
                    pose=identity,
                    point_stride=layout.point_step,
                    fields=fields,
                    data=points.tobytes(),
                )
        case "image":

            def build(i):
                return RawImage(
                    timestamp=stamp(i),
                    frame_id="camera",
                    width=640,
                    height=480,
                    encoding="mono8",
                    step=640,
                    data=blob[offsets[i] : offsets[i + 1]],
                )
        case "compressed_image":

            def build(i):
                data = blob[offsets[i] : offsets[i + 1]]
                return CompressedImage(
                    timestamp=stamp(i), frame_id="camera", format="jpeg", data=data
                )
        case "compressed_video":

            def build(i):
                data = blob[offsets[i] : offsets[i + 1]]
                return CompressedVideo(
                    timestamp=stamp(i), frame_id="camera", format="h264", data=data
                )

    return [build(i).SerializeToString() for i in range(count)]


def timed(fn: Callable[[], list[bytes]]) -> tuple[float, list[bytes]]:
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="tiny batches, a few seconds")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of ours (best counts)")
    parser.add_argument("--sample", type=int, default=5_000, help="naive messages per kind")
    args = parser.parse_args()
    if args.smoke:
        args.repeat, args.sample = 2, 200
    rng = np.random.default_rng(7)
    print(
        f"{'workload':<18}{'messages':>10}{'B/msg':>11}{'ours msg/s':>13}{'ours MB/s':>11}"
        f"{'naive msg/s':>13}{'ratio':>8}{'ROS 2 msg/s':>13}"
    )
    for label, kind, c in workloads(args.smoke, rng):
        t_ours = best_time(lambda kind=kind, c=c: ours(pb, kind, c), args.repeat)
        t_ros = best_time(lambda kind=kind, c=c: ours(m, kind, c), args.repeat)
        out = ours(pb, kind, c)
        big = out.data.size / max(c.n, 1) > 1e6
        count = min(c.n, 20 if big else args.sample)
        naive(kind, c, 1)  # warm-up
        t_naive, ref = timed(lambda kind=kind, c=c, count=count: naive(kind, c, count))
        if out.take(np.arange(count)).data.tobytes() != b"".join(ref):
            raise SystemExit(f"{label}: ours differs from the protobuf library's bytes")
        rate = c.n / t_ours
        if label in HEADLINE:
            figure(f"protobuf {label}", rate, count / t_naive, "msgs/s",
                   baseline_name="protobuf library, message by message")  # fmt: skip
        print(
            f"{label:<18}{c.n:>10,}{out.data.size / max(c.n, 1):>11,.0f}{rate:>13,.0f}"
            f"{out.data.size / MB / t_ours:>11,.0f}{count / t_naive:>13,.0f}"
            f"{rate * t_naive / count:>7,.1f}x{c.n / t_ros:>13,.0f}"
        )
    print("(the protobuf library's bytes equal ours on every sampled message)")


if __name__ == "__main__":
    main()
