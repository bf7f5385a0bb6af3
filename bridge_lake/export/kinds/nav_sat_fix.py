"""sensor_msgs/NavSatFix from normalized/gnss; protobuf: foxglove.LocationFix.

status -1 no fix, 0 fix, 1 SBAS, 2 GBAS; service a bit mask (1 GPS, 2 GLONASS, 4 COMPASS,
8 GALILEO); position_covariance_type 0 unknown, 1 approximated, 2 diagonal known, 3 known.
Altitude NaN is written as NaN ("no altitude", per the message). LocationFix has no fix
status, yet status -1 ("no fix") is what tells a reader to ignore a fix's position; so
status and service go into its `metadata` as the keys "status" and "service" with the
sensor_msgs/NavSatStatus values as decimal strings (e.g. "-1", "1").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from foxglove_schemas_protobuf.KeyValuePair_pb2 import KeyValuePair
from foxglove_schemas_protobuf.LocationFix_pb2 import LocationFix
from numpy.typing import ArrayLike

from bridge_lake.export.kinds.fixed import Field, header_message
from bridge_lake.export.kinds.kind import Codec, Kind
from bridge_lake.export.messages import arguments as arg
from bridge_lake.export.messages.serialized import Serialized
from bridge_lake.export.protobuf.wire import Fields
from bridge_lake.export.source import Builder, np_column
from bridge_lake.formats.ros.wire import F8, I1, U1, U2


@dataclass(frozen=True)
class NavSatFixColumns:
    stamp: np.ndarray
    frame_id: str
    status: np.ndarray
    service: np.ndarray
    latitude: np.ndarray
    longitude: np.ndarray
    altitude: np.ndarray
    position_covariance: np.ndarray
    position_covariance_type: np.ndarray


def columns(
    stamp_ns: ArrayLike,
    frame_id: str,
    *,
    latitude_deg: ArrayLike,
    longitude_deg: ArrayLike,
    altitude_m: ArrayLike,
    status: ArrayLike,
    service: ArrayLike,
    position_covariance: ArrayLike | None = None,
    position_covariance_type: ArrayLike = 0,
) -> NavSatFixColumns:
    """Scalars or (n,) for status, service and covariance type; (9,) or (n, 9) for the
    covariance (ENU, m^2, row major; default zeros with type 0)."""
    stamp = arg.stamps(stamp_ns)
    n = stamp.size
    status_arr = arg.per_message("status", status, n, I1)
    if status_arr.size and (status_arr.min() < -1 or status_arr.max() > 2):
        raise ValueError("status must be -1 (no fix), 0 (fix), 1 (SBAS) or 2 (GBAS)")
    cov_type = arg.per_message("position_covariance_type", position_covariance_type, n, U1)
    if cov_type.size and cov_type.max() > 3:
        raise ValueError("position_covariance_type must be 0 .. 3")
    cov = np.zeros(9) if position_covariance is None else position_covariance
    return NavSatFixColumns(
        stamp,
        arg.text("frame_id", frame_id),
        status_arr,
        arg.per_message("service", service, n, U2),
        arg.rows("latitude_deg", latitude_deg, n, F8),
        arg.rows("longitude_deg", longitude_deg, n, F8),
        arg.rows("altitude_m", altitude_m, n, F8),
        arg.per_message("position_covariance", cov, n, F8, (9,)),
        cov_type,
    )


def ros(c: NavSatFixColumns, ros: int, seq_start: int) -> Serialized:
    fields: list[Field] = [
        ("status", I1, 0, c.status),
        ("service", U2, 0, c.service),
        ("latitude", F8, 0, c.latitude),
        ("longitude", F8, 0, c.longitude),
        ("altitude", F8, 0, c.altitude),
        ("position_covariance", F8, 9, c.position_covariance),
        ("position_covariance_type", U1, 0, c.position_covariance_type),
    ]
    return header_message(ros, c.stamp, c.frame_id, seq_start, fields)


def protobuf(c: NavSatFixColumns) -> Serialized:
    """foxglove.LocationFix: the covariance always 9 values, its type the same-numbered
    PositionCovarianceType; status and service in `metadata`."""
    n = c.stamp.size
    fields = Fields(n)
    fields.double(1, c.latitude)
    fields.double(2, c.longitude)
    fields.double(3, c.altitude)
    fields.doubles(4, c.position_covariance)
    fields.varint(5, c.position_covariance_type)
    fields.timestamp(6, c.stamp)
    fields.string(7, c.frame_id)
    fields.ragged(_status_metadata(np.broadcast_to(c.status, (n,)), c.service, n))
    return fields.encode()


def _status_metadata(status: np.ndarray, service: np.ndarray, n: int) -> pa.LargeBinaryArray:
    """LocationFix field 9 (metadata) per message: protobuf encodes each distinct
    (status, service) pair once, a vectorized take picks one per message."""
    key = (status.astype(np.int64) + 1) << 16 | np.broadcast_to(service, (n,))
    distinct, index = np.unique(key, return_inverse=True)
    encoded = [
        LocationFix(
            metadata=[
                KeyValuePair(key="status", value=str((k >> 16) - 1)),
                KeyValuePair(key="service", value=str(k & 0xFFFF)),
            ]
        ).SerializeToString()
        for k in distinct.tolist()
    ]
    return pa.array(encoded, pa.large_binary()).take(pa.array(index.reshape(-1)))


class NavSatFixBuilder(Builder):
    """normalized/gnss rows; `options.status_by_fix_mode` maps the lake's fix mode to a
    NavSatStatus, `options.service` is the service mask; error_m becomes an approximated
    diagonal covariance."""

    columns = ["time_ns", "lat_deg", "lon_deg", "alt_m", "fix_mode", "error_m"]

    def columns_of(self, rows: pa.Table) -> NavSatFixColumns:
        opts = self.lane.rule.options
        mode = np_column(rows, "fix_mode", np.float64)
        status = np.zeros(len(mode), np.int8)
        for k, v in (opts.get("status_by_fix_mode") or {}).items():
            status[mode == int(k)] = int(v)
        status[np.isnan(mode)] = 0
        err = np_column(rows, "error_m")
        known = np.isfinite(err)
        cov = np.zeros((len(err), 9))
        cov[:, 0] = cov[:, 4] = cov[:, 8] = np.where(known, err**2, 0.0)
        return columns(
            self.t(rows),
            self.lane.frame_id,
            latitude_deg=np_column(rows, "lat_deg"),
            longitude_deg=np_column(rows, "lon_deg"),
            altitude_m=np_column(rows, "alt_m"),
            status=status,
            service=int(opts.get("service", 1)),
            position_covariance=cov,
            position_covariance_type=np.where(known, 1, 0).astype(np.uint8),  # 1 = approximated
        )


CODEC = Codec(columns, ros, protobuf, "foxglove.LocationFix", "nav_sat_fix")
OPTIONS = {"status_by_fix_mode": dict, "service": int}
TABLES = ("normalized/gnss",)
KIND = Kind(
    "sensor_msgs/msg/NavSatFix", TABLES, CODEC, NavSatFixBuilder, OPTIONS, faults=("gnss", "gps")
)
