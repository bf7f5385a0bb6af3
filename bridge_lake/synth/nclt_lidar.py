"""The synthetic NCLT lidars: ray casting a simple scene (ground plane, building walls,
poles) from the trajectory, written as velodyne_hits.bin + velodyne_sync packets and the two
Hokuyo logs, each with its planted faults."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bridge_lake.formats.nclt import constants as C
from bridge_lake.geometry import Transform, quaternion_to_rpy, rpy_to_matrix
from bridge_lake.synth.nclt_world import (
    AXLE_HEIGHT,
    BLOCKS_PER_PACKET,
    BLOCKS_PER_REV,
    MAST_HALF_WIDTH,
    MAX_RANGE,
    PACKETS_PER_REV,
    RATES_HZ,
    RETURN_FRACTION,
    REV_US,
    SEAM_PHASE_BLOCKS,
    SENSOR_HEIGHT,
    Trajectory,
    Writer,
    sample_times,
    sensor_mount,
)


@dataclass(frozen=True)
class Scene:
    """Vertical walls (segments, world NED) and poles (circles) standing on a level ground,
    shared by every range sensor."""

    walls: np.ndarray
    """(n, 4): x1, y1, x2, y2."""
    wall_height: np.ndarray
    poles: np.ndarray
    """(m, 4): x, y, radius, height."""

    @classmethod
    def make(cls, traj: Trajectory, rng: np.random.Generator) -> Scene:
        walls = []
        # The campus boundary around the loop and one building inside it.
        for x0, y0, x1, y1 in [(-118, -40, 60, 82), (-55, 5, -5, 35)]:
            walls += [(x0, y0, x1, y0), (x1, y0, x1, y1), (x1, y1, x0, y1), (x0, y1, x0, y0)]
        idx = rng.choice(len(traj.x), size=10, replace=False)
        side = rng.choice([-1.0, 1.0], 10) * rng.uniform(3, 6, 10)
        h = traj.heading[idx]
        px, py = traj.x[idx] - np.sin(h) * side, traj.y[idx] + np.cos(h) * side
        poles = np.stack([px, py, rng.uniform(0.1, 0.3, 10), rng.uniform(4, 8, 10)], -1)
        return cls(np.array(walls, float), rng.uniform(6, 15, len(walls)), poles)

    def horizontal(self, ox: np.ndarray, oy: np.ndarray, dx: np.ndarray, dy: np.ndarray):
        """Horizontal distance along unit 2D rays to the first wall and the first pole, with the
        height of what was hit (inf distance when nothing)."""
        ox, oy, dx, dy = ox[:, None], oy[:, None], dx[:, None], dy[:, None]
        x1, y1, x2, y2 = (self.walls[:, i][None, :] for i in range(4))
        ex, ey = x2 - x1, y2 - y1
        den = dx * ey - dy * ex
        with np.errstate(divide="ignore", invalid="ignore"):
            t = ((x1 - ox) * ey - (y1 - oy) * ex) / den
            u = ((x1 - ox) * dy - (y1 - oy) * dx) / den
        t = np.where((np.abs(den) > 1e-9) & (t > 0) & (u >= 0) & (u <= 1), t, np.inf)
        wi = t.argmin(axis=1)
        h_wall = t[np.arange(len(t)), wi]
        cx, cy, rr = (self.poles[:, i][None, :] for i in range(3))
        b = (ox - cx) * dx + (oy - cy) * dy
        c = (ox - cx) ** 2 + (oy - cy) ** 2 - rr**2
        disc = b**2 - c
        with np.errstate(invalid="ignore"):
            tp = -b - np.sqrt(disc)
        tp = np.where((disc >= 0) & (tp > 0), tp, np.inf)
        pi = tp.argmin(axis=1)
        h_pole = tp[np.arange(len(tp)), pi]
        return h_wall, self.wall_height[wi], h_pole, self.poles[pi, 3]

    def cast(
        self, origin: np.ndarray, direction: np.ndarray, height: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Distance along unit 3D rays (NED) from `height` metres above the ground to the first
        surface, and its class (0 none, 1 ground, 2 wall, 3 pole)."""
        dz = direction[:, 2]
        horiz = np.hypot(direction[:, 0], direction[:, 1])
        with np.errstate(divide="ignore", invalid="ignore"):
            flat = self.horizontal(
                origin[:, 0], origin[:, 1], direction[:, 0] / horiz, direction[:, 1] / horiz
            )
        return _first_surface(*flat, dz, horiz, height)


def _first_surface(
    hw: np.ndarray,
    top_w: np.ndarray,
    hp: np.ndarray,
    top_p: np.ndarray,
    dz: np.ndarray,
    horiz: np.ndarray,
    height: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Combine horizontal wall/pole distances with a ray's slope and the ground plane."""
    with np.errstate(divide="ignore", invalid="ignore"):
        candidates = np.stack(
            [
                np.where(dz > 1e-6, height / dz, np.inf),
                _within(hw / horiz, dz, height, top_w),
                _within(hp / horiz, dz, height, top_p),
            ]
        )
    what = candidates.argmin(axis=0)
    dist = candidates[what, np.arange(len(dz))]
    far = dist > MAX_RANGE
    dist[far] = np.inf
    return dist, np.where(far, 0, what + 1).astype(np.uint8)


def _within(t: np.ndarray, dz: np.ndarray, height: np.ndarray, top: np.ndarray) -> np.ndarray:
    """A vertical-surface hit at ray length t counts only between the ground and its top."""
    above = height - t * dz
    return np.where((above >= 0) & (above <= top), t, np.inf)


def _sensor_rays(traj: Trajectory, utime: np.ndarray, mount: Transform, local_dirs: np.ndarray):
    """World origins and directions of sensor-frame unit vectors at each utime (row-aligned).

    Rays of one scan share a utime: the body rotation is made once per distinct time (scipy's
    from_euler costs ~1 µs per row, most of a drive's synthesis when done per ray)."""
    times, inverse = np.unique(utime, return_inverse=True)
    at = traj.at(times)
    r_wb = rpy_to_matrix(at["roll"], at["pitch"], at["heading"])[inverse]
    p = {k: v[inverse] for k, v in at.items()}
    origin = np.stack([p["x"], p["y"], p["z"]], -1) + r_wb @ mount.translation
    direction = np.einsum("nij,jk,nk->ni", r_wb, mount.matrix, local_dirs)
    height = p["z"] + AXLE_HEIGHT - origin[:, 2]
    return origin, direction, height


def _encode(metres: np.ndarray) -> np.ndarray:
    return np.clip(np.round((metres - C.CODE_OFFSET) / C.CODE_SCALE), 0, 65535).astype(np.uint16)


def write_velodyne(
    w: Writer,
    traj: Trajectory,
    scene: Scene,
    rng: np.random.Generator,
    hits_per_rev: int,
    dropout: tuple[int, int] | None = None,
) -> None:
    """velodyne_hits.bin packets (firing order, ray-cast scene) and velodyne_sync scans, written
    one revolution pair at a time so memory stays bounded for long drives. No packet is
    written in the `dropout` utime range (its hits are drawn all the same, so the random
    stream of the rest stays as it was); revolutions it empties get no sync file."""
    t0 = int(traj.t_us[0])
    n_packets = int((traj.t_us[-1] - t0) * PACKETS_PER_REV / REV_US)
    keep_p = min(1.0, hits_per_rev / (BLOCKS_PER_REV * C.LASER_COUNT * RETURN_FRACTION))
    path = w.session / "velodyne_hits.bin"
    offsets: list[np.ndarray] = []
    revs: dict[int, dict[str, int]] = {}
    pending: dict[int, list[np.ndarray]] = {}
    size = n_hits = 0
    utimes: list[int] = []
    with path.open("wb") as out:
        for p0 in range(0, n_packets, 2 * PACKETS_PER_REV):
            k = np.arange(p0, min(n_packets, p0 + 2 * PACKETS_PER_REV))
            hits, packet, rev = _fire(traj, scene, rng, k, keep_p, t0, ends=p0 == 0)
            if dropout is not None:
                at = t0 + (packet * REV_US) // PACKETS_PER_REV
                sent = (at < dropout[0]) | (at >= dropout[1])
                hits, packet, rev = hits[sent], packet[sent], rev[sent]
                if len(hits) == 0:
                    continue
            starts = np.concatenate([[0], np.flatnonzero(np.diff(packet)) + 1])
            counts = np.diff(np.append(starts, len(packet)))
            pk_utime = t0 + (packet[starts] * REV_US) // PACKETS_PER_REV
            blob, at = _packets(hits, counts, pk_utime)
            out.write(blob)
            offsets.append(size + at)
            size += len(blob)
            n_hits += len(hits)
            utimes += [int(pk_utime[0]), int(pk_utime[-1])]
            hit_utime = np.repeat(pk_utime, counts)
            for r in np.unique(rev).tolist():
                sel = rev == r
                info = revs.setdefault(
                    r, {"rev": r, "start_utime": int(hit_utime[sel][0]), "hits": 0}
                )
                info["hits"] += int(sel.sum())
                if r % 2 == 0:
                    pending.setdefault(r, []).append(hits[sel])
            for r in [r for r in pending if r < rev[-1] or p0 + len(k) >= n_packets]:
                scan = np.concatenate(pending.pop(r))
                w.file(
                    f"velodyne_sync/{revs[r]['start_utime']}.bin",
                    scan.tobytes(),
                    hits=len(scan),
                    rev=r,
                )
        for r in sorted(pending):  # a dropout at the very end leaves revolutions behind
            scan = np.concatenate(pending.pop(r))
            w.file(
                f"velodyne_sync/{revs[r]['start_utime']}.bin", scan.tobytes(), hits=len(scan), rev=r
            )
    all_offsets = np.concatenate(offsets)
    _velodyne_faults(w, path, all_offsets)
    w.paths.append(path)
    w.truth["files"]["velodyne_hits.bin"] = {  # type: ignore[index]
        "bytes": path.stat().st_size,
        "packets": len(all_offsets),
        "hits": n_hits,
        "first_utime": utimes[0],
        "last_utime": utimes[-1],
        "code_ends": {"z": [0, 65535]},
        "revolutions": [revs[r] for r in sorted(revs)],
    }


def _fire(
    traj: Trajectory,
    scene: Scene,
    rng: np.random.Generator,
    k: np.ndarray,
    keep_p: float,
    t0: int,
    *,
    ends: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hits of packets `k` in firing order: (hits, packet index per hit, revolution per hit)."""
    slots = rng.random((len(k), BLOCKS_PER_PACKET * C.LASER_COUNT)) < keep_p
    pk, slot = np.nonzero(slots)
    packet = k[pk]
    block = packet * BLOCKS_PER_PACKET + slot // C.LASER_COUNT
    laser = slot % C.LASER_COUNT
    seam_block = block + SEAM_PHASE_BLOCKS
    rel = 2 * np.pi * (seam_block % BLOCKS_PER_REV) / BLOCKS_PER_REV
    az = C.REAR_AZIMUTH + rel
    e = np.radians(C.LASER_VERTICAL_DEG)[laser]
    local = np.stack([np.cos(e) * np.cos(az), np.cos(e) * np.sin(az), -np.sin(e)], -1)
    # Rays of one firing block share an azimuth: cast each block once in the horizontal plane
    # (sensor kept level; the body's ~1° tilt is ignored), then per laser add the slope.
    blocks, first, inverse = np.unique(block, return_index=True, return_inverse=True)
    b_utime = t0 + (blocks // BLOCKS_PER_PACKET * REV_US) // PACKETS_PER_REV
    p = traj.at(b_utime)
    velodyne = sensor_mount("velodyne")
    yaw_v = quaternion_to_rpy(velodyne.quaternion)[2]
    ch, sh = np.cos(p["heading"]), np.sin(p["heading"])
    mx, my = velodyne.translation[:2]
    ox, oy = p["x"] + ch * mx - sh * my, p["y"] + sh * mx + ch * my
    world_az = p["heading"] + yaw_v + az[first]
    flat = scene.horizontal(ox, oy, np.cos(world_az), np.sin(world_az))
    flat = [f[inverse] for f in flat]
    dist, what = _first_surface(*flat, -np.sin(e), np.cos(e), np.full(len(e), SENSOR_HEIGHT))
    unmasked = (rel > MAST_HALF_WIDTH) & (rel < 2 * np.pi - MAST_HALF_WIDTH)
    ok = unmasked & (what > 0) & (rng.random(len(dist)) > 0.02)
    pts = local[ok] * (dist[ok] + rng.normal(0, 0.01, int(ok.sum())))[:, None]
    hits = np.empty(len(pts), C.HIT_DTYPE)
    for i, axis in enumerate("xyz"):
        hits[axis] = _encode(pts[:, i])
    base = np.array([0, 20, 90, 160], np.int64)[what[ok]]
    hits["intensity"] = np.clip(base + rng.integers(0, 60, len(pts)), 0, 255)
    hits["laser_id"] = laser[ok]
    if ends:
        hits["z"][5], hits["z"][13] = 65535, 0  # both ends of the code range, azimuth untouched
    return hits, packet[ok], seam_block[ok] // BLOCKS_PER_REV


PACKET_HEADER = np.dtype([("magic", "<u8"), ("num_hits", "<u4"), ("utime", "<u8"), ("pad", "<u4")])


def _packets(hits: np.ndarray, counts: np.ndarray, utime: np.ndarray) -> tuple[bytes, np.ndarray]:
    """Serialize packets (header + hits) back to back; returns the bytes and packet offsets."""
    sizes = C.PACKET_HEADER_BYTES + C.HIT_BYTES * counts
    at = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    header = np.zeros(len(counts), PACKET_HEADER)
    header["magic"], header["num_hits"], header["utime"] = C.PACKET_MAGIC_U64, counts, utime
    buf = np.empty(int(sizes.sum()), np.uint8)
    buf[(at[:, None] + np.arange(C.PACKET_HEADER_BYTES)).ravel()] = header.view(np.uint8)
    first = np.repeat(at + C.PACKET_HEADER_BYTES, counts)
    idx = np.arange(len(hits)) - np.repeat(np.cumsum(counts) - counts, counts)
    pos = first + C.HIT_BYTES * idx
    buf[(pos[:, None] + np.arange(C.HIT_BYTES)).ravel()] = hits.view(np.uint8)
    return buf.tobytes(), at


def _velodyne_faults(w: Writer, path: Path, offsets: np.ndarray) -> None:
    """Packet faults, patched into the written file and recorded with the byte range a
    resynchronizing reader must skip and the hits it loses."""
    with path.open("r+b") as f:

        def num_hits(at: int) -> int:
            f.seek(at + 8)
            return struct.unpack("<I", f.read(4))[0]

        if "bad_magic" in w.faults:
            i = len(offsets) // 2
            at = int(offsets[i])
            w.fault(
                "bad_magic",
                file="velodyne_hits.bin",
                skipped=[at, int(offsets[i + 1])],
                lost_hits=num_hits(at),
            )
            f.seek(at)
            f.write(b"\0\0")
        last = int(offsets[-1])
        lost = num_hits(last)
        end = path.stat().st_size
        if "truncated_packet" in w.faults:
            end = last + C.PACKET_HEADER_BYTES + C.HIT_BYTES * (lost // 2)
            f.truncate(end)
            w.fault(
                "truncated_packet", file="velodyne_hits.bin", skipped=[last, end], lost_hits=lost
            )
        if "hits_past_eof" in w.faults:
            f.seek(last + 8)
            f.write(struct.pack("<I", lost + 100))
            w.fault("hits_past_eof", file="velodyne_hits.bin", skipped=[last, end], lost_hits=lost)


def write_hokuyo(w: Writer, traj: Trajectory, scene: Scene, rng: np.random.Generator) -> None:
    """Planar scans of the same walls and poles; no-returns written as code 20000 (0 m)."""
    for kind, max_range in (("hokuyo_30m", 30.0), ("hokuyo_4m", 4.0)):
        mount = sensor_mount(kind)
        spec = C.HOKUYO[kind]
        t = sample_times(traj, RATES_HZ[kind], rng, jitter=0.01)
        ang = spec["angle_min"] + np.arange(spec["ranges"]) * spec["angle_inc"]
        local = np.stack([np.cos(ang), np.sin(ang), np.zeros_like(ang)], -1)
        rec = np.zeros(len(t), np.dtype([("utime", "<u8"), ("r", "<u2", (spec["ranges"],))]))
        rec["utime"] = t
        for i0 in range(0, len(t), 64):
            tt = np.repeat(t[i0 : i0 + 64], len(ang))
            dirs = np.tile(local, (len(t[i0 : i0 + 64]), 1))
            origin, direction, ground = _sensor_rays(traj, tt, mount, dirs)
            dist, what = scene.cast(origin, direction, ground)
            dist = dist + rng.normal(0, 0.01, len(dist))
            codes = np.where((what > 0) & (dist < max_range), _encode(dist), _encode(np.zeros(1)))
            rec["r"][i0 : i0 + 64] = codes.reshape(-1, len(ang))
        w.file(
            f"{kind}.bin",
            rec.tobytes(),
            records=len(t),
            first_utime=int(t[0]),
            last_utime=int(t[-1]),
        )
